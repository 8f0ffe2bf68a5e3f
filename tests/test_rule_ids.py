"""The chart's refusals and `pdctl validate`'s rules share their ids, both ways: every `[PDnnn]` a
chart template fails with is a registered error rule, and every error rule is refused by the chart
too, except those that say why not (validate-only)."""

from __future__ import annotations

import sys

from pdctl.findings import Severity
from pdctl.rules import load_rules
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from reference_pages import chart_rule_ids  # noqa: E402

# Error rules the chart does not repeat, with the reason (the rule's docstring says it too).
VALIDATE_ONLY = {
    "PD007": "Kubernetes refuses an over-long name at install with its own message; helm template "
    "has no length limit",
}


def test_every_id_the_chart_fails_with_is_a_registered_error_rule() -> None:
    rules = load_rules()
    unknown = sorted(i for i in chart_rule_ids() if i not in rules)
    assert not unknown, f"the chart fails with ids no rule has: {unknown}"
    warnings = sorted(i for i in chart_rule_ids() if rules[i].severity is not Severity.error)
    assert not warnings, f"the chart refuses what validate only warns about: {warnings}"


def test_every_error_rule_is_refused_by_the_chart_too() -> None:
    errors = {i for i, r in load_rules().items() if r.severity is Severity.error}
    assert VALIDATE_ONLY.keys() <= errors
    missing = sorted(errors - chart_rule_ids() - VALIDATE_ONLY.keys())
    assert not missing, f"error rules the chart does not refuse: {missing}"
    assert not VALIDATE_ONLY.keys() & chart_rule_ids(), "a validate-only rule is in the chart now"
    for rule_id in VALIDATE_ONLY:
        assert "Validate only" in (load_rules()[rule_id].check.__doc__ or ""), rule_id
