"""A checkpoint's quantization declarations, read as vLLM reads them.

A checkpoint declares its quantization in config.json's `quantization_config` (block FP8,
compressed-tensors, AWQ, ...) or, for NVIDIA ModelOpt exports, in `hf_quant_config.json` beside
config.json (`producer.name: modelopt`, `quantization.quant_algo`,
`quantization.kv_cache_quant_algo`).
vLLM reads the second when the first is absent and treats it as `quant_method: modelopt`
(vllm/transformers_utils/config.py, the hf_quant_config.json branch of get_config; vllm/config/
model.py, _parse_quant_hf_config, sets quant_method "modelopt" for producer modelopt).

`--kv-cache-dtype auto` is not always the model's dtype: vLLM 0.26 resolves "auto" through the
checkpoint's quantization config, and a ModelOpt checkpoint's `kv_cache_quant_algo` (or
`kv_cache_scheme`) FP8 makes the KV cache FP8 (vllm/utils/torch_utils.py,
resolve_kv_cache_dtype_string and get_kv_cache_quant_algo_string: only quant_method "modelopt*" is
consulted; every other method leaves "auto" to the model's dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdctl.errors import InputError

QUANT_FILE = "hf_quant_config.json"

# quantization_config.quant_method -> weight dtype of the quantized (linear) layers.
_QUANT_METHODS = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "mxfp4": "mxfp4",
    "awq": "int4",
    "gptq": "int4",
    "bitsandbytes_4bit": "int4",
}
# ModelOpt quant_algo -> weight dtype (vLLM's docs/features/quantization/modelopt.md lists the FP8
# ones: per-tensor, per-channel/per-token, block-scaled weight-only).
_MODELOPT_ALGOS = {"fp8": "fp8", "fp8_per_channel_per_token": "fp8", "fp8_pb_wo": "fp8"}
_MODELOPT_KV = {"fp8": "fp8"}  # vLLM's MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP, the part sized here


@dataclass(frozen=True)
class Quantization:
    weight_dtype: str  # of the quantized linear layers
    kv_cache_dtype: str | None  # what --kv-cache-dtype auto picks; None: the model's dtype
    declared_in: str  # "config.json quantization_config (fp8)", "hf_quant_config.json (...)"


def effective(config: dict[str, Any], quant_file: dict[str, Any] | None) -> dict[str, Any] | None:
    """The quantization config vLLM uses: config.json's, else hf_quant_config.json's."""
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        return quant
    return quant_file


def _is_modelopt(quant: dict[str, Any]) -> bool:
    producer = quant.get("producer")
    name = producer.get("name") if isinstance(producer, dict) else None
    return str(quant.get("quant_method", "")).lower().startswith("modelopt") or name == "modelopt"


def _modelopt(quant: dict[str, Any], where: str, origin: str) -> Quantization:
    inner = quant.get("quantization")
    inner = inner if isinstance(inner, dict) else quant
    algo = str(inner.get("quant_algo") or "").lower()
    if algo not in _MODELOPT_ALGOS:
        raise InputError(
            f"{origin}: {where} quant_algo {algo.upper() or '(none)'!r} is not known to the "
            "planner, so the size of the weights is unknown",
            hint="known ModelOpt algorithms: "
            + ", ".join(a.upper() for a in sorted(_MODELOPT_ALGOS))
            + "; or pass --weight-dtype with a config.json that declares no quantization",
        )
    kv = (
        inner.get("kv_cache_scheme")
        or quant.get("kv_cache_scheme")
        or inner.get("kv_cache_quant_algo")
        or quant.get("kv_cache_quant_algo")
    )
    if isinstance(kv, dict):  # compressed-tensors style scheme inside a ModelOpt config
        fp8 = kv.get("num_bits") == 8 and kv.get("type") == "float" and kv.get("dynamic") is False
        kv = "fp8" if fp8 else None
    kv_dtype = _MODELOPT_KV.get(str(kv).lower()) if isinstance(kv, str) else None
    kv_text = f", KV cache {kv_dtype.upper()}" if kv_dtype else ""
    return Quantization(
        _MODELOPT_ALGOS[algo], kv_dtype, f"{where} (ModelOpt {algo.upper()}{kv_text})"
    )


def _compressed_tensors_bits(quant: dict[str, Any]) -> int | None:
    groups = quant.get("config_groups")
    if not isinstance(groups, dict):
        return None
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and isinstance(weights.get("num_bits"), int):
            return int(weights["num_bits"])
    return None


def read(
    config: dict[str, Any],
    quant_file: dict[str, Any] | None,
    origin: str,
    quant_origin: str = QUANT_FILE,
) -> Quantization | None:
    """What the checkpoint declares (None: nothing, the weights are its torch_dtype); InputError
    for a declaration the planner cannot size."""
    quant = effective(config, quant_file)
    if quant is None:
        return None
    where = (
        "config.json quantization_config"
        if isinstance(config.get("quantization_config"), dict)
        else quant_origin
    )
    if _is_modelopt(quant):
        return _modelopt(quant, where, origin)
    method = str(quant.get("quant_method", "")).lower()
    if method in _QUANT_METHODS:
        dtype = _QUANT_METHODS[method]
        block = quant.get("weight_block_size")
        detail = f", blocks {block}" if isinstance(block, list) else ""
        return Quantization(dtype, None, f"{where} ({method}{detail})")
    bits = _compressed_tensors_bits(quant) if method == "compressed-tensors" else None
    if bits in (4, 8):
        dtype = "int4" if bits == 4 else "fp8"
        return Quantization(dtype, None, f"{where} (compressed-tensors, {bits}-bit weights)")
    bits = quant.get("bits") or quant.get("w_bit")
    if bits in (4, 8):
        return Quantization("int4" if bits == 4 else "int8", None, f"{where} ({bits}-bit)")
    raise InputError(
        f"{origin}: {where}.quant_method {method or '(none)'!r} is not known to the planner, so "
        "the size of the weights is unknown",
        hint="known methods: "
        + ", ".join(sorted(_QUANT_METHODS))
        + ", compressed-tensors, modelopt",
    )
