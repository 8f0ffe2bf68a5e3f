"""The red-team set (benchmarks/redteam): its case table stays well-formed, and a dozen fast
cases, one or more per kind of hostile input, pass through the real runner against this checkout
(each a pdctl subprocess, or a scenario of clients.py, under the 4 GiB address-space limit, with
the real helm; the servers are the hostile-server double, not vLLM; the simulator is pd-stack's
engine simulator, not vLLM)."""

from __future__ import annotations

import re
import string

import pytest

from benchmarks.redteam import run
from benchmarks.redteam.cases import AREAS, CASES, SECRETS, Case
from benchmarks.redteam.clients import CLIENTS
from benchmarks.redteam.hostile_server import MODES
from tests.helpers import ROOT

PLACEHOLDERS = {"work", "marker", "values", "repo", "helm3", "helm4", "server", "server2"}
STEPS = {"file", "bytes", "fifo", "link", "dir", "sparse", "many", "script", "helm"}
# Fast cases, each covering a fix of its area.
SUBSET = [
    "a1-template-release-post-renderer",
    "a1-template-release-uppercase",
    "a2-validate-fifo",
    "a2-validate-zero-link",
    "a3-validate-esc-byte",
    "a3-validate-deep-block-400",
    "a4-validate-trailing-document",
    "a4-validate-set-True",
    "a5-bench-all-fail",
    "a6-validate-token-with-xxx",
    "a7-output-dir-stale",
    "a7-sigterm-during-validate-render",
    "a8-sim-list",
    "a8-sim-max-tokens-negative",
    "a8-sim-oversized-body",
    "a8-sim-abandoned-streams",
    "a8-down-stale-state",
    "a8-down-racing-up",
    "a2-up-rendered-fifo",
    "a7-up-state-lock-symlink",
    "a9-up-env-pythonpath",
    "a9-up-rendered-command-shell",
    "a9-up-rendered-host-prefix",
]
BY_ID = {case.id: case for case in CASES}


def _placeholders(case: Case) -> set[str]:
    texts = [*case.argv, *(value for _, value in case.env)]
    texts += [part for step in case.setup for part in step[1:] if step[0] != "file"]
    return {
        name
        for text in texts
        for _, name, _, _ in string.Formatter().parse(text.replace("{{", "").replace("}}", ""))
        if name
    }


def test_the_table_has_at_least_100_cases_across_all_areas() -> None:
    assert len(CASES) >= 100
    per_area = {area: sum(case.area == area for case in CASES) for area in AREAS}
    assert all(count >= 10 for count in per_area.values()), per_area


def test_case_ids_are_unique_and_name_their_area() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert re.fullmatch(rf"a{case.area}-[a-zA-Z0-9-]+[a-zA-Z0-9]", case.id), case.id


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_case_is_well_formed(case: Case) -> None:
    assert case.argv and all(isinstance(arg, str) for arg in case.argv)
    assert case.expect and all(isinstance(code, int) for code in case.expect)
    assert case.note.strip()
    assert 0 < case.deadline <= 120
    assert {step[0] for step in case.setup} <= STEPS
    assert {mode for _, mode in case.servers} <= set(MODES)
    assert _placeholders(case) <= PLACEHOLDERS
    assert set(case.secret_streams) <= {"stdout", "stderr"}
    assert case.signal in (None, "TERM", "INT")
    if case.authorized:
        assert case.servers
    assert case.script is None or case.script in CLIENTS


def test_the_planted_secrets_are_distinct_and_the_xxx_token_is_among_them() -> None:
    assert len(set(SECRETS)) == len(SECRETS)
    assert any("xxx" in secret for secret in SECRETS)


def test_the_subset_covers_every_area() -> None:
    assert {BY_ID[case_id].area for case_id in SUBSET} == set(AREAS)


@pytest.fixture(scope="module")
def target() -> run.Target:
    return run.Target.of(ROOT)


@pytest.mark.parametrize("case_id", SUBSET)
def test_a_hostile_case_passes_every_invariant(case_id: str, target: run.Target) -> None:
    result = run.run_case(BY_ID[case_id], target)
    assert result.verdict == "pass", (
        f"{case_id}: {result.reason}\nstdout: {result.stdout[-2000:]}\n"
        f"stderr: {result.stderr[-2000:]}"
    )
    assert result.rc in BY_ID[case_id].expect
