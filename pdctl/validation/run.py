"""Validate one values file: load, apply --set, schema, PD rules, and optionally render."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.validation.findings import Finding, Severity
from pdctl.validation.inputs import STDIN
from pdctl.values.loader import Document, ValuesLoadError, load, loads
from pdctl.values.setvalues import apply_sets


@dataclass
class Options:
    set_values: Sequence[str] = ()
    release: str = "pd"
    render: bool = False
    kube_version: str = "1.35"
    helm_path: str | None = None
    chart: Path | None = None


@dataclass
class FileReport:
    name: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.error]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.warning]

    def passed(self, strict: bool = False) -> bool:
        return not self.errors and not (strict and self.warnings)

    def as_dict(self, strict: bool = False) -> dict[str, Any]:
        return {
            "file": self.name,
            "valid": self.passed(strict),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [f.as_dict() for f in self.findings],
        }


def _read(name: str) -> Document:
    if name == STDIN:
        return loads(sys.stdin.read())
    return load(Path(name))


def _render_findings(data: dict[str, Any], options: Options) -> list[Finding]:
    import yaml

    from pdctl.errors import InputError
    from pdctl.render import render
    from pdctl.validation.kube import check_objects

    with tempfile.TemporaryDirectory(prefix="pdctl-validate-") as tmp:
        values = Path(tmp) / "values.yaml"
        values.write_text(yaml.safe_dump(data), encoding="utf-8")
        try:
            rendered = render(
                [values],
                release=options.release,
                chart=options.chart,
                helm_path=options.helm_path,
                kube_version=options.kube_version,
            )
        except InputError as error:
            return [Finding("HELM", Severity.error, error.message)]
    return check_objects(rendered.objects, options.kube_version)


def validate_data(document: Document, options: Options) -> list[Finding]:
    """Schema and PD rules over a loaded document (with --set applied); lines filled in."""
    from pdctl.chart import bundled_chart_dir
    from pdctl.rules import run_rules
    from pdctl.validation.schema import check

    chart = options.chart or bundled_chart_dir()
    findings = check(document.data, chart / "values.schema.json")
    findings += run_rules(document.data, options.release, chart)
    for finding in findings:
        if finding.line is None and finding.path:
            finding.line = document.line_of(finding.path)
    if options.render and not any(f.severity is Severity.error for f in findings):
        findings += _render_findings(document.data, options)
    return findings


def validate_file(name: str, options: Options) -> FileReport:
    """Everything `pdctl validate` checks for one file; only an environment problem raises."""
    report = FileReport(name="<stdin>" if name == STDIN else name)
    try:
        document = _read(name)
    except ValuesLoadError as error:
        report.findings.append(
            Finding(error.code, Severity.error, error.reason, (), None, error.line, error.column)
        )
        return report
    apply_sets(document.data, options.set_values)
    report.findings = validate_data(document, options)
    return report
