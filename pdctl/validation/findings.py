"""One problem found in a values file, whichever check found it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pdctl.values.paths import KeyPath, format_path


class Severity(str, Enum):
    error = "error"
    warning = "warning"


@dataclass
class Finding:
    rule: str  # e.g. PD003, SCHEMA, YAML002, KUBE
    severity: Severity
    message: str
    path: KeyPath = ()
    hint: str | None = None
    line: int | None = None
    column: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return format_path(self.path) if self.path else ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.key or None,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
        }
