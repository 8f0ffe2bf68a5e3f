"""The chart's refusals as findings: `helm template` of the values, and each line of its failure.

The chart refuses values by itself (helm/templates/_checks.tpl): it fails once, listing every
refusal on a line of its own, `[PDnnn] key.path: message`, the message ending in `(hint: ...)`
where the chart says what to do. pdctl's own schema pass runs first,
so helm runs with --skip-schema-validation, and only for values the schema accepted: a refusal
reasoning from a refused value would be a second, misleading error for one cause (the chart
cannot say which keys a check read), so the schema's errors are fixed first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import manifests
from pdctl.findings import Finding, Severity
from pdctl.helm import Helm, TemplateRequest, values_file
from pdctl.manifests import Manifest
from pdctl.values.paths import KeyPath

# One refusal line: the rule id, the key path (no spaces), then the message.
REFUSAL = re.compile(r"\[(PD\d{3})\] ([A-Za-z0-9_.\[\]-]+): (.+)")
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_path(text: str) -> KeyPath:
    """ "a.b[0].c" -> ("a", "b", 0, "c") (format_path read back)."""
    return tuple(int(index) if index else key for key, index in _PART.findall(text))


def _finding(rule: str, path: str, text: str) -> Finding:
    """One refusal; a message ending in `(hint: ...)` gives the hint."""
    message, marker, hint = text.strip().removesuffix(")").rpartition(" (hint: ")
    if not marker:
        return Finding(rule, Severity.error, text.strip(), parse_path(path))
    return Finding(rule, Severity.error, message, parse_path(path), hint)


def parse(stderr: str) -> list[Finding]:
    """Every refusal line of helm's failure, in order."""
    return [_finding(*found) for found in REFUSAL.findall(stderr)]


@dataclass(frozen=True)
class ChartAnswer:
    """What `helm template` said: its refusals, or (accepted) the objects it rendered."""

    refusals: list[Finding]
    objects: list[Manifest]


def ask_chart(
    helm: Helm, data: dict[str, Any], chart: Path, release: str, namespace: str
) -> ChartAnswer:
    """The chart's refusals of user values (helm merges them with the chart's defaults), a
    failure that is no refusal as one HELM finding; or the objects it rendered."""
    with values_file(data) as path:
        request = TemplateRequest(
            chart=chart,
            release=release,
            namespace=namespace,
            values_files=(path,),
            skip_schema_validation=True,
        )
        result = helm.run(request.args())
    if result.returncode == 0:
        return ChartAnswer([], manifests.parse(result.stdout))
    error = f"helm template failed: {result.stderr.strip()}"
    return ChartAnswer(parse(result.stderr) or [Finding("HELM", Severity.error, error)], [])
