"""The decode side of a PD layout: how many sequences one decode engine runs and its step (ITL),
the most --concurrency's share allows and what the load leaves there (pdctl.plan.sizing)."""

from __future__ import annotations

import math
from collections.abc import Callable

from pdctl.plan import queueing
from pdctl.plan.layout import Engine, Request
from pdctl.plan.roofline import default_max_num_seqs

LoadAt = Callable[..., queueing.Load]  # queueing.under_load with the prefill servers' figures


def _step(req: Request, engine: Engine, sequences: int) -> float:
    """One decode step of `sequences` at the workload's mean context: the ITL at that batch."""
    return req.decode_step_s(engine.tp, sequences, req.workload.mean_context, engine.layout)


def batch(req: Request, engine: Engine, replicas: int) -> tuple[int, float]:
    """Sequences per decode engine and its step time: the share of --concurrency, at most what
    its KV holds at input+output tokens and vLLM's max-num-seqs, fewer if --itl demands."""
    w = req.workload
    cap = engine.layout.sequences(engine.pool_bytes, w.total_len)
    sequences = max(1, min(cap, default_max_num_seqs(req.gpu), math.ceil(w.concurrency / replicas)))

    def meets(b: int) -> bool:
        return w.itl_ms is None or _step(req, engine, b) * 1000 <= w.itl_ms

    if not meets(sequences):
        low, high = 1, sequences  # step grows with the batch: the largest batch that meets --itl
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if meets(middle) else (low, middle - 1)
        sequences = low
    return sequences, _step(req, engine, sequences)


def at_load(
    req: Request, d: Engine, y: int, most: int, load_at: LoadAt, before_s: float
) -> tuple[int, queueing.Load, float]:
    """(sequences per decode engine, the load, ITL) at the workload's load: `load_at(fixed_s,
    decode_s)` is the prefill servers' queueing.under_load, `before_s` the unqueued TTFT up to
    the first decode step.

    A decode engine holds what Little's law gives: the throughput X over the `y` engines times a
    request's time there, OSL steps of ITL, at most `most` (what `batch` gives). Under a closed
    loop X is below N / (OSL x ITL), as clients also spend time at prefill (most of it when
    prefill is saturated), so the batch is below --concurrency's share and ITL shorter. X and the
    batch are solved together: the batch only falls from `most`, so the loop ends."""
    w = req.workload
    decoding, itl_s = most, _step(req, d, most)
    while True:
        load = load_at(fixed_s=before_s + itl_s, decode_s=(w.output_len - 1) * itl_s)
        held = min(decoding, max(1, round(load.requests_per_s / y * w.output_len * itl_s)))
        if held == decoding:
            return decoding, load, itl_s
        decoding, itl_s = held, _step(req, d, held)
