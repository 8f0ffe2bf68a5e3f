"""The kept records of a PD pair's closed loop on real vLLM (benchmarks/real_engines/closed_loop.py)
say what docs/simulator.md says they do. benchmarks/records/pdctl-up-h200-1gpu-closed-loop.json:
verify proved PD, every request was served, and with every output 128 tokens the prompts stay in
groups at 32 in flight (TTFT p50 several times the single request's over every window of the
42-wave loop), as the simulator's loop does over its first ten waves.
benchmarks/records/pdctl-up-h200-1gpu-closed-loop-spread.json: with outputs within 20% of 128
the groups are gone and TTFT grows with the load as the plan's does."""

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


SPREAD_RECORD = ROOT / "benchmarks" / "records" / "pdctl-up-h200-1gpu-closed-loop-spread.json"


def _send_gaps_under_1ms(loop: dict[str, Any], first: int, last: int) -> float:
    """The share of gaps between consecutive sends under 1 ms in a window of waves: clients that
    send together (groups) leave gaps of about nothing."""
    concurrency = loop["load"]["concurrency"]
    ended = sorted(loop["requests_ms"], key=lambda r: r[2])
    sends = sorted(r[0] for r in ended[(first - 1) * concurrency : last * concurrency])
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    return sum(gap < 1 for gap in gaps) / len(gaps)


def test_outputs_that_vary_put_real_clients_out_of_step() -> None:
    """The second record (same pair, one lease): outputs within 20% of 128, then every output 128
    as the control. With outputs that vary, few sends come together (under 5% of the gaps in every
    window of the 42-wave loop at 32, against over 15% with equal outputs), TTFT at 32 in flight is
    under 60% of the control's in every window, and from 8 to 32 in flight (waves 2-11 of the long
    loop) it grows within 15% as much as the plan's, where the control grows about twice as much
    (docs/simulator.md)."""
    record = json.loads(SPREAD_RECORD.read_text())
    assert "verify passed: 10 passed, 0 failed, 0 skipped, 0 warned; PD proven" in record["verify"]
    spread, equal = record["closed_loop"]["loops"], record["closed_loop_equal"]["loops"]
    assert [loop["load"]["output_spread"] for loop in spread] == [0.2] * 4
    assert [loop["load"]["output_spread"] for loop in equal] == [0.0] * 4
    for loop in spread + equal:
        assert not loop["errors"] and len(loop["requests_ms"]) == loop["load"]["requests"]
    kept = record["closed_loop_ttft_p50_ms"]
    for name, loops in (("output spread 0.2", spread), ("equal outputs", equal)):
        found = [
            closed_loop.windows(loop["requests_ms"], loop["load"]["concurrency"]) for loop in loops
        ]
        assert list(kept[name].values()) == found
    for first, last in closed_loop.WINDOWS:
        assert _send_gaps_under_1ms(spread[3], first, last) < 0.05
        assert _send_gaps_under_1ms(equal[3], first, last) > 0.15
    varied = closed_loop.windows(spread[3]["requests_ms"], 32)
    control = closed_loop.windows(equal[3]["requests_ms"], 32)
    assert all(varied[w] < 0.6 * control[w] for w in varied), (varied, control)
    at_8 = closed_loop.windows(spread[1]["requests_ms"], 8)["waves 2-11"]
    (_, plan_8), (_, plan_32) = (
        closed_loop.simulated("meta-llama/Llama-3.1-8B-Instruct", "H200", c, 11, 0.2)
        for c in (8, 32)
    )
    assert varied["waves 2-11"] / at_8 == pytest.approx(plan_32 / plan_8, rel=0.15)
    equal_8 = closed_loop.windows(equal[1]["requests_ms"], 8)["waves 2-11"]
    assert control["waves 2-11"] / equal_8 > 1.8 * (plan_32 / plan_8)
