"""The layout search's objective (docs/sizing.md "The objective"): the context floors each role
should hold, the targets a layout meets, and which engine counts a search must try."""

from __future__ import annotations

import math

from pdctl.plan.layout import Request, Workload


def need_tokens(req: Request) -> int:
    return max(req.workload.total_len, req.max_model_len or 0)


# Decode engines (and aggregated ones) should hold at least this much context (or the model's own,
# if less) before throughput decides: a decode engine whose KV pool holds 10k tokens would cut
# --max-model-len to 10k for every request.
CONTEXT_FLOOR = 32768
# Prefill engines only compute prompts: they should hold --input-len x PROMPT_MARGIN tokens (prompts
# a quarter longer than the workload's still fit) and always input + output (--max-model-len, one
# value for both pools, must admit the workload; vLLM refuses to start an engine whose KV pool holds
# less than one request of --max-model-len).
PROMPT_MARGIN = 1.25


def prompt_floor(req: Request) -> int:
    """The context a prefill engine should hold: the prompt plus margin, at least the workload's
    request (and --max-model-len when given)."""
    return max(need_tokens(req), math.ceil(req.workload.input_len * PROMPT_MARGIN))


def context_floor(req: Request) -> int:
    """The context a decode engine should hold: --max-model-len, else CONTEXT_FLOOR, at most the
    model's context."""
    return min(req.arch.max_positions, req.max_model_len or CONTEXT_FLOOR)


def meets(w: Workload, ttft_s: float, itl_s: float, rps: float) -> tuple[bool, ...]:
    return (
        w.ttft_ms is None or ttft_s * 1000 <= w.ttft_ms,
        w.itl_ms is None or itl_s * 1000 <= w.itl_ms,
        w.rate is None or rps >= w.rate,
    )


def engine_counts(req: Request, most: int) -> range:
    """The decode engine counts the search tries for one prefill side, most first. More decode
    engines never lower throughput nor raise ITL, and under --rate never raise TTFT; only a closed
    loop's TTFT (--ttft without --rate) can fall with fewer (clients spend longer decoding, so
    fewer queue for prefill): then every count is tried, most first, until --ttft is met."""
    w = req.workload
    if w.ttft_ms is not None and w.rate is None:
        return range(most, 0, -1)
    return range(most, most - 1, -1) if most >= 1 else range(0)
