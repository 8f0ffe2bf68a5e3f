"""Every check of a values mapping that needs no helm: the chart's schema and the PD rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl import defaults
from pdctl.chart import default_values
from pdctl.findings import Finding
from pdctl.rules import run_rules
from pdctl.validation.schema import check
from pdctl.values.coalesce import with_defaults


def check_values(
    data: dict[str, Any], release: str, chart: Path, namespace: str = defaults.NAMESPACE
) -> list[Finding]:
    """Schema findings (on the values merged with the chart's defaults, as helm checks them),
    then the PD rules, silent where they would reason from a key the schema refused."""

    defaults = default_values(chart)
    findings = check(with_defaults(defaults, data), chart / "values.schema.json", defaults)
    refused = {finding.path for finding in findings}
    return findings + run_rules(data, release, chart, namespace, refused)
