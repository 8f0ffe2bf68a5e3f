"""The test tiers (tests/tiers.py): every test module is in exactly one, a new module that fits
none fails, fixtures beyond a tier are caught, and the marks conftest.py gives are the ones
pyproject.toml registers."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from tests import tiers
from tests.helpers import ROOT

MODULES = sorted(path.stem for path in (ROOT / "tests").glob("test_*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_every_module_is_in_exactly_one_tier(module: str) -> None:
    assert tiers.tier(module) in tiers.TIERS
    by_pattern = {
        name
        for name, patterns in tiers.PATTERNS.items()
        for pattern in patterns
        if fnmatchcase(module, pattern)
    }
    assert module in tiers.MODULES or len(by_pattern) == 1


def test_a_module_that_fits_none_or_two_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(tiers.TierError, match=r"tests/test_new\.py is in no tier: .*tiers\.py"):
        tiers.tier("test_new")
    monkeypatch.setitem(tiers.PATTERNS, "records", ("test_plan_*",))
    with pytest.raises(tiers.TierError, match=r"in 2 tiers \(records, unit\)"):
        tiers.tier("test_plan_new")
    assert tiers.tier("test_plan_calibrate") == "records"  # its own entry decides


def test_a_new_module_named_as_its_kin_needs_no_entry() -> None:
    assert tiers.tier("test_plan_new") == "unit"
    assert tiers.tier("test_chart_new") == "chart"
    assert tiers.tier("test_verify_new") == "integration"


def test_fixtures_beyond_a_tier_are_caught() -> None:
    assert "'helm4', beyond the unit tier" in (tiers.misplaced("unit", ["tmp_path", "helm4"]) or "")
    assert tiers.misplaced("chart", ["kube"]) is not None
    assert tiers.misplaced("chart", ["helm", "rendered"]) is None
    assert tiers.misplaced("integration", ["kube", "helm"]) is None


def test_the_tiers_are_the_registered_marks(request: pytest.FixtureRequest) -> None:
    registered = [line.split(":")[0] for line in request.config.getini("markers")]
    assert registered[: len(tiers.TIERS)] == list(tiers.TIERS)  # then plugins' marks
    assert set(tiers.MODULES.values()) | set(tiers.PATTERNS) <= set(tiers.TIERS)
    own = [mark.name for mark in request.node.iter_markers() if mark.name in tiers.TIERS]
    assert own == ["unit"]  # conftest marked this very test
