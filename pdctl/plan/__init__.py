"""Planning a PD deployment: catalogs, model configs, sizing arithmetic and values emission.

`catalog` (GPUs and models), `model_config` (config.json to ModelArch, the hub), `sizing` (pure
arithmetic: memory, KV, roofline, layout search, pods), `emit` (the values file, checked by the
values pipeline), `calibrate` (the time estimates fitted to a `pdctl bench` run).
`resolve_model` and `make_plan` tie them together for the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pdctl import defaults, limits
from pdctl.errors import InputError, PdctlError
from pdctl.hints import did_you_mean
from pdctl.models import catalog, memory
from pdctl.models.config import ModelArch, fetch_config, load_config_file
from pdctl.plan import sensitivity
from pdctl.plan.frontier import fewest_gpus
from pdctl.plan.layout import Plan, Request, Workload
from pdctl.plan.sizing import plan

__all__ = ["Workload", "make_plan", "resolve_model"]


def resolve_model(
    name: str, config: Path | None = None, offline: bool = False, weight_dtype: str | None = None
) -> ModelArch:
    """The model's architecture: --model-config, else the catalog, else (unless offline) the
    config.json on the Hugging Face hub; `weight_dtype` (--weight-dtype) where nothing declares
    the checkpoint's quantization. A model of more than limits.PARAMS_MAX parameters is none (a
    config.json's typo): InputError."""
    arch = _resolve(name, config, offline, weight_dtype)
    total = memory.params(arch).total
    if total > limits.PARAMS_MAX:
        raise InputError(
            f"{arch.source or arch.name}: {total:,} parameters, more than any model's (at most "
            f"{limits.PARAMS_MAX:,})",
            hint="check the config.json's sizes: one this large is a typo",
        )
    return arch


def _resolve(name: str, config: Path | None, offline: bool, weight_dtype: str | None) -> ModelArch:
    known = catalog.find_model(name)
    if config is not None:
        arch = load_config_file(config, known.arch.name if known else name, weight_dtype)
        return replace(arch, gated=known.arch.gated) if known else arch
    if known:
        return _stated(known.arch, weight_dtype)
    suggested = did_you_mean(catalog.model_suggestions(name))
    if offline or "/" not in name:
        why = (
            "--offline forbids reading its config.json from the Hugging Face hub"
            if offline
            else "it is not a Hugging Face repository id (owner/name) to read a config.json from"
        )
        raise InputError(
            f"{name} is not in the planner's model catalog, and {why}",
            hint=suggested
            + "pass --model-config PATH (a config.json)"
            + (", or drop --offline" if offline else "")
            + "; `pdctl catalog models` lists the catalog",
        )
    try:
        return fetch_config(name, weight_dtype)
    except PdctlError as error:
        error.hint = suggested + (error.hint or "")
        raise


def _stated(arch: ModelArch, weight_dtype: str | None) -> ModelArch:
    """A catalog entry with --weight-dtype: the stated dtype, unless the entry records a
    quantized checkpoint of another."""
    if weight_dtype is None or weight_dtype == arch.weight_dtype:
        return arch
    if arch.quantization:
        raise InputError(
            f"--weight-dtype {weight_dtype} contradicts {arch.name}'s {arch.quantization}, which "
            f"makes the weights {arch.weight_dtype}",
            hint="drop --weight-dtype: the declaration is what vLLM loads",
        )
    return replace(arch, weight_dtype=weight_dtype, quantization=f"--weight-dtype {weight_dtype}")


def make_plan(
    arch: ModelArch,
    gpu_type: str,
    gpus: int,
    workload: Workload,
    *,
    gpus_per_node: int = defaults.GPUS_PER_NODE,
    utilization: float = defaults.GPU_MEMORY_UTILIZATION,
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    hetero_tp: bool = True,
    one_pair: bool = False,
    network_gbps: float | None = None,
    fallback: bool = False,
    target_rate: float | None = None,
    calibrate: Callable[[Request], Request] | None = None,
    mode: str = "auto",
) -> Plan:
    """Plan `arch` on `gpus` GPUs of the catalog's `gpu_type` (DoesNotFit when it cannot; with
        `fallback`, GPUs too few for PD but enough for one engine plan aggregated serving with the
        smallest PD layout beside it; with `target_rate`, the fewest GPUs up to `gpus` that meet the
        targets at that rate; `calibrate` adjusts the request's time estimates first; `mode` auto
    picks PD or aggregated by the objective, pd or aggregated forces one)."""
    asked = kv_cache_dtype
    if kv_cache_dtype == "auto" and arch.auto_kv_dtype:
        kv_cache_dtype = arch.auto_kv_dtype  # what vLLM's auto picks (pdctl.models.quantization)
    request = Request(
        arch=arch,
        gpu=catalog.gpu(gpu_type),
        gpus=gpus,
        workload=workload,
        gpus_per_node=gpus_per_node,
        utilization=utilization,
        kv_cache_dtype=kv_cache_dtype,
        kv_cache_dtype_asked=asked,
        max_model_len=max_model_len,
        hetero_tp=hetero_tp,
        one_pair=one_pair,
        network_gbps=network_gbps,
        mode=mode,
    )
    if calibrate is not None:
        request = calibrate(request)
    others = list(catalog.gpus().values())
    if target_rate is not None:
        return fewest_gpus(request, target_rate, others)
    found = plan(request, others, fallback=fallback)
    found.flip = sensitivity.flip(found, others)
    found.gpus_to_meet = sensitivity.gpus_to_meet(found, others)
    return found
