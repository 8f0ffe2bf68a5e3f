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
    file: str | None = None  # the values file the line is in (several -f files merged)
    # The --set assignment (`key=value`) that wrote the key, for a finding it caused: shown
    # where a file and line would be.
    assignment: str | None = None
    # For a PD rule's finding: the keys the rule had read when it reported (pdctl.rules.reads).
    inputs: frozenset[KeyPath] = field(default=frozenset(), compare=False, repr=False)

    @property
    def key(self) -> str:
        return format_path(self.path) if self.path else ""

    @property
    def flag(self) -> str | None:
        """`--set key=value` for a finding a --set assignment caused."""
        return f"--set {self.assignment}" if self.assignment else None

    def text(self, file: str | None = None) -> str:
        """One line for people: "file:line: severity RULE [key]: message" (file: this finding's,
        else the one given), or "--set key=value: ..." for a finding that --set caused."""
        where = self.flag or (self.file or file or "") + (f":{self.line}" if self.line else "")
        key = f" [{self.key}]" if self.key else ""
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.severity.value} {self.rule}{key}: {self.message}"

    def lines(self, file: str | None = None) -> list[str]:
        """text(), then the hint on a line of its own: what every command prints."""
        return [self.text(file)] + ([f"    hint: {self.hint}"] if self.hint else [])

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.key or None,
            "file": self.file,
            "line": self.line,
            "set": self.assignment,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
        }
