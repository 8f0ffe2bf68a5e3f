"""One step's numbers from its timed requests: latency percentiles, throughput, errors and
goodput. Definitions (../../docs/operations.md, "Benchmarking"):

- ttft_ms: sending to the first chunk that carries generated text; itl_ms: the gaps between
  such chunks (all requests' gaps pooled); first_gap_ms: each request's first gap (where a router
  answers with prefill's token before the KV transfer, as LMCache's PD proxy does, the transfer
  and decode's first step fall in it, not in TTFT); tpot_ms: per request, (last text chunk -
  first) / (completion tokens - 1) with the server's token count; e2e_ms: sending to the end of
  the stream.
- request_throughput: succeeded requests / the step's wall time; output_token_throughput: their
  completion tokens (server usage) / the wall time.
- A request meets the SLOs when its TTFT <= slo_ttft_ms and its own mean ITL (the mean of its
  gaps; none when it streamed one chunk) <= slo_itl_ms, each where given. goodput: requests that
  met them / the wall time; a step attains the SLOs when at least slo_attainment of its requests
  met them (DistServe's definition, 90% by default). A failed request never meets them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pdctl.bench.workload import BenchSettings
from pdctl.verify.report import stats
from pdctl.verify.timing import Timed


def meets_slo(timed: Timed, slo_ttft_ms: float | None, slo_itl_ms: float | None) -> bool:
    if timed.problem is not None or timed.ttft_ms is None:
        return False
    if slo_ttft_ms is not None and timed.ttft_ms > slo_ttft_ms:
        return False
    if slo_itl_ms is not None and timed.gaps_ms:
        return sum(timed.gaps_ms) / len(timed.gaps_ms) <= slo_itl_ms
    return True


def summarize(
    concurrency: int | None, timed: list[Timed], wall_s: float, workload: BenchSettings
) -> dict[str, Any]:
    """The step's numbers (its `-o json` entry, less the engines' counters)."""
    good = [t for t in timed if t.problem is None]
    tokens = sum(t.completion_tokens or 0 for t in good)
    wall = max(wall_s, 1e-9)
    problems = Counter(t.problem for t in timed if t.problem is not None)
    step: dict[str, Any] = {
        "concurrency": concurrency,
        "requests": len(timed),
        "succeeded": len(good),
        "errors": len(timed) - len(good),
        "error_samples": [f"{n} x {p}" for p, n in problems.most_common(3)],
        "duration_s": round(wall_s, 3),
        "request_throughput": round(len(good) / wall, 3),
        "output_token_throughput": round(tokens / wall, 2),
        "prompt_tokens": sum(t.prompt_tokens or 0 for t in good),
        "completion_tokens": tokens,
        "ttft_ms": stats([t.ttft_ms for t in good if t.ttft_ms is not None]),
        "itl_ms": stats([g for t in good for g in t.gaps_ms]),
        "first_gap_ms": stats([t.gaps_ms[0] for t in good if t.gaps_ms]),
        "tpot_ms": stats([t.tpot_ms for t in good if t.tpot_ms is not None]),
        "e2e_ms": stats([t.e2e_ms for t in good]),
        "goodput": None,
        "good_requests": None,
        "slo_met": None,
    }
    if workload.slo:
        met = sum(meets_slo(t, workload.slo_ttft_ms, workload.slo_itl_ms) for t in timed)
        step["good_requests"] = met
        step["goodput"] = round(met / wall, 3)
        step["slo_met"] = bool(timed) and met >= workload.slo_attainment * len(timed)
    return step
