"""A prefill series' steady rate apart from a one-off delay (benchmarks/real_engines/steady.py):
the closed-loop model solved on summaries made by the harness's own summarize, its refusals, and
the kept records' `steady_prefill` (what the planner's MoE prefill share is fitted to)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.real_engines import measure, run, steady

RECORDS = Path("benchmarks/records")
MOE = RECORDS / "real-engines-h200-moe-mla.json"
DENSE = RECORDS / "real-engines-h200-1gpu.json"
H200 = "NVIDIA H200, 143771 MiB, 580.159.04"  # run.gpu()'s text on the GPU host


def _summary(delay: float, step: float, load: measure.Load = run.ALONE_PREFILL) -> dict[str, Any]:
    """measure.summarize over TTFTs that follow the model exactly."""
    timings = [measure.Timing(ttft=t) for t in steady.ttfts(delay, step, load, 4)]
    return measure.summarize(timings, delay + load.requests // 4 * step, load)


@pytest.mark.parametrize(("delay", "step"), [(0.0, 0.196), (2.0, 0.0635), (6.4, 0.067)])
def test_the_delay_and_the_step_come_back_from_a_run_the_model_describes(
    delay: float, step: float
) -> None:
    summary = _summary(delay, step)
    solved = steady.solve(summary, 4)
    assert solved["step_ms"] == pytest.approx(step * 1e3, abs=0.02)
    assert solved["delay_s"] == pytest.approx(delay, abs=0.002)
    assert solved["prompt_tokens_per_s"] == pytest.approx(4 * 2048 / step, rel=1e-3)
    assert solved["fits"]
    # with no delay the steady rate is the recorded one
    if delay == 0:
        assert solved["prompt_tokens_per_s"] == pytest.approx(summary["prompt_tokens_per_s"], 1e-3)


def test_a_run_the_model_does_not_describe_is_said_not_to_fit() -> None:
    # every request took the same time: no queue, which a closed loop of 32 at 4 a step cannot do
    timings = [measure.Timing(ttft=0.5) for _ in range(96)]
    summary = measure.summarize(timings, 2.0, run.ALONE_PREFILL)
    assert not steady.solve(summary, 4)["fits"]


DECODE_LOAD = {"prompt_len": 128, "output_len": 192, "concurrency": 16, "requests": 16}
UNEVEN_LOAD = {"prompt_len": 2048, "output_len": 1, "concurrency": 30, "requests": 96}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"load": DECODE_LOAD}, "not a prefill"),
        ({"load": UNEVEN_LOAD}, "not a prefill"),
        ({"served": 95}, "1 of 96 requests failed"),
    ],
)
def test_series_it_cannot_solve_are_refused_and_the_record_says_why(
    change: dict[str, Any], message: str
) -> None:
    part = {"prefill": {**_summary(0.0, 0.2), **change}}
    with pytest.raises(ValueError, match=message):
        steady.solve(part["prefill"], 4)
    assert message in steady.attach(part, H200)["error"]


def test_four_prompts_a_step_on_an_h200_at_2048_tokens() -> None:
    assert steady.prompts_per_step(H200, 2048) == 4  # vLLM's 8,192-token default budget there


def test_a_gpu_the_catalog_lacks_is_said_in_the_record_not_raised() -> None:
    part = {"prefill": _summary(0.0, 0.2)}
    assert "not in the GPU catalog" in steady.attach(part, "NVIDIA Z9000, 1 MiB, 1.0")["error"]


def test_the_kept_records_hold_what_the_script_computes(tmp_path: Path) -> None:
    for record in (MOE, DENSE):
        copy = tmp_path / record.name
        shutil.copy(record, copy)
        kept = [part["steady_prefill"] for _, part in steady.series(json.loads(copy.read_text()))]
        assert steady.main([str(copy), "--write"]) == 0
        again = [part["steady_prefill"] for _, part in steady.series(json.loads(copy.read_text()))]
        assert kept == again and all(s["fits"] for s in kept)


def test_the_steady_rates_are_consistent_with_the_runs() -> None:
    """The dense run compiled nothing in its window: its steady rate is the recorded one. The
    whole Qwen3-30B-A3B (48 layers) takes twice its 24-layer cut's step, as it should; the
    recorded rates (lower bounds) did not (1.2x)."""
    alone = json.loads(DENSE.read_text())["alone"]
    assert alone["steady_prefill"]["prompt_tokens_per_s"] == pytest.approx(
        alone["prefill"]["prompt_tokens_per_s"], rel=0.005
    )
    moe = json.loads(MOE.read_text())
    cut = moe["models"]["qwen3-30b-a3b"]["steady_prefill"]["step_ms"]
    whole = moe["full_depth"]["qwen3-30b-a3b"]["steady_prefill"]["step_ms"]
    assert 1.9 < whole / cut < 2.1
    for _, part in steady.series(moe):
        assert (
            part["steady_prefill"]["prompt_tokens_per_s"]
            >= part["prefill"]["prompt_tokens_per_s"] * 0.99
        )
