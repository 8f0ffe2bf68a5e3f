"""Every check of a values mapping: the chart's schema (pdctl's own pass), the chart's refusals
(helm template) and the rules pdctl checks itself (warnings, and PD007)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.chart import default_values
from pdctl.findings import Finding
from pdctl.helm import Helm
from pdctl.rules import run_rules
from pdctl.validation.refusals import refusals
from pdctl.validation.schema import check
from pdctl.values.coalesce import with_defaults


def check_values(
    helm: Helm, data: dict[str, Any], release: str, chart: Path, namespace: str = "default"
) -> list[Finding]:
    """Schema findings (on the values merged with the chart's defaults, as helm checks them),
    then the chart's refusals (only of values the schema accepted: pdctl.validation.refusals)
    and pdctl's rules (silent when they read a key the schema refused)."""

    defaults = default_values(chart)
    findings = check(with_defaults(defaults, data), chart / "values.schema.json", defaults)
    refused = {finding.path for finding in findings}
    if not findings:
        findings = refusals(helm, data, chart, release, namespace)
    return findings + run_rules(data, release, chart, namespace, refused)
