"""The rules of thumb on whether PD pays for a workload (likely, may, unlikely, with the reasons:
docs/sizing.md "Rules of thumb"; context only, the estimates decide), the choice explained in
words, and the warnings a layout carries."""

from __future__ import annotations

import math

from pdctl.plan import objective
from pdctl.plan.layout import Estimates, Request, RolePlan
from pdctl.plan.objective import TIE, Score


def verdict(req: Request, decode: RolePlan, e: Estimates) -> tuple[str, list[str]]:
    """Whether PD is likely to help this workload: likely | may | unlikely, with the reasons."""
    w = req.workload
    reasons: list[str] = []
    unlikely = False
    if w.input_len < 2048:
        unlikely = True
        reasons.append(
            f"prompts of {w.input_len} tokens are short (under 2048, pdctl validate's PD101): "
            "prefill interrupts decoding only briefly"
        )
    if e.prefill_ms <= e.itl_ms:
        unlikely = True
        reasons.append(
            f"one prefill ({e.prefill_ms:.0f} ms) takes no longer than one decode step "
            f"({e.itl_ms:.0f} ms): little interference to remove"
        )
    if w.rate is not None:
        aggregated = 1 / (e.prefill_ms / 1000 + w.output_len * e.itl_ms / 1000 / e.decode_batch)
        if w.rate <= aggregated:
            unlikely = True
            reasons.append(
                f"low load: one aggregated engine of TP{decode.engine.tp} serves about "
                f"{aggregated:.1f} requests/s, --rate is {w.rate:g} (Dynamo: at low load stay "
                "aggregated)"
            )
    ratio = w.input_len / max(w.output_len, 1)
    if unlikely:
        reasons.append(
            "PD separates TTFT from ITL; it does not raise throughput by itself (vLLM docs)"
        )
        return "unlikely", reasons
    long_prompts, long_stalls = ratio >= 10, e.prefill_ms >= 2 * e.itl_ms
    evidence = [
        (
            long_prompts,
            f"input:output is {ratio:.1f}:1, "
            + ("at or above" if long_prompts else "below")
            + " the 10:1 from which PD usually pays (llm-d)",
        ),
        (
            long_stalls,
            f"each prefill ({e.prefill_ms:.0f} ms) would stall decoding for "
            f"{e.prefill_ms / e.itl_ms:.1f} steps of {e.itl_ms:.0f} ms"
            + ("" if long_stalls else " (PD removes stalls of two steps or more)"),
        ),
    ]
    if long_prompts and long_stalls:
        return "likely", reasons + [text for _, text in evidence]
    return "may", reasons + [
        ("for PD: " if good else "against PD: ") + text for good, text in evidence
    ]


def pd_warnings(req: Request, prefill: RolePlan, decode: RolePlan, e: Estimates) -> list[str]:
    """What the PD layout leaves unused or unmet."""
    w = req.workload
    warnings = []
    unused = req.gpus - prefill.gpus - decode.gpus
    if unused < 0:
        warnings.append(
            f"PD needs {prefill.gpus + decode.gpus} GPUs, more than the {req.gpus} given: the PD "
            "layout shown is the smallest alternative; the GPUs given serve aggregated"
        )
    elif unused:
        warnings.append(f"{unused} of {req.gpus} GPUs are left unused by this layout")
    if not e.concurrency_fits:
        warnings.append(
            f"one decode engine holds {e.decode_step_sequences} sequences of {w.total_len} "
            f"tokens, fewer than --concurrency {w.concurrency}: the decode step is estimated at "
            f"{e.decode_step_sequences}; more decode GPUs or a shorter context hold more"
        )
    return warnings


def kv_warnings(req: Request) -> list[str]:
    """What holds for the KV cache of either mode."""
    if req.arch.sliding_window and req.hybrid_kv:
        return [
            "sliding-window layers are sized at their window (vLLM's hybrid KV cache manager, on "
            "with NixlConnector since vLLM PR #41847); with it off they cost full-attention KV"
        ]
    return []


def missed(
    req: Request, mode: str, meets: tuple[bool, ...], ttft_ms: float, itl_ms: float, rps: float
) -> list[str]:
    """The targets in force the chosen layout misses, with the figures: none, or a line saying
    that no layout of the modes considered meets them (the choice is the closest) and one per
    target missed."""
    if all(meets):
        return []
    w, (ttft, itl, rate) = req.workload, meets
    which = "no layout" if req.mode == "auto" else f"no {NAMES[mode]} layout"
    lines = [f"{which} meets the targets in force; the choice is the closest (docs/sizing.md)"]
    if not ttft:
        lines.append(f"{objective.label(w, 'ttft')} is not met: estimated {ms(ttft_ms)}")
    if not itl:
        lines.append(f"{objective.label(w, 'itl')} is not met: estimated {itl_ms:.1f} ms")
    if not rate:
        lines.append(f"--rate {w.rate:g}/s is not met: the choice sustains about {rps:.2f}/s")
    return lines


def ms(value: float) -> str:
    """Milliseconds for people; an unbounded queue says so."""
    if not math.isfinite(value):
        return "unbounded (the load exceeds what the layout sustains)"
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def seconds(value: float) -> str:
    """A latency for a sentence: "0.45 s", "12 s", "85 ms", "unbounded"."""
    if not math.isfinite(value):
        return "unbounded"
    if value < 100:
        return f"{value:.0f} ms"
    if value < 10_000:
        return f"{value / 1000:.2f}".rstrip("0").rstrip(".") + " s"
    return f"{value / 1000:.0f} s"


NAMES = {"pd": "PD", "aggregated": "aggregated"}


def _figures(name: str, s: Score) -> str:
    return (
        f"{name} {s.tokens_per_gpu:,.1f} output tokens/s per GPU, TTFT {seconds(s.ttft_ms)}, "
        f"ITL {s.itl_ms:.1f} ms"
    )


def _against(mine: Score, other: Score) -> str:
    """What `other` gives instead of `mine`: "19% more output tokens/s per GPU and 0.4 s TTFT
    instead of 0.9 s"."""
    ratio = other.tokens_per_gpu / max(mine.tokens_per_gpu, 1e-9) - 1
    more = "more" if ratio >= 0 else "less"
    return (
        f"{abs(ratio):.0%} {more} output tokens/s per GPU and {seconds(other.ttft_ms)} TTFT "
        f"instead of {seconds(mine.ttft_ms)} (ITL {other.itl_ms:.1f} ms instead of "
        f"{mine.itl_ms:.1f})"
    )


def _reason(mode: str, mine: Score, other: Score) -> str:
    """Why the objective (objective.best) prefers `mine`, of mode `mode`, to `other`."""
    name, rival = NAMES[mode], NAMES["aggregated" if mode == "pd" else "pd"]
    if mine.met and not other.met:
        return f"only {name} meets the targets ({rival}'s closest misses by {other.miss:.1f}x)"
    if not mine.met:
        return (
            f"no layout meets the targets: {name} misses them by the least factor "
            f"({mine.miss:.2f}x; {rival} {other.miss:.2f}x)"
        )
    if mine.keeps_context and not other.keeps_context:
        return f"{rival} engines hold less context than the floor (docs/sizing.md)"
    ratio = mine.tokens_per_gpu / max(other.tokens_per_gpu, 1e-9) - 1
    if ratio > TIE:
        return f"{name} gives {ratio:.0%} more output tokens/s per GPU"
    if mine.key[1] < other.key[1]:
        return f"output tokens/s per GPU within {TIE:.0%} (a tie): {name} has the lower TTFT"
    if mine.key[2] < other.key[2]:
        return f"output tokens/s per GPU and TTFT tie: {name} has the lower ITL"
    return f"{name} and {rival} tie on every figure: aggregated is simpler (one pool, no transfer)"


def explain(
    req: Request, mode: str, auto: str, pd: Score, agg: Score | None, pd_gpus: int
) -> tuple[list[str], str | None]:
    """Why the choice is `mode` (auto: the objective's pick, `auto`), with the figures of both
    modes; and with a forced --mode that differs from auto's, what it costs against auto's."""
    w = req.workload
    targets = objective.labels(w)
    lines = ["targets in force: " + ("; ".join(targets) if targets else "none")]
    if agg is None:
        return [*lines, "no aggregated engine fits the GPUs given"], None
    mine, other = (pd, agg) if mode == "pd" else (agg, pd)
    if pd_gpus > req.gpus:
        lines.append(f"PD needs {pd_gpus} GPUs and {req.gpus} are given")
    elif mode == auto:
        lines.append(_reason(mode, mine, other))
    lines.append(_figures("PD", pd) + "; " + _figures("aggregated", agg))
    if mode == auto:
        return lines, None
    cost = f"--mode {mode}: {NAMES[auto]} would give " + _against(mine, other)
    return lines, cost
