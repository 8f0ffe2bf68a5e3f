"""The layout search against brute force: on varied cases (catalog models, GPU types and counts,
lengths, targets, loads) the search's pick is as good as the best of every layout tried one by one
(`sizing.every_layout`, `aggregated.every_aggregated`: no pruning), under the objective of
docs/sizing.md: most targets met, then the context floors, then throughput (1% is a tie)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pdctl.models import catalog
from pdctl.plan import aggregated, objective, sizing
from pdctl.plan.layout import AggregatedEstimates, Engine, Request, Workload

CASES: list[tuple[str, str, int, dict[str, Any]]] = [
    ("llama-3.1-70b", "H100-80GB", 8, {"input_len": 8000, "output_len": 500}),
    ("llama-3.1-70b", "H100-80GB", 16, {"input_len": 2000, "output_len": 2000}),
    ("llama-3.1-70b", "H200", 8, {"input_len": 16000, "output_len": 400, "itl_ms": 40}),
    ("llama-3.1-70b", "A100-80GB", 12, {"input_len": 4096, "output_len": 512, "rate": 1.0}),
    ("llama-3.1-8b", "H100-80GB", 2, {"input_len": 4096, "output_len": 512}),
    ("llama-3.1-8b", "L4", 6, {"input_len": 3000, "output_len": 300}),
    ("llama-3.1-8b", "A10G", 4, {"input_len": 1024, "output_len": 1024, "ttft_ms": 2000}),
    ("llama-3.1-8b", "H200", 16, {"input_len": 8000, "output_len": 200, "rate": 20.0}),
    ("llama-3.2-1b", "L4", 3, {"input_len": 2048, "output_len": 128, "concurrency": 8}),
    ("llama-3.2-3b", "L40S", 5, {"input_len": 6000, "output_len": 600, "itl_ms": 15}),
    ("qwen2.5-7b", "A100-40GB", 4, {"input_len": 4096, "output_len": 256}),
    ("qwen2.5-32b", "H100-80GB", 6, {"input_len": 10000, "output_len": 1000, "ttft_ms": 5000}),
    ("qwen2.5-72b", "H200", 12, {"input_len": 3000, "output_len": 700, "concurrency": 256}),
    ("qwen3-8b", "B200", 4, {"input_len": 12000, "output_len": 300}),
    ("qwen3-32b", "L40S", 8, {"input_len": 2048, "output_len": 512, "rate": 0.5}),
    ("qwen3-30b-a3b", "H100-80GB", 4, {"input_len": 4096, "output_len": 512, "itl_ms": 25}),
    ("mixtral-8x7b", "A100-80GB", 8, {"input_len": 5000, "output_len": 250}),
    ("mistral-7b-v0.1", "L4", 4, {"input_len": 3500, "output_len": 500}),
    ("gpt-oss-20b", "H100-80GB", 3, {"input_len": 20000, "output_len": 1000}),
    ("gpt-oss-120b", "H200", 8, {"input_len": 8000, "output_len": 1000, "ttft_ms": 1500}),
    ("deepseek-v3", "H200", 16, {"input_len": 4096, "output_len": 1024}),
    ("llama-3.1-405b-fp8", "MI300X", 16, {"input_len": 8000, "output_len": 500}),
    ("llama-3.1-8b", "H100-80GB", 8, {"input_len": 512, "output_len": 2048, "concurrency": 1024}),
    ("qwen3-8b", "L40S", 8, {"input_len": 2000, "output_len": 1500, "concurrency": 256}),
]


def _request(model: str, gpu: str, gpus: int, workload: dict[str, Any]) -> Request:
    found = catalog.find_model(model)
    assert found is not None, model
    return Request(arch=found.arch, gpu=catalog.gpu(gpu), gpus=gpus, workload=Workload(**workload))


def _fitting(req: Request) -> list[Engine]:
    return [e for e in sizing.engines(req) if e.fits(objective.need_tokens(req))]


def _tier(req: Request, c: Any) -> tuple[int, bool]:
    return sum(c.meets), c.keeps_context(req)


@pytest.mark.parametrize(("model", "gpu", "gpus", "workload"), CASES)
def test_the_search_picks_the_best_of_every_layout(
    model: str, gpu: str, gpus: int, workload: dict[str, Any]
) -> None:
    req = _request(model, gpu, gpus, workload)
    fitting = _fitting(req)
    assert fitting, "every case fits"
    every = sizing.every_layout(req, fitting)
    assert every, "every case has a PD layout"
    picked = sizing.search(req, fitting)
    assert picked is not None
    top = max(_tier(req, c) for c in every)
    assert _tier(req, picked) == top
    best = max(c.estimates.requests_per_s for c in every if _tier(req, c) == top)
    assert picked.estimates.requests_per_s >= 0.99 * best
    # and the plan is that pick
    plan = sizing.plan(req)
    assert (plan.prefill, plan.decode) == (picked.prefill, picked.decode)


def _agg_tier(req: Request, a: AggregatedEstimates) -> tuple[int, bool]:
    return sum(a.meets), a.context >= objective.context_floor(req)


@pytest.mark.parametrize(("model", "gpu", "gpus", "workload"), CASES)
def test_the_aggregated_pick_is_the_best_of_every_aggregated_layout(
    model: str, gpu: str, gpus: int, workload: dict[str, Any]
) -> None:
    req = _request(model, gpu, gpus, workload)
    fitting = _fitting(req)
    every = aggregated.every_aggregated(req, fitting)
    picked = aggregated.aggregated(req, fitting)
    assert picked is not None and every
    if not any(all(a.meets) for a in every):  # none meets: the least miss (within the tie)
        misses = [aggregated.score(req, a).miss for a in every]
        assert aggregated.score(req, picked).miss <= min(misses) * (1 + objective.TIE)
        return
    top = max(_agg_tier(req, a) for a in every)
    assert _agg_tier(req, picked) == top
    best = max(a.requests_per_s for a in every if _agg_tier(req, a) == top)
    assert picked.requests_per_s >= 0.99 * best


def test_the_cases_are_varied() -> None:
    """The cases reach what the pruning relies on: targets of each kind, both loads, several
    prefill TPs, layouts with prefill smaller than decode."""
    plans = [sizing.plan(_request(*case)) for case in CASES]
    kinds = {k for _, _, _, w in CASES for k in w if k in ("ttft_ms", "itl_ms", "rate")}
    assert kinds == {"ttft_ms", "itl_ms", "rate"}
    assert len({p.prefill.engine.tp for p in plans}) >= 3
    assert any(p.prefill.engine.tp < p.decode.engine.tp for p in plans)
    assert any(p.prefill.replicas > 1 for p in plans) and any(p.decode.replicas > 1 for p in plans)


def test_a_closed_loop_ttft_target_is_searched_over_fewer_decode_engines() -> None:
    """Under a closed loop (--ttft without --rate) fewer decode engines can meet --ttft that more
    miss; the search then tries every count, so it agrees with brute force there too."""
    req = _request("llama-3.1-8b", "H100-80GB", 8, {"input_len": 8000, "output_len": 300})
    loose = sizing.plan(req)
    target = replace(req.workload, ttft_ms=loose.estimates.ttft_ms * 0.8)
    tight = replace(req, workload=target)
    fitting = _fitting(tight)
    picked = sizing.search(tight, fitting)
    assert picked is not None
    every = sizing.every_layout(tight, fitting)
    assert _tier(tight, picked) == max(_tier(tight, c) for c in every)
