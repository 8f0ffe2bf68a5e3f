"""Recompute Hopper's fitted efficiency factors (pdctl/plan/efficiency.py) from the measurements
marked `use: fit` (pdctl/models/catalog/measurements.yaml), and print the ratio of every H200
entry under the result, fitted and held out apart.

    python scripts/fit_efficiency.py

Prefill: the dense BF16 share solved (bisection) so that the dense prefill throughput entry's
ratio is 1, then the request overhead as that engine's TTFT alone less its prefill; then, in the
same way, the routed-expert share on the fit prefill entries of MoE models without MLA (steady
rates, benchmarks/real_engines/steady.py; their geometric mean ratio 1), then the MLA forward's
share on those of MLA models. A share with no fit entry is left as efficiency.py has it, and the
script says so (MLA has none: its share is aiconfigurator's, efficiency.py says why). Then an MoE
model's idle-step floor: least squares of ratio - 1 over the fit TTFT entries of BF16 MoE models
whose prompt is past the CUDA-graph sizes (a ternary search; entries the floor does not bind pull
nothing). Decode: the expert weight-read efficiency and the step costs by least squares of
ratio - 1 over the fit decode entries of BF16 weights and KV (a seeded random search: no solver
dependency). Last the FP8 classes on their own entries (fit_fp8), the BF16 factors fixed. The
values in efficiency.py are these, rounded.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pdctl.plan import efficiency, measurements, roofline  # noqa: E402

DENSE_PREFILL = "pdstack-h200-llama-3.1-8b-prefill-2048"
DENSE_TTFT = "pdstack-h200-llama-3.1-8b-ttft-2048"
DECODE = (  # field, search range
    ("kv_bandwidth", (0.5, 1.0)),
    ("moe_expert_bandwidth", (0.3, 1.0)),
    ("step_per_layer_s", (0.0, 100e-6)),
    ("step_per_moe_layer_s", (0.0, 150e-6)),
    ("step_per_sequence_s", (0.0, 40e-6)),
    ("step_floor_s", (0.0, 3e-3)),
)


def ratios(factors: efficiency.Efficiency, entries: list[measurements.Measurement]) -> list[float]:
    efficiency.GENERATIONS["H200"] = factors
    return [
        measurements.EstimateComparison(e, metric, value, measurements.estimate_ms(e, metric)).ratio
        for e in entries
        for metric, value in e.measured.items()
    ]


def solve_share(
    factors: efficiency.Efficiency, field: str, entries: list[measurements.Measurement]
) -> efficiency.Efficiency:
    """The share `field` at which the entries' geometric mean ratio is 1 (bisection: more share,
    faster, so the ratio goes down)."""

    def at(share: float) -> efficiency.Efficiency:
        changes: dict[str, Any] = {field: share}
        return replace(factors, **changes)

    low, high = 0.02, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        logs = [math.log(r) for r in ratios(at(middle), entries)]
        low, high = (middle, high) if sum(logs) > 0 else (low, middle)
    return at((low + high) / 2)


def prefill_entries(
    data: Sequence[measurements.Measurement], kind: str
) -> list[measurements.Measurement]:
    """The fit H200 prefill throughput entries of MoE models without MLA ("moe") or of MLA
    models ("mla")."""
    chosen = []
    for entry in h200_fit(data, "prefillTokensPerS"):
        arch = entry.arch()
        if fp8_weights(entry):
            continue
        if (kind == "mla" and arch.mla) or (kind == "moe" and arch.moe and not arch.mla):
            chosen.append(entry)
    return chosen


def fp8_weights(entry: measurements.Measurement) -> bool:
    return entry.arch().weight_dtype == "fp8"


def fp8_kv(entry: measurements.Measurement) -> bool:
    return entry.kv_cache_dtype.startswith("fp8")


def h200_fit(
    data: Sequence[measurements.Measurement], metric: str
) -> list[measurements.Measurement]:
    return [e for e in data if e.gpu == "H200" and e.use == "fit" and metric in e.measured]


def fit_prefill(
    factors: efficiency.Efficiency, data: Sequence[measurements.Measurement]
) -> efficiency.Efficiency:
    """The dense share, the request overhead, then the expert and MLA shares where measured."""
    by_id = {e.id: e for e in data}
    factors = solve_share(factors, "dense_gemm", [by_id[DENSE_PREFILL]])
    factors = replace(factors, request_overhead_s=0.0)
    ttft = by_id[DENSE_TTFT]
    efficiency.GENERATIONS["H200"] = factors
    prefill_ms = measurements.estimate_ms(ttft, "ttftMs")
    factors = replace(factors, request_overhead_s=(ttft.measured["ttftMs"] - prefill_ms) / 1000)
    for field, kind, label in (("moe_experts", "moe", "MoE"), ("mla_prefill", "mla", "MLA")):
        if entries := prefill_entries(data, kind):
            factors = solve_share(factors, field, entries)
        else:
            print(f"{field}: no fit prefill entry of an {label} model: kept as it is")
    return factors


def fit_idle_step(
    factors: efficiency.Efficiency, data: Sequence[measurements.Measurement]
) -> efficiency.Efficiency:
    """moe_idle_step_s by least squares over the fit TTFT entries of MoE models past the graph
    sizes (roofline.idle_step_floor_seconds)."""
    entries = [
        e
        for e in h200_fit(data, "ttftMs")
        if e.arch().moe
        and not fp8_weights(e)
        and e.input_len > roofline.max_cudagraph_tokens(e.arch(), e.gpu_entry())
    ]
    print(f"moe_idle_step_s: {len(entries)} fit TTFT entries of MoE models past the graph sizes")
    return least_squares(factors, "moe_idle_step_s", (0.0, 0.3), entries)


def least_squares(
    factors: efficiency.Efficiency,
    field: str,
    bounds: tuple[float, float],
    entries: list[measurements.Measurement],
) -> efficiency.Efficiency:
    """`field` at the least sum of (ratio - 1)^2 over the entries (a ternary search)."""

    def at(value: float) -> efficiency.Efficiency:
        changes: dict[str, Any] = {field: value}
        return replace(factors, **changes)

    def score(value: float) -> float:
        return sum((r - 1) ** 2 for r in ratios(at(value), entries))

    low, high = bounds
    for _ in range(100):
        left, right = low + (high - low) / 3, high - (high - low) / 3
        low, high = (low, right) if score(left) <= score(right) else (left, high)
    return at((low + high) / 2)


def fit_fp8(
    factors: efficiency.Efficiency, data: Sequence[measurements.Measurement]
) -> efficiency.Efficiency:
    """The FP8 classes, each on its own fit entries, after the BF16 ones: the dense FP8 GEMM
    share and its width (for each width on a grid, the share at geometric mean ratio 1; the
    width of the least squared log ratios), the FP8 experts' share, the FP8 KV cache's read
    share (BF16 weights), then the FP8 weights' cost per layer (a grid of whole microseconds) and
    read share."""
    prefill = h200_fit(data, "prefillTokensPerS")
    dense = [e for e in prefill if fp8_weights(e) and not e.arch().moe]

    def log_error(f: efficiency.Efficiency) -> float:
        return sum(math.log(r) ** 2 for r in ratios(f, dense))

    widths = [replace(factors, fp8_gemm_width=w) for w in range(0, 8001, 250)]
    factors = min((solve_share(f, "fp8_gemm", dense) for f in widths), key=log_error)
    moe = [e for e in prefill if fp8_weights(e) and e.arch().moe]
    factors = solve_share(factors, "fp8_moe_experts", moe)
    decode = h200_fit(data, "tpotMs")
    kv = [e for e in decode if fp8_kv(e) and not fp8_weights(e)]
    factors = least_squares(factors, "fp8_kv_bandwidth", (0.3, 1.0), kv)
    weights = [e for e in decode if fp8_weights(e) and not e.arch().moe]

    def per_layer(cost: float) -> efficiency.Efficiency:  # the best read share at this cost
        return least_squares(
            replace(factors, fp8_step_per_layer_s=cost), "fp8_bandwidth", (0.5, 1.0), weights
        )

    def score(f: efficiency.Efficiency) -> float:
        return sum((r - 1) ** 2 for r in ratios(f, weights))

    factors = min((per_layer(us * 1e-6) for us in range(0, 101)), key=score)
    print(
        f"FP8: {len(dense)} dense and {len(moe)} MoE prefill entries, {len(kv)} FP8 KV and "
        f"{len(weights)} FP8 weight decode entries"
    )
    return factors


def main() -> None:
    data = measurements.measurements().entries
    factors = fit_idle_step(fit_prefill(efficiency.HOPPER, data), data)
    fit = [e for e in h200_fit(data, "tpotMs") if not (fp8_weights(e) or fp8_kv(e))]

    def score(f: efficiency.Efficiency) -> float:
        return sum((r - 1) ** 2 for r in ratios(f, fit))

    rng, best, steps = random.Random(20), factors, [(hi - lo) / 4 for _, (lo, hi) in DECODE]
    best_score = score(best)
    for round_ in range(12000):
        trial = {
            field: min(hi, max(lo, getattr(best, field) + rng.gauss(0, step)))
            for (field, (lo, hi)), step in zip(DECODE, steps, strict=True)
        }
        candidate = replace(best, **trial)
        if (candidate_score := score(candidate)) < best_score:
            best, best_score = candidate, candidate_score
        if round_ % 3000 == 2999:
            steps = [step / 4 for step in steps]
    best = fit_fp8(best, data)
    prefill = ("dense_gemm", "request_overhead_s", "moe_experts", "mla_prefill", "moe_idle_step_s")
    fp8 = ("fp8_gemm", "fp8_gemm_width", "fp8_moe_experts", "fp8_kv_bandwidth", "fp8_bandwidth")
    for field in (*prefill, *(f for f, _ in DECODE), *fp8, "fp8_step_per_layer_s"):
        kept = getattr(efficiency.HOPPER, field)
        print(f"{field:24} {getattr(best, field):.4g}  (efficiency.py: {kept:.4g})")
    print(f"least squares over {len(fit)} fit decode entries: {best_score:.4f}")
    own = [e for e in data if e.gpu == "H200" and e.id.startswith("pdstack-")]
    for e, r in zip(own, ratios(best, own), strict=True):
        print(f"  {e.use:5} {r:5.2f}  {e.id}")


if __name__ == "__main__":
    main()
