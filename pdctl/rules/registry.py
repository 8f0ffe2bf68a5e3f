"""The registry of PD rules: each has an id, a one-line explanation and a default severity.

Every module of the pdctl.rules package registers its rules with @rule when imported;
`run_rules` imports them all, so a new rule module needs no list kept by hand.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import chart, connectors
from pdctl.findings import Finding, Severity
from pdctl.naming import Release
from pdctl.rules.model import Deployment
from pdctl.rules.reads import Reads, watch
from pdctl.values.coalesce import with_defaults
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
Check = Callable[[Any], Iterator[Issue]]


def rule(rule_id: str, title: str, severity: Severity = Severity.error) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, title, severity, check)
        return check

    return register


@functools.cache
def load_rules() -> dict[str, Rule]:
    """Import every module of this package (each registers its rules); the rules by id."""
    package = importlib.import_module("pdctl.rules")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"pdctl.rules.{module.name}")
    return dict(sorted(RULES.items()))


def run_rules(
    values: dict[str, Any],
    release: str = "pd",
    chart_dir: Path | None = None,
    namespace: str = "default",
    refused: Collection[KeyPath] = (),
) -> list[Finding]:
    """Run every registered rule over user values (merged with the chart's defaults here, as
    helm does). A rule that reads a key in `refused` (the paths the schema refused) reports
    nothing from then on, and a rule that fails on such a key is silent too: the schema's error
    is the one to show. A rule that fails on values the schema accepted is a bug and raises."""

    chart_dir = chart_dir or chart.bundled_chart_dir()
    reads = Reads()
    effective = watch(with_defaults(chart.default_values(chart_dir), values), reads)
    deployment = Deployment.from_values(
        effective, Release(release, namespace), connectors.load(chart_dir), chart_dir
    )
    pools_read = reads.paths  # finding the pools: every rule stands on it
    refused = set(refused)
    findings = []
    for registered in load_rules().values():
        reads.restart(pools_read)
        try:
            for issue in registered.check(deployment):
                if reads.touched(refused):
                    break
                findings.append(_finding(registered, issue, frozenset(reads.paths)))
        except Exception:
            if not reads.touched(refused):
                raise
    return findings


def _finding(registered: Rule, issue: Issue, inputs: frozenset[KeyPath]) -> Finding:
    return Finding(
        rule=registered.id,
        severity=issue.severity or registered.severity,
        message=issue.message,
        path=issue.path,
        hint=issue.hint,
        inputs=inputs,
    )
