"""A plan as JSON (`pdctl plan -o json`; the field names are documented in docs/sizing.md)."""

from __future__ import annotations

import math
from typing import Any

from pdctl import defaults
from pdctl.models.memory import (
    BLOCK_SIZE,
    GiB,
    checkpoint_bytes,
    kv_bytes_per_token,
    params,
    weight_bytes,
)
from pdctl.models.pods import pod
from pdctl.plan import efficiency, sensitivity
from pdctl.plan.layout import Choice, Plan, Request, RolePlan
from pdctl.plan.objective import TIE, source
from pdctl.plan.roofline import (
    DECODE_MATCH,
    PREFILL_MATCH,
    default_max_num_seqs,
)
from pdctl.plan.sizing import nodes_per_engine


def _round(value: float, digits: int = 2) -> float:
    return round(value, digits) if math.isfinite(value) else -1.0


def _finite(value: float, digits: int = 1) -> float | None:
    """Rounded; null when unbounded (a queue that grows without bound)."""
    return round(value, digits) if math.isfinite(value) else None


def _met(asked: object, met: bool) -> bool | None:
    return None if asked is None else met


def basis(req: Request) -> str:
    """What the estimates are: the roofline model's, or those calibrated to a bench run."""
    if req.calibrated_to:
        return f"roofline calibrated to {req.calibrated_to}"
    return "roofline estimate, not measured"


def objective(plan_: Plan) -> dict[str, Any]:
    """What the search maximised and under which targets (docs/sizing.md "The objective"); `met`
    is the choice's."""
    w = plan_.request.workload
    ttft, itl, rate = _choice(plan_).meets
    return {
        "maximize": "output_tokens_per_s",
        "per": "gpu_given",
        "tie": TIE,
        "tie_breaks": ["ttft_ms", "itl_ms"],
        "load": "rate" if w.rate is not None else "concurrency",
        "target_rate": plan_.target_rate,
        "slo": {"ttft_ms": w.ttft_ms, "itl_ms": w.itl_ms, "rate": w.rate},
        "source": {
            "ttft_ms": source(w, "ttft"),
            "itl_ms": source(w, "itl"),
            "rate": source(w, "rate"),
        },
        "met": {
            "ttft": _met(w.ttft_ms, ttft),
            "itl": _met(w.itl_ms, itl),
            "rate": _met(w.rate, rate),
        },
        "all_met": all((ttft, itl, rate)),
    }


def _choice(plan_: Plan) -> Choice:
    assert plan_.choice is not None  # sizing.plan sets it
    return plan_.choice


def choice_dict(plan_: Plan) -> dict[str, Any]:
    """The one layout plan and init stand behind: its mode and pools, and why."""
    choice = _choice(plan_)
    return {
        "mode": choice.mode,
        "asked": choice.asked,
        "roles": {
            pool.role: {"tp": pool.tp, "pp": pool.pp, "replicas": pool.replicas, "gpus": pool.gpus}
            for pool in choice.pools
        },
        "gpus": choice.gpus,
        "why": list(choice.why),
        "cost": choice.cost,
        "load": load_dict(plan_),
        "flips": plan_.flip.as_dict() if plan_.flip else None,
        "gpus_to_meet_targets": plan_.gpus_to_meet,
        "rules_of_thumb_agree": rules_agree(plan_),
    }


def load_dict(plan_: Plan) -> dict[str, Any]:
    """The load the choice assumes: --rate, else the closed loop of --concurrency."""
    w = plan_.request.workload
    if w.rate is not None:
        return {"flag": w.rate_flag, "value": w.rate}
    return {
        "flag": "--concurrency",
        "value": w.concurrency,
        "default": w.concurrency == defaults.PLAN_CONCURRENCY,
    }


def assumed_load(plan_: Plan) -> str:
    """The load in words: "--concurrency 64 in flight (a closed loop; pdctl's default)"."""
    load = load_dict(plan_)
    if load["flag"] != "--concurrency":
        return f"{load['flag']} {load['value']:g}/s (open arrivals)"
    default = "; pdctl's default: give --concurrency for your load" if load["default"] else ""
    return f"--concurrency {load['value']} in flight (a closed loop{default})"


def flip_line(plan_: Plan) -> str | None:
    """Where the choice flips, in words; None where no search ran (PD does not fit)."""
    if plan_.flip is not None:
        low, high = plan_.flip.searched
        return f"{plan_.flip.describe()} (loads searched: {low:g} to {high:g})"
    if not plan_.pd_within_gpus or plan_.target_rate is not None:
        return None
    grid = sensitivity.loads(plan_.request)
    flag = "--rate" if plan_.request.workload.rate is not None else "--concurrency"
    return f"the choice holds at every {flag} searched, {grid[0]:g} to {grid[-1]:g}"


def gpus_line(plan_: Plan) -> str | None:
    """Where no layout meets the targets: the fewest GPUs that would."""
    if plan_.choice is None or all(plan_.choice.meets) or plan_.target_rate is not None:
        return None
    gpu = plan_.request.gpu.name
    if plan_.gpus_to_meet is None:
        most = plan_.request.gpus * sensitivity.MAX_GPU_FACTOR
        return f"none on up to {most} x {gpu} at this load"
    return f"{plan_.gpus_to_meet} x {gpu} at this load (--gpus {plan_.gpus_to_meet})"


def rules_agree(plan_: Plan) -> bool:
    """Whether the rules of thumb (the workload's shape alone) point where the choice went:
    only then are they printed beside it (one verdict)."""
    mode = _choice(plan_).mode
    return (plan_.verdict, mode) in {("likely", "pd"), ("unlikely", "aggregated")}


def aggregated_dict(plan_: Plan) -> dict[str, Any] | None:
    a = plan_.aggregated
    if a is None:
        return None
    w = plan_.request.workload
    ttft, itl, rate = a.meets
    return {
        "tp": a.engine.tp,
        "replicas": a.replicas,
        "gpus": a.gpus,
        "kv_tokens_per_gpu": a.engine.layout.tokens(
            a.engine.pool_bytes, plan_.aggregated_max_model_len or a.context
        ),
        "batch_per_engine": a.batch,
        "prefill_ms": _round(a.prefill_ms, 1),
        "decode_step_ms": _round(a.decode_step_ms),
        "itl_ms": _round(a.itl_ms),
        "itl_stall_ms": _round(a.itl_stall_ms, 1),
        "prefill_share": _round(a.prefill_share, 3),
        "ttft_ms": _finite(a.ttft_ms),
        "ttft_unqueued_ms": _round(a.ttft_unqueued_ms, 1),
        "ttft_queue_ms": _finite(a.ttft_queue_ms),
        "requests_per_s": _round(a.requests_per_s),
        "load_requests_per_s": _round(a.load_requests_per_s),
        "output_tokens_per_s": _round(a.output_tokens_per_s, 0),
        "output_tokens_per_s_per_gpu": _round(a.output_tokens_per_s_per_gpu, 1),
        "met": {
            "ttft": _met(w.ttft_ms, ttft),
            "itl": _met(w.itl_ms, itl),
            "rate": _met(w.rate, rate),
        },
    }


def _role_dict(plan_: Plan, role: RolePlan) -> dict[str, Any]:
    engine, w = role.engine, plan_.request.workload
    pod_ = pod(plan_.request.arch, engine.tp)
    return {
        "tp": engine.tp,
        "pp": 1,
        "replicas": role.replicas,
        "gpus": role.gpus,
        "gpus_per_engine": engine.tp,
        "nodes_per_engine": nodes_per_engine(plan_.request, engine),
        "weights_gib_per_gpu": _round(engine.memory.weights),
        "kv_pool_gib_per_gpu": _round(engine.memory.kv_pool),
        "kv_bytes_per_token_per_gpu": engine.layout.per_token,
        "kv_tokens_per_gpu": engine.layout.tokens(engine.pool_bytes, plan_.max_model_len),
        "max_seqs_at_max_model_len": engine.layout.sequences(
            engine.pool_bytes, plan_.max_model_len
        ),
        "max_seqs_at_workload": engine.layout.sequences(engine.pool_bytes, w.total_len),
        "memory": engine.memory.as_dict(),
        "pod": {
            "cpu": pod_.cpu,
            "memory_gib": pod_.memory_gib,
            "cache_gib": pod_.cache_gib,
            "shm_gib": pod_.shm_gib,
        },
    }


def plan_dict(plan_: Plan) -> dict[str, Any]:
    """The JSON of `pdctl plan -o json`; field names are documented in docs/sizing.md."""
    req, arch, e, w = plan_.request, plan_.request.arch, plan_.estimates, plan_.request.workload
    eff = efficiency.for_gpu(req.gpu)
    p = params(arch)
    return {
        "schema_version": 2,
        "choice": choice_dict(plan_),
        "model": {
            "name": arch.name,
            "source": arch.source,
            "architecture": arch.architecture,
            "model_type": arch.model_type,
            "attention": arch.attention,
            "moe": arch.moe is not None,
            "sliding_window": arch.sliding_window.window if arch.sliding_window else None,
            "params_billion": _round(p.total / 1e9),
            "active_params_billion": _round(p.active / 1e9),
            "weight_dtype": arch.weight_dtype,
            "quantization": arch.quantization or None,
            "kv_cache_dtype_auto": arch.auto_kv_dtype,
            "weights_gib": _round(weight_bytes(arch) / GiB),
            "checkpoint_gib": _round(checkpoint_bytes(arch) / GiB),
            "max_position_embeddings": arch.max_positions,
            "gated": arch.gated,
        },
        "gpu": {
            "name": req.gpu.name,
            "memory_gib": req.gpu.memory_gib,
            "hbm_tbps": req.gpu.hbm_tbps,
            "bf16_tflops": req.gpu.bf16_tflops,
            "link": req.gpu.link,
            "resource": req.gpu.resource,
        },
        "request": {
            "gpus": req.gpus,
            "gpus_per_node": req.gpus_per_node,
            "gpu_memory_utilization": req.utilization,
            "kv_cache_dtype": req.kv_cache_dtype,
            "kv_cache_dtype_asked": req.kv_cache_dtype_asked,
            "input_len": w.input_len,
            "output_len": w.output_len,
            "concurrency": w.concurrency,
            "rate": w.rate,
            "ttft_ms": w.ttft_ms,
            "itl_ms": w.itl_ms,
        },
        "kv_bytes_per_token": kv_bytes_per_token(arch),
        "kv_bytes_per_token_fp8": kv_bytes_per_token(arch, "fp8"),
        "kv_bytes_per_token_planned": kv_bytes_per_token(arch, req.kv_cache_dtype),
        "max_model_len": plan_.max_model_len,
        "gpus_used": plan_.gpus_used,
        "roles": {
            "prefill": _role_dict(plan_, plan_.prefill),
            "decode": _role_dict(plan_, plan_.decode),
        },
        "estimates": {
            "basis": basis(req),
            "prefill_ms": _round(e.prefill_ms, 1),
            "prefill_tokens_per_s": _round(e.prefill_tokens_per_s, 0),
            "prefill_requests_per_s_per_engine": _round(e.prefill_requests_per_s),
            "decode_step_ms": _round(e.decode_step_ms),
            "decode_step_sequences": e.decode_step_sequences,
            "decode_tokens_per_s": _round(e.decode_tokens_per_s, 0),
            "decode_batch_per_engine": e.decode_batch,
            "itl_ms": _round(e.itl_ms),
            "decode_requests_per_s_per_engine": _round(e.decode_requests_per_s),
            "kv_transfer_ms": _round(e.kv_transfer_ms),
            "kv_transfer_mb_per_gpu": _round(e.kv_transfer_mb, 1),
            "kv_transfer_link_gbps": req.link_gbps,
            "ttft_ms": _finite(e.ttft_ms),
            "ttft_unqueued_ms": _round(e.ttft_unqueued_ms, 1),
            "ttft_queue_ms": _finite(e.ttft_queue_ms),
            "prefill_utilization": _round(e.prefill_utilization, 3),
            "requests_per_s": _round(e.requests_per_s),
            "load_requests_per_s": _round(e.load_requests_per_s),
            "output_tokens_per_s": _round(e.output_tokens_per_s, 0),
            "output_tokens_per_s_per_gpu": _round(e.output_tokens_per_s_per_gpu, 1),
            "bottleneck": e.bottleneck,
        },
        "pd_within_gpus": plan_.pd_within_gpus,
        "objective": objective(plan_),
        "aggregated": aggregated_dict(plan_),
        "assumptions": {
            "mfu": eff.dense_gemm,
            "bandwidth_efficiency": eff.bandwidth,
            "rate_matching": {"prefill": PREFILL_MATCH, "decode": DECODE_MATCH},
            "allreduce_latency_us": eff.allreduce_latency_s * 1e6,
            "efficiency": eff.as_dict(),
            "block_size": BLOCK_SIZE,
            "hybrid_kv_cache": req.hybrid_kv,
            "max_num_seqs": default_max_num_seqs(req.gpu),
            "calibration": {
                "source": req.calibrated_to,
                "prefill_scale": round(req.prefill_scale, 4),
                "decode_scale": round(req.decode_scale, 4),
                "notes": list(req.calibration),
            }
            if req.calibration
            else None,
        },
        "rules_of_thumb": {"pd": plan_.verdict, "reasons": plan_.reasons},
        "warnings": plan_.warnings,
        "pd_layout_warnings": plan_.pd_warnings,
        "notes": plan_.notes,
    }
