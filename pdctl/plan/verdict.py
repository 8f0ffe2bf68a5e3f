"""Whether PD pays for a workload (likely, may, unlikely, with the reasons: docs/sizing.md "Whether
PD pays"), and the warnings a layout carries."""

from __future__ import annotations

from pdctl.plan.layout import Estimates, Request, RolePlan


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
    if unused:
        warnings.append(f"{unused} of {req.gpus} GPUs are left unused by this layout")
    if not e.concurrency_fits:
        warnings.append(
            f"one decode engine holds {e.decode_step_sequences} sequences of {w.total_len} "
            f"tokens, fewer than --concurrency {w.concurrency}: the decode step is estimated at "
            f"{e.decode_step_sequences}; more decode GPUs or a shorter context hold more"
        )
    if w.ttft_ms is not None and e.ttft_ms > w.ttft_ms:
        warnings.append(f"--ttft {w.ttft_ms:g} ms is not met: estimated {e.ttft_ms:.0f} ms")
    if w.itl_ms is not None and e.itl_ms > w.itl_ms:
        warnings.append(f"--itl {w.itl_ms:g} ms is not met: estimated {e.itl_ms:.1f} ms")
    if w.rate is not None and e.requests_per_s < w.rate:
        warnings.append(
            f"--rate {w.rate:g}/s is not met: this layout sustains about "
            f"{e.requests_per_s:.2f}/s ({e.bottleneck}-bound)"
        )
    if req.arch.sliding_window and req.hybrid_kv:
        warnings.append(
            "sliding-window layers are sized at their window (vLLM's hybrid KV cache manager, on "
            "with NixlConnector since vLLM PR #41847); with it off they cost full-attention KV"
        )
    return warnings
