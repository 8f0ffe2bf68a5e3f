"""What `pdctl validate` reports for one values file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.findings import Finding, Severity


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

    @classmethod
    def unread(cls, name: str, problem: str, severity: Severity = Severity.error) -> FileReport:
        """A file a directory scan found but did not read, with why."""
        return cls(name, [Finding("FILE", severity, problem, file=name)])

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
