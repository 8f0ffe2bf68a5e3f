"""The registry of PD rules: each has an id, a one-line explanation and a default severity."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.validation.findings import Finding, Severity
from pdctl.values.paths import KeyPath


@dataclass(frozen=True)
class Issue:
    """What a rule reports; the registry turns it into a Finding with the rule's id."""

    path: KeyPath
    message: str
    hint: str | None = None
    severity: Severity | None = None  # None: the rule's default


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    severity: Severity
    check: Callable[[Any], Iterator[Issue]]


RULES: dict[str, Rule] = {}


def rule(
    rule_id: str, title: str, severity: Severity = Severity.error
) -> Callable[[Callable[[Any], Iterator[Issue]]], Callable[[Any], Iterator[Issue]]]:
    def register(check: Callable[[Any], Iterator[Issue]]) -> Callable[[Any], Iterator[Issue]]:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, title, severity, check)
        return check

    return register


def run_rules(
    values: dict[str, Any], release: str = "pd", chart_dir: Path | None = None
) -> list[Finding]:
    """Run every registered rule over a values mapping (already schema-checked or not)."""
    from pdctl.rules import connectors, pairing, pools, router  # noqa: F401  (registers rules)
    from pdctl.rules.model import Deployment

    deployment = Deployment.from_values(values, release, chart_dir)
    findings = []
    for registered in RULES.values():
        for issue in registered.check(deployment):
            findings.append(
                Finding(
                    rule=registered.id,
                    severity=issue.severity or registered.severity,
                    message=issue.message,
                    path=issue.path,
                    hint=issue.hint,
                )
            )
    return findings
