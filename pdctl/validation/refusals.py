"""The chart's refusals as findings: `helm template` of the values, and each line of its failure.

The chart refuses values by itself (helm/templates/_checks.tpl): it fails once, listing every
refusal on a line of its own, `[PDnnn] key.path: message`, the message ending in `(hint: ...)`
where the chart says what to do. Asked with `schema=True`, helm applies the chart's
values.schema.json first, as `helm install` does, and a schema failure stops it before the
refusals; without, helm skips its schema pass (--skip-schema-validation) and answers with the
refusals of values that pdctl's own schema pass accepted (pdctl.validation.schema_and_rules).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
# How Helm 3 and 4 begin the error when values fail the chart's values.schema.json.
SCHEMA_FAILURE = "values don't meet the specifications of the schema"


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
    # helm's own schema pass failed (asked with schema=True): no refusal was asked. Also set
    # where a refusal's message quotes a value holding SCHEMA_FAILURE: asked again, no harm.
    schema_failed: bool = False

    @property
    def rendered(self) -> bool:
        return not self.refusals


@contextmanager
def asking_chart(
    helm: Helm,
    data: dict[str, Any],
    chart: Path,
    release: str,
    namespace: str,
    schema: bool = False,
) -> Iterator[Callable[[], ChartAnswer]]:
    """ask_chart with helm rendering in the background during the block; the function yielded
    waits for its answer. A helm still running when the block ends is stopped."""
    with values_file(data) as path:
        request = TemplateRequest(
            chart=chart,
            release=release,
            namespace=namespace,
            values_files=(path,),
            skip_schema_validation=not schema,
        )
        with helm.start(request.args()) as child:
            yield lambda: _answer(child.finish(), schema)


def ask_chart(
    helm: Helm,
    data: dict[str, Any],
    chart: Path,
    release: str,
    namespace: str,
    schema: bool = False,
) -> ChartAnswer:
    """The chart's refusals of user values (helm merges them with the chart's defaults), a
    failure that is no refusal as one HELM finding; or the objects it rendered. With schema,
    helm applies the chart's schema first (the module docstring)."""
    with asking_chart(helm, data, chart, release, namespace, schema) as answer:
        return answer()


def _answer(result: subprocess.CompletedProcess[str], schema: bool) -> ChartAnswer:
    if result.returncode == 0:
        return ChartAnswer([], manifests.parse(result.stdout))
    error = f"helm template failed: {result.stderr.strip()}"
    refusals = parse(result.stderr) or [Finding("HELM", Severity.error, error)]
    return ChartAnswer(refusals, [], schema and SCHEMA_FAILURE in result.stderr)
