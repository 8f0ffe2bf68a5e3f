"""The simulator's scheduler against the planner, in virtual time (pdctl.simulator.closed_loop:
no sleeping, no HTTP): one prefill and one decode engine of Llama-3.1-8B on H100-80GB, the KV
transfer timed as the planner times it, a steady closed loop of 10 x concurrency requests after
a first wave that is dropped. TTFT and ITL medians come within 15% of `pdctl plan`'s estimates
for the same workload.

The loop's output lengths vary within 20% of the workload's 128 (seeded draws, as `pdctl bench
--output-spread 0.2` draws them), as a real model's do where generation ends at its
end-of-sequence token, so the clients fall out of step: what the planner's closed loop models.
With every output exactly 128 tokens, as a benchmark that sets ignore_eos sends them, the
clients start in lockstep and move in groups for some twenty waves before the loop settles; a
test pins that, and docs/simulator.md "How close it comes to the planner" says what the
real-engine record shows of it."""

from __future__ import annotations

import pytest

from pdctl.models import catalog
from pdctl.plan.layout import Estimates, Workload
from pdctl.simulator import closed_loop

MODEL, GPU = "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB"
INPUT, OUTPUT = 1024, 128
WITHIN = 0.15
SPREAD = 0.2
SEEDS = range(8)  # the p50 moves with the draws: every one of these lands within 15%


def _pair(concurrency: int) -> tuple[Workload, Estimates, closed_loop.Pd]:
    entry = catalog.find_model(MODEL)
    assert entry is not None
    workload = Workload(input_len=INPUT, output_len=OUTPUT, concurrency=concurrency)
    planned, pd = closed_loop.planned_pair(entry.arch, catalog.gpu(GPU), workload)
    return workload, planned, pd


def _compare(
    concurrency: int, seed: int = 0, prompt: int = INPUT
) -> tuple[Estimates, closed_loop.Summary]:
    entry = catalog.find_model(MODEL)
    assert entry is not None
    workload = Workload(input_len=prompt, output_len=OUTPUT, concurrency=concurrency)
    planned, summary = closed_loop.against_plan(
        entry.arch, catalog.gpu(GPU), workload, spread=SPREAD, seed=seed
    )
    assert summary.requests >= 10 * concurrency  # a step may end several at once
    return planned, summary


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_ttft_and_itl_p50_within_15_percent_of_the_plan(concurrency: int, seed: int) -> None:
    planned, simulated = _compare(concurrency, seed)
    assert simulated.ttft_p50_s * 1000 == pytest.approx(planned.ttft_ms, rel=WITHIN)
    assert simulated.itl_p50_s * 1000 == pytest.approx(planned.itl_ms, rel=WITHIN)


def test_over_a_sweep_of_loads_and_prompts_the_plan_stays_within_15_percent() -> None:
    """1-64 in flight x 512-4,096-token prompts (benchmarks/simulator_vs_plan.py --sweep): ITL
    within 15% everywhere, TTFT at 18 of the 20 points; the two off are 64 in flight of 512-token
    prompts (several share a prefill step, which the plan's one prompt a step does not model) and
    8 in flight of 4,096-token ones (docs/sizing.md "TTFT under load")."""
    off = []
    for prompt in (512, 1024, 2048, 4096):
        for concurrency in (1, 8, 16, 32, 64):
            planned, simulated = _compare(concurrency, prompt=prompt)
            assert simulated.itl_p50_s * 1000 == pytest.approx(planned.itl_ms, rel=WITHIN)
            if simulated.ttft_p50_s * 1000 != pytest.approx(planned.ttft_ms, rel=WITHIN):
                off.append((prompt, concurrency))
    assert off == [(512, 64), (4096, 8)]


def test_the_loop_draws_output_lengths_within_the_spread() -> None:
    """The draws reach the engines: the decode generates each request's own length, spread over
    the whole band, averaging the workload's."""
    workload, _, pd = _pair(8)
    served = closed_loop.run(pd, workload, 400, spread=SPREAD, seed=3)
    lengths = [len(s.token_times) for s in served]
    low, high = OUTPUT * (1 - SPREAD), OUTPUT * (1 + SPREAD)
    assert low - 0.5 <= min(lengths) and max(lengths) <= high + 0.5  # rounded draws
    assert max(lengths) - min(lengths) > OUTPUT * SPREAD  # not one length
    assert sum(lengths) / len(lengths) == pytest.approx(OUTPUT, rel=0.03)


def test_equal_outputs_move_in_groups_then_settle_below_the_plan() -> None:
    """Every output 128 tokens, 32 clients started together: waves 2-11 queue in groups (TTFT p50
    over twice the plan's), and once the groups have thinned out (waves 22-41) each prompt finds
    the prefill engine idle: TTFT p50 within 15% of the plan's unqueued TTFT, below its
    estimate. Neither window is what the planner estimates (docs/simulator.md)."""
    workload, planned, pd = _pair(32)
    served = closed_loop.run(pd, workload, 42 * 32)
    early = closed_loop.steady(served[: 11 * 32], 32)
    late = closed_loop.steady(served, 21 * 32)
    assert early.ttft_p50_s * 1000 > 2 * planned.ttft_ms
    assert late.ttft_p50_s * 1000 == pytest.approx(planned.ttft_unqueued_ms, rel=WITHIN)
    assert late.ttft_p50_s * 1000 < planned.ttft_ms * (1 - WITHIN)


def test_the_simulator_waits_for_kv_blocks_and_the_budget() -> None:
    """Scheduler unit: a request waits while the KV blocks are short; the token budget cuts a
    prompt into chunks."""
    from pdctl.simulator.engine import Timing
    from pdctl.simulator.scheduler import Sequence

    scheduler = Timing(blocks=8, budget=64).scheduler()  # 8 blocks of 16 tokens
    first, second = Sequence(100, 2), Sequence(100, 2)
    scheduler.add(first)
    scheduler.add(second)
    batch = scheduler.schedule(0.0)
    assert [(s, n) for s, n in batch.chunks] == [(first, 64)]  # the budget: one chunk
    scheduler.complete(batch, 1.0)
    batch = scheduler.schedule(1.0)
    assert [(s, n) for s, n in batch.chunks] == [(first, 36)]  # second waits: 7 + 2 > 8 blocks
    assert list(scheduler.waiting) == [second]
    scheduler.complete(batch, 2.0)
    assert first.token_times == [2.0]
    scheduler.complete(scheduler.schedule(2.0), 3.0)  # first decodes its last token, leaves
    assert first.done and scheduler.free_blocks == 8
    batch = scheduler.schedule(3.0)
    assert [(s, n) for s, n in batch.chunks] == [(second, 64)] and second.scheduled_at == 3.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("concurrency", [1, 8])
def test_bench_default_workload_is_the_one_plan_estimates(concurrency: int, seed: int) -> None:
    """`pdctl bench` with no --output-spread (its default settings) at 1 and 8 in flight, the
    issue's lengths (4,096 in, 512 out) on plan's layout of the pair: the simulator's TTFT and
    ITL p50 come within 15% of `plan --concurrency 1|8`, and the outputs vary as the plan's
    closed loop assumes (bench's default used to send them all equal: lockstep)."""
    from pdctl.bench.workload import BenchSettings
    from pdctl.plan.queueing import output_lengths

    bench = BenchSettings()  # bench's defaults, as `pdctl bench` without --output-spread
    entry = catalog.find_model(MODEL)
    assert entry is not None
    workload = Workload(input_len=4096, output_len=512, concurrency=concurrency)
    planned, simulated = closed_loop.against_plan(
        entry.arch, catalog.gpu(GPU), workload, spread=bench.output_spread, seed=seed
    )
    assert simulated.ttft_p50_s * 1000 == pytest.approx(planned.ttft_ms, rel=WITHIN)
    assert simulated.itl_p50_s * 1000 == pytest.approx(planned.itl_ms, rel=WITHIN)
    draw = output_lengths(workload.output_len, bench.output_spread, seed)
    assert len({draw() for _ in range(32)}) > 1  # a step's outputs vary: no lockstep
