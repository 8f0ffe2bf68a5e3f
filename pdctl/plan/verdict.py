"""Whether PD pays for a workload (likely, may, unlikely, with the reasons: docs/sizing.md "Whether
PD pays"), and the warnings a layout carries."""

from __future__ import annotations

import math

from pdctl.plan import efficiency
from pdctl.plan.layout import AggregatedEstimates, Estimates, Request, RolePlan

# Throughput per GPU within this share counts as even between aggregated and PD: the estimates are
# a roofline (docs/sizing.md), closer differences are not evidence.
EVEN = 0.10


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


def warnings(req: Request, prefill: RolePlan, decode: RolePlan, e: Estimates) -> list[str]:
    """What the layout leaves unused or unmet."""
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
    if w.ttft_ms is not None and e.ttft_ms > w.ttft_ms:
        warnings.append(f"--ttft {w.ttft_ms:g} ms is not met: estimated {ms(e.ttft_ms)}")
    if w.itl_ms is not None and e.itl_ms > w.itl_ms:
        warnings.append(f"--itl {w.itl_ms:g} ms is not met: estimated {e.itl_ms:.1f} ms")
    if w.rate is not None and e.requests_per_s < w.rate:
        warnings.append(
            f"--rate {w.rate:g}/s is not met: this layout sustains about "
            f"{e.requests_per_s:.2f}/s ({e.bottleneck}-bound)"
        )
    warnings += efficiency.wider_error(bool(req.arch.moe), w.concurrency, w.mean_context)
    if req.arch.sliding_window and req.hybrid_kv:
        warnings.append(
            "sliding-window layers are sized at their window (vLLM's hybrid KV cache manager, on "
            "with NixlConnector since vLLM PR #41847); with it off they cost full-attention KV"
        )
    return warnings


def ms(value: float) -> str:
    """Milliseconds for people; an unbounded queue says so."""
    if not math.isfinite(value):
        return "unbounded (the load exceeds what the layout sustains)"
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def _slos(meets: tuple[bool, ...]) -> str:
    return f"{sum(meets)} of 3 targets met"


def compare(
    req: Request, pd: Estimates, pd_meets: tuple[bool, ...], agg: AggregatedEstimates | None
) -> tuple[str, list[str]]:
    """Which serves the workload better on the GPUs given, aggregated or PD, and why: more
    targets (--ttft, --itl, --rate) met; then output tokens/s per GPU when they differ by more
    than EVEN; when even, PD where each prefill would stall aggregated decoding for two steps or
    more (PD keeps ITL free of such stalls), else aggregated (simpler: no KV transfer, one pool)."""
    if agg is None:
        return "pd", ["no aggregated engine fits the GPUs given"]
    pd_gpus = pd.gpus
    pd_tput, agg_tput = pd.output_tokens_per_s_per_gpu, agg.output_tokens_per_s_per_gpu
    numbers = (
        f"PD on {pd_gpus} GPUs {pd_tput:,.0f} vs aggregated on {agg.gpus} {agg_tput:,.0f} "
        f"output tokens/s per GPU; TTFT "
        f"{ms(pd.ttft_ms)} vs {ms(agg.ttft_ms)}; ITL {pd.itl_ms:.1f} vs {agg.itl_ms:.1f} ms"
    )
    if pd_gpus > req.gpus:
        return "aggregated", [
            f"PD needs {pd_gpus} GPUs and {req.gpus} are given: {agg.replicas} aggregated "
            f"engine(s) of TP{agg.engine.tp} serve it",
            numbers,
        ]
    if sum(pd_meets) != sum(agg.meets):
        winner = "pd" if sum(pd_meets) > sum(agg.meets) else "aggregated"
        return winner, [
            f"PD: {_slos(pd_meets)}, aggregated: {_slos(agg.meets)} (--ttft, --itl, --rate)",
            numbers,
        ]
    if abs(pd_tput - agg_tput) > EVEN * max(pd_tput, agg_tput):
        winner = "pd" if pd_tput > agg_tput else "aggregated"
        more = max(pd_tput, agg_tput) / max(min(pd_tput, agg_tput), 1e-9) - 1
        why = [
            f"{'PD' if winner == 'pd' else 'aggregated'} gives {more:.0%} more output tokens/s "
            f"per GPU",
            numbers,
        ]
        if winner == "aggregated" and agg.itl_stall_ms > 1.5 * pd.itl_ms:
            why.append(
                f"PD keeps every step at {pd.itl_ms:.1f} ms; aggregated steps that carry a chunk "
                f"of a prompt take {agg.itl_stall_ms:.0f} ms (ITL's tail; --itl is the mean)"
            )
        return winner, why
    stalls = agg.prefill_ms / agg.decode_step_ms
    if stalls >= 2:
        return "pd", [
            f"throughput per GPU is even (within {EVEN:.0%}); each prefill ({agg.prefill_ms:.0f} "
            f"ms) would stall aggregated decoding for {stalls:.1f} steps, which PD removes",
            numbers,
        ]
    return "aggregated", [
        f"throughput per GPU is even (within {EVEN:.0%}) and a prefill stalls aggregated "
        f"decoding for {stalls:.1f} steps: aggregated is simpler (one pool, no KV transfer)",
        numbers,
    ]
