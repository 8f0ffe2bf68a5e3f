"""Every check of a values mapping: the chart's schema (pdctl's own pass), the chart's refusals
(helm template) and the rules pdctl checks itself (warnings, and PD007)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl import defaults
from pdctl.chart import default_values
from pdctl.findings import Finding
from pdctl.helm import Helm
from pdctl.rules import run_rules
from pdctl.rules.flags import overridden_flags
from pdctl.validation.refusals import ask_chart
from pdctl.validation.schema import check
from pdctl.values.coalesce import with_defaults


def check_values(
    helm: Helm, data: dict[str, Any], release: str, chart: Path, namespace: str = defaults.NAMESPACE
) -> list[Finding]:
    """Schema findings (on the values merged with the chart's defaults, as helm checks them),
    then the chart's refusals (only of values the schema accepted: pdctl.validation.refusals)
    or, when it rendered, the warnings that read the render (PD117), and pdctl's rules (silent
    when they read a key the schema refused)."""

    defaults = default_values(chart)
    findings = check(with_defaults(defaults, data), chart / "values.schema.json", defaults)
    refused = {finding.path for finding in findings}
    if not findings:
        answer = ask_chart(helm, data, chart, release, namespace)
        findings = answer.refusals + overridden_flags(data, answer.objects)
    return findings + run_rules(data, release, chart, namespace, refused)
