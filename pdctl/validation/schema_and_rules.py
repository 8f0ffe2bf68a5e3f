"""Every check of a values mapping: the chart's schema (helm's pass, and pdctl's own where helm's
fails), the chart's refusals (helm template) and the rules pdctl checks itself (warnings, and
PD007)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl import defaults
from pdctl.chart import default_values
from pdctl.findings import Finding
from pdctl.helm import Helm
from pdctl.rules import run_rules
from pdctl.rules.flags import overridden_flags
from pdctl.rules.registry import prepare
from pdctl.validation.refusals import ask_chart, asking_chart
from pdctl.validation.schema import check
from pdctl.values.coalesce import with_defaults


def check_values(
    helm: Helm, data: dict[str, Any], release: str, chart: Path, namespace: str = defaults.NAMESPACE
) -> list[Finding]:
    """The chart's answer first, helm applying the chart's schema as `helm install` does (the rule
    modules and the data they read load while helm renders): values it renders passed the
    schema and every refusal, and only the warnings are left (PD117 and pdctl's rules, which read
    the render: the chart's summary of each pool). Values it fails get pdctl's own schema pass,
    which says where and why (on the values merged with the chart's defaults, as helm checks
    them); only values that pass it get the chart's refusals (pdctl.validation.refusals), asked
    again without helm's schema pass where that one failed. Where the chart refuses, it renders
    nothing: the rules that read its facts say nothing (the chart's errors are the answer), and
    pdctl's rules are silent when they read a key the schema refused."""

    with asking_chart(helm, data, chart, release, namespace, schema=True) as answer_of:
        prepare(chart)
        answer = answer_of()
    schema_findings = [] if answer.rendered else _schema_findings(data, chart)
    if schema_findings:
        refused = {finding.path for finding in schema_findings}
        return schema_findings + run_rules(data, None, release, chart, namespace, refused)
    if answer.schema_failed:
        answer = ask_chart(helm, data, chart, release, namespace)
    rendered = answer.objects if answer.rendered else None
    return (
        answer.refusals
        + overridden_flags(data, answer.objects)
        + run_rules(data, rendered, release, chart, namespace)
    )


def _schema_findings(data: dict[str, Any], chart: Path) -> list[Finding]:
    """pdctl's schema pass of the values merged with the chart's defaults."""
    chart_defaults = default_values(chart)
    return check(with_defaults(chart_defaults, data), chart / "values.schema.json", chart_defaults)
