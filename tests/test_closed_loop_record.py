"""The kept record of a PD pair's closed loop on real vLLM
(benchmarks/records/pdctl-up-h200-1gpu-closed-loop.json, benchmarks/real_engines/closed_loop.py)
says what docs/simulator.md says it does: verify proved PD, every request was served, and at 32
in flight the prompts stay in groups (TTFT p50 several times the single request's over every
window of the 42-wave loop), as the simulator's loop does over its first ten waves and an M/D/1
queue (the planner's) does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.real_engines import closed_loop
from tests.helpers import ROOT

RECORD = ROOT / "benchmarks" / "records" / "pdctl-up-h200-1gpu-closed-loop.json"


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def _windows(record: dict[str, Any]) -> dict[tuple[int, int], dict[str, float]]:
    return {
        (loop["load"]["concurrency"], len(loop["requests_ms"])): closed_loop.windows(
            loop["requests_ms"], loop["load"]["concurrency"]
        )
        for loop in record["closed_loop"]["loops"]
    }


def test_pd_was_proven_and_every_request_served(record: dict[str, Any]) -> None:
    assert "verify passed: 10 passed, 0 failed, 0 skipped, 0 warned; PD proven" in record["verify"]
    for loop in record["closed_loop"]["loops"]:
        assert not loop["errors"] and len(loop["requests_ms"]) == loop["load"]["requests"]
    assert all(step["errors"] == 0 for step in record["bench"]["steps"])


def test_the_windows_in_the_record_are_what_the_requests_give(record: dict[str, Any]) -> None:
    assert list(record["closed_loop_ttft_p50_ms"].values()) == list(_windows(record).values())


def test_at_32_in_flight_the_prompts_stay_in_groups(record: dict[str, Any]) -> None:
    found = _windows(record)
    alone = found[(1, 11)]["waves 2-11"]
    long = found[(32, 32 * closed_loop.LONG_WAVES)]
    assert set(long) == {"waves 2-11", "waves 12-21", "waves 22-41"}
    assert all(ttft > 4 * alone for ttft in long.values()), (alone, long)


def test_the_simulator_groups_as_the_record_does() -> None:
    """The same workload on H200 in virtual time: the simulator's waves 2-11 queue several times
    the single request's TTFT, as the record's do."""
    simulated, _ = closed_loop.simulated("meta-llama/Llama-3.1-8B-Instruct", "H200", 32, 11)
    single, _ = closed_loop.simulated("meta-llama/Llama-3.1-8B-Instruct", "H200", 1, 11)
    assert simulated["waves 2-11"] > 3 * single["waves 2-11"]
