"""The layout search's objective (docs/sizing.md "The objective"): the context floors each role
should hold, the latency targets in force, the targets a layout meets, which engine counts a
search must try, and the one rule that picks a layout among candidates of both modes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from pdctl import defaults, limits
from pdctl.errors import UsageError
from pdctl.plan.layout import Request, Workload

# Output tokens/s per GPU within this share of the best count as a tie (the estimates are a
# roofline: closer differences are not evidence); TTFT, then ITL break it.
TIE = 0.01


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


def target(text: str | None, flag: str, default: float) -> tuple[float | None, bool]:
    """A latency target from its option: (ms or None when removed, whether it is the default).
    Omitted: the default; `none`: no target; else a positive number of ms (the default's value
    given counts as the default, so that a values file's recorded command reproduces it)."""
    if text is None:
        return default, True
    if text.strip().lower() == "none":
        return None, False
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= limits.MS_MAX):
        raise UsageError(
            f"{flag} {text!r}: expected a positive number of ms up to {limits.MS_MAX:,.0f}, or none"
        )
    return value, value == default


def targets(ttft: str | None, itl: str | None) -> tuple[float | None, float | None, frozenset[str]]:
    """(TTFT ms, ITL ms, the names of those that are defaults) from --ttft and --itl."""
    ttft_ms, ttft_default = target(ttft, "--ttft", defaults.TTFT_MS)
    itl_ms, itl_default = target(itl, "--itl", defaults.ITL_MS)
    by_default = frozenset(n for n, d in (("ttft", ttft_default), ("itl", itl_default)) if d)
    return ttft_ms, itl_ms, by_default


def source(w: Workload, name: str) -> str | None:
    """Where a target in force comes from: "default" or its flag (None: no such target)."""
    value = {"ttft": w.ttft_ms, "itl": w.itl_ms, "rate": w.rate}[name]
    if value is None:
        return None
    if name == "rate":
        return w.rate_flag
    return "default" if name in w.defaults else f"--{name}"


_TITLES = {"ttft": ("TTFT", " ms"), "itl": ("ITL", " ms"), "rate": ("rate", "/s")}


def label(w: Workload, name: str) -> str:
    """A target in force for people: "TTFT 2000 ms (default)", "rate 2/s (--rate)"."""
    value = {"ttft": w.ttft_ms, "itl": w.itl_ms, "rate": w.rate}[name]
    title, unit = _TITLES[name]
    return f"{title} {value:g}{unit} ({source(w, name)})"


def labels(w: Workload) -> list[str]:
    """Every target in force, labelled."""
    return [label(w, name) for name in _TITLES if source(w, name) is not None]


def meets(w: Workload, ttft_s: float, itl_s: float, rps: float) -> tuple[bool, ...]:
    return (
        w.ttft_ms is None or ttft_s * 1000 <= w.ttft_ms,
        w.itl_ms is None or itl_s * 1000 <= w.itl_ms,
        w.rate is None or rps >= w.rate,
    )


def miss(w: Workload, ttft_ms: float, itl_ms: float, rps: float) -> float:
    """How far a layout is from the targets: the largest factor by which one is missed (TTFT or
    ITL over its target, the --rate over what the layout sustains); 1.0 or less when all are met,
    0.0 with no targets."""
    factors = [0.0]
    if w.ttft_ms is not None:
        factors.append(ttft_ms / w.ttft_ms if math.isfinite(ttft_ms) else math.inf)
    if w.itl_ms is not None:
        factors.append(itl_ms / w.itl_ms)
    if w.rate is not None:
        factors.append(w.rate / rps if rps > 0 else math.inf)
    return max(factors)


def engine_counts(req: Request, most: int) -> range:
    """The decode engine counts the search tries for one prefill side, most first. More decode
    engines never lower throughput nor raise ITL, and under --rate never raise TTFT; a closed
    loop's TTFT can fall with fewer (clients spend longer decoding, so fewer queue for prefill),
    and TTFT breaks ties: there every count is tried (the search stops early once throughput has
    fallen out of the tie band of a layout that meets the targets)."""
    if req.workload.rate is None:
        return range(most, 0, -1)
    return range(most, most - 1, -1) if most >= 1 else range(0)


def shown(value: float, digits: int) -> float:
    """A figure at the precision the plan shows it (unbounded stays infinite)."""
    return round(value, digits) if math.isfinite(value) else math.inf


@dataclass(frozen=True)
class Score:
    """What the objective reads of one layout, PD or aggregated."""

    miss: float  # objective.miss: 1.0 or less when every target in force is met
    keeps_context: bool  # the context floors held
    tokens_per_gpu: float  # output tokens/s per GPU given (idle GPUs count)
    ttft_ms: float
    itl_ms: float
    order: tuple[int, ...]  # the last resort: aggregated (simpler) first, more GPUs in use, ...

    @property
    def met(self) -> bool:
        return self.miss <= 1.0

    @property
    def key(self) -> tuple[float, float, float]:
        """Throughput per GPU, TTFT and ITL at the precision shown (as `pdctl plan --pareto`)."""
        return (shown(self.tokens_per_gpu, 1), shown(self.ttft_ms, 1), shown(self.itl_ms, 2))


T = TypeVar("T")


def best(scored: Iterable[tuple[Score, T]]) -> T | None:
    """The objective's pick (docs/sizing.md "The objective"): among the layouts that meet every
    target in force (none does: those that miss by the least factor, within TIE), those that
    keep the context floors (if any do), the most output tokens/s per GPU given, where within
    TIE of the most is a tie, broken by the lower TTFT, then the lower ITL, then more throughput."""
    pool = list(scored)
    if not pool:
        return None
    met = [item for item in pool if item[0].met]
    if met:
        pool = met
    else:
        least = min(s.miss for s, _ in pool)
        pool = [item for item in pool if item[0].miss <= least * (1 + TIE)]
    pool = [item for item in pool if item[0].keeps_context] or pool
    top = max(s.key[0] for s, _ in pool)
    band = [item for item in pool if item[0].key[0] >= top * (1 - TIE)]
    chosen = min(band, key=lambda item: (*item[0].key[1:], -item[0].key[0], item[0].order))
    return chosen[1]
