"""Aggregated serving on the same GPUs as a PD layout: plain engines that each prefill and decode
their own requests (no KV transfer), for the comparison `pdctl plan` shows (docs/sizing.md
"Aggregated beside PD")."""

from __future__ import annotations

import math

from pdctl.plan import queueing
from pdctl.plan.layout import AggregatedEstimates, Engine, Request
from pdctl.plan.objective import Score, best, context_floor, meets, miss
from pdctl.plan.roofline import (
    alone_ttft_seconds,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    request_overhead_seconds,
)
from pdctl.plan.step import Chunk, prompt_chunks


def _evaluate_aggregated(req: Request, e: Engine, n: int, batch: int) -> AggregatedEstimates:
    """n plain engines of `e`, `batch` sequences each: every engine prefills its own prompts in
    chunks of its token budget, each chunk in a step with the decoding sequences (pdctl.plan.step).
    A request costs an engine S (what its chunk steps take beyond plain decode steps) plus O steps
    shared by the batch: n / (S + O x step / batch) requests/s. Decoding sequences wait for the
    prefills of the others: ITL = step / (1 - share), share = the engine time other requests'
    prefills take at the load. TTFT = its chunk steps (at batch 1, on an idle engine, at least
    the MoE idle-step floor), plus the queue (pdctl.plan.queueing).

    A closed loop (no --rate) runs in waves (queueing.wave_median): TTFT is the median of a wave
    of --concurrency's share of prompts packed in steps of the token budget, and ITL the median
    gap, the plain decode step, since the wave's prefill steps are fewer than half the gaps
    (benchmarks/records/real-engines-h200-1gpu-bench.json: ITL p50 5.87 ms at 16 in flight, the
    decode step of 16)."""
    w = req.workload
    engine = req.engine_step(e.tp, e.layout)
    decoding = [w.mean_context] * batch
    step_s = engine.cost(decode_contexts=decoding).seconds
    budget = default_max_num_batched_tokens(req.gpu) - batch  # decode tokens are scheduled first
    chunk_steps = [
        engine.cost([chunk], decoding).seconds for chunk in prompt_chunks(w.input_len, budget)
    ]
    prefill_s = sum(chunk_steps) - len(chunk_steps) * step_s
    capacity = n / (prefill_s + w.output_len * step_s / batch)
    others = (batch - 1) / batch

    def itl(throughput: float) -> float:
        share = min(throughput / n * prefill_s * others, 0.95)
        return step_s / (1 - share)

    if batch == 1:  # the request alone on an idle engine: its first step may wait (roofline)
        unqueued_s = alone_ttft_seconds(req.arch, req.gpu, w.input_len, sum(chunk_steps))
    else:
        unqueued_s = sum(chunk_steps) + request_overhead_seconds(req.gpu)
    itl_s = itl(capacity)
    load = queueing.under_load(
        servers=n,
        service_s=prefill_s,
        fixed_s=unqueued_s,
        decode_s=(w.output_len - 1) * itl_s,
        capacity=capacity,
        rate=w.rate,
        concurrency=w.concurrency,
    )
    queue_s = load.queue_s
    if w.rate is not None and w.rate < capacity:
        itl_s = itl(w.rate)
    elif w.rate is None:
        wave = math.ceil(w.concurrency / n)
        full_budget = default_max_num_batched_tokens(req.gpu)

        def full_step(tokens: int) -> float:
            whole, part = divmod(tokens, w.input_len)
            if not whole:  # a prompt longer than the budget: its chunk steps' mean
                return sum(chunk_steps) / len(chunk_steps)
            chunks = [Chunk(w.input_len)] * whole + ([Chunk(part)] if part else [])
            return engine.cost(chunks, decoding).seconds

        median = queueing.wave_median(wave, w.input_len, full_budget, sum(chunk_steps), full_step)
        queue_s = max(queue_s, median - sum(chunk_steps))
        wave_steps = math.ceil((wave - 1) * w.input_len / full_budget)
        itl_s = step_s if 2 * wave_steps < w.output_len - 1 else max(chunk_steps)
    ttft_s = unqueued_s + queue_s
    stall_s = max(chunk_steps)
    return AggregatedEstimates(
        engine=e,
        replicas=n,
        prefill_ms=prefill_s * 1000,
        decode_step_ms=step_s * 1000,
        batch=batch,
        itl_ms=itl_s * 1000,
        itl_stall_ms=stall_s * 1000,
        prefill_share=min(load.requests_per_s / n * prefill_s, 1.0),
        ttft_ms=ttft_s * 1000,
        ttft_unqueued_ms=unqueued_s * 1000,
        ttft_queue_ms=queue_s * 1000,
        requests_per_s=capacity,
        load_requests_per_s=load.requests_per_s,
        output_tokens_per_s=capacity * w.output_len,
        meets=meets(w, ttft_s, itl_s, capacity),
        context=e.layout.longest(e.pool_bytes),
    )


def _aggregated_at(req: Request, e: Engine, n: int) -> AggregatedEstimates:
    """n engines of `e` at the batch --concurrency gives each (at most what its KV and vLLM's
    max-num-seqs hold), lowered until --itl is met when it can be."""
    w = req.workload
    held = e.layout.sequences(e.pool_bytes, w.total_len)
    top = max(1, min(held, default_max_num_seqs(req.gpu), math.ceil(w.concurrency / n)))
    found = _evaluate_aggregated(req, e, n, top)
    if w.itl_ms is None or found.itl_ms <= w.itl_ms:
        return found
    low, high = 1, top  # ITL grows with the batch: the largest batch that meets --itl
    while low < high:
        middle = (low + high + 1) // 2
        ok = _evaluate_aggregated(req, e, n, middle).itl_ms <= w.itl_ms
        low, high = (middle, high) if ok else (low, middle - 1)
    return _evaluate_aggregated(req, e, n, low)


def score(req: Request, a: AggregatedEstimates) -> Score:
    """What the objective reads of an aggregated layout (pdctl.plan.objective.best)."""
    return Score(
        miss=miss(req.workload, a.ttft_ms, a.itl_ms, a.requests_per_s),
        keeps_context=a.context >= context_floor(req),
        tokens_per_gpu=a.output_tokens_per_s / req.gpus,
        ttft_ms=a.ttft_ms,
        itl_ms=a.itl_ms,
        order=(0, -a.gpus, a.engine.tp, 0),
    )


def aggregated(req: Request, fitting: list[Engine]) -> AggregatedEstimates | None:
    """Aggregated serving on req.gpus: the objective's pick of every TP and engine count of
    `fitting` (engines that hold one request), or None when not even one engine fits the GPUs."""
    return best((score(req, a), a) for a in every_aggregated(req, fitting))


def every_aggregated(req: Request, fitting: list[Engine]) -> list[AggregatedEstimates]:
    """Every aggregated layout within req.gpus (few: one per TP and engine count)."""
    return [_aggregated_at(req, e, n) for e in fitting for n in range(1, req.gpus // e.tp + 1)]
