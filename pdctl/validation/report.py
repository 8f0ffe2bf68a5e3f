"""What `pdctl validate` reports for one values file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.findings import Finding, Severity


@dataclass(frozen=True)
class RenderCheck:
    """What `validate --render` rendered and checked; helm_version None: it did not render."""

    kube_version: str
    helm_version: str | None = None
    objects: int = 0

    def describe(self) -> str:
        if self.helm_version is None:
            return (
                f"not rendered, nor checked against Kubernetes {self.kube_version} schemas: "
                "fix the errors first"
            )
        return (
            f"rendered with helm {self.helm_version}: {self.objects} objects, checked against "
            f"Kubernetes {self.kube_version} schemas"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "rendered": self.helm_version is not None,
            "helm_version": self.helm_version,
            "objects": self.objects,
            "kube_version": self.kube_version,
        }


@dataclass
class FileReport:
    name: str
    findings: list[Finding] = field(default_factory=list)
    render: RenderCheck | None = None  # with --render

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
            **({"render": self.render.as_dict()} if self.render else {}),
        }
