"""A model's architecture as sizing needs it, from a Hugging Face config.json or the catalog.

`ModelArch` is the one shape the planner reads. `from_hf_config` derives it from any
config.json whose fields say enough (nested `text_config` of multimodal wrappers included) and
names the field it could not find otherwise; `catalog.py` builds the same shape from the model
catalog, and a test checks the two agree on real config.json files. `fetch_config` is the only
code that talks to the Hugging Face hub (huggingface_hub, imported only there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pdctl import files, hints, limits
from pdctl.errors import EnvironmentProblem, InputError
from pdctl.models import quantization
from pdctl.models.quantization import Quantization

# A config.json is a few KiB (the largest, with label maps or long layer lists, tens of KiB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024

WEIGHT_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4", "mxfp4")
_TORCH_DTYPES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}
# Layer kinds of config.json `layer_types` the planner can size; anything else (linear attention,
# Mamba state) holds state that is not a per-token KV cache.
_ATTENTION_LAYERS = {"full_attention", "sliding_attention"}


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention (DeepSeek-V2/V3/R1): one latent per token and layer."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None


@dataclass(frozen=True)
class Moe:
    experts: int
    active_experts: int
    expert_intermediate_size: int
    shared_experts: int = 0
    shared_intermediate_size: int = 0  # per shared expert
    dense_layers: int = 0  # leading layers with a dense MLP (first_k_dense_replace)


@dataclass(frozen=True)
class SlidingWindow:
    window: int
    layers: int  # how many layers attend within the window (the rest attend to everything)


@dataclass(frozen=True)
class ModelArch:
    """What sizing needs to know about a model. Sizes are config.json's."""

    name: str
    model_type: str
    architecture: str
    layers: int
    hidden_size: int
    intermediate_size: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    max_positions: int
    tied_embeddings: bool
    weight_dtype: str
    mla: Mla | None = None
    moe: Moe | None = None
    sliding_window: SlidingWindow | None = None
    extra_layers: int = 0  # in the checkpoint, not loaded for serving (MTP layers)
    gated: bool | None = None  # None: not known
    source: str = ""
    # What the checkpoint declares (pdctl.models.quantization): where the weight dtype was read,
    # and the KV cache dtype vLLM's --kv-cache-dtype auto picks for it (None: the model's dtype).
    quantization: str = ""
    auto_kv_dtype: str | None = None

    @property
    def attention(self) -> str:
        return "mla" if self.mla else "gqa"


def _text_config(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The language model's fields and their key path's prefix: multimodal wrappers nest them
    under text_config (or llm_config); the wrapper's own quantization_config and torch_dtype
    still apply."""
    for key in ("text_config", "llm_config", "language_config"):
        nested = config.get(key)
        if isinstance(nested, dict) and "num_hidden_layers" in nested:
            merged = dict(nested)
            for inherited in ("quantization_config", "torch_dtype", "dtype", "architectures"):
                if inherited in config and inherited not in merged:
                    merged[inherited] = config[inherited]
            return merged, f"{key}."
    return config, ""


# The largest value of each size the planner reads (pdctl.limits); any other number past
# limits.FIELD_MAX. Beyond these no model's (and past 2**53 a float, which the planner's
# arithmetic uses, cannot even hold them): refused by key path rather than overflowing later.
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "first_k_dense_replace")
_WIDTHS = (
    "hidden_size",
    "n_embd",
    "d_model",
    "intermediate_size",
    "ffn_hidden_size",
    "n_inner",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "head_dim",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
)
_HEADS = (
    "num_attention_heads",
    "n_head",
    "num_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "multi_query_group_num",
)
_EXPERTS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "moe_topk",
    "n_shared_experts",
    "num_shared_experts",
)
_MAXIMA = {
    **dict.fromkeys(_LAYERS, limits.LAYERS_MAX),
    "num_nextn_predict_layers": limits.LAYERS_MAX,
    **dict.fromkeys(_WIDTHS, limits.WIDTH_MAX),
    **dict.fromkeys(_HEADS, limits.HEADS_MAX),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), limits.VOCAB_MAX),
    **dict.fromkeys(_EXPERTS, limits.EXPERTS_MAX),
}


def _bounded(config: dict[str, Any], prefix: str, origin: str) -> None:
    """InputError naming the key path of the first number past its bound."""
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        most = _MAXIMA.get(key, limits.FIELD_MAX)
        if value != value or abs(value) > most:  # NaN, infinities, typos
            raise InputError(
                f"{origin}: {prefix}{key}: {_shown(value)} is more than any model's (at most "
                f"{most:,})",
                hint="check the config.json: a size, count or length this large is a typo",
            )


def _shown(value: float) -> str:
    """A number as people read it; one of hundreds of digits by its length."""
    if abs(value) < 10**18 or isinstance(value, float):
        return f"{value:,}"
    return f"an integer of {len(str(abs(value)))} digits"


def _refuse(origin: str, path: str, why: str) -> InputError:
    return InputError(f"{origin}: {path}: {why}", hint="check the config.json")


def _first(config: dict[str, Any], keys: tuple[str, ...], what: str, origin: str) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value > 0:
            return value
    raise InputError(
        f"{origin}: cannot derive {what}: none of {', '.join(keys)} is set to a positive integer",
        hint="pass a config.json of a decoder-only language model, or pick a model from the "
        "catalog (`pdctl catalog models` lists them)",
    )


def _optional(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _weight_dtype(
    config: dict[str, Any], quant: Quantization | None, stated: str | None, origin: str
) -> str:
    """The declared quantization's dtype, else --weight-dtype, else torch_dtype."""
    if quant is not None:
        if stated and stated != quant.weight_dtype:
            raise InputError(
                f"{origin}: --weight-dtype {stated} contradicts the checkpoint's "
                f"{quant.declared_in}, which makes the weights {quant.weight_dtype}",
                hint="drop --weight-dtype: the declaration is what vLLM loads",
            )
        return quant.weight_dtype
    if stated:
        return stated
    dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    if str(dtype) not in _TORCH_DTYPES:
        raise InputError(f"{origin}: torch_dtype {dtype!r} is not a floating point type I know")
    return _TORCH_DTYPES[str(dtype)]


def _stated(weight_dtype: str | None) -> str:
    return f"--weight-dtype {weight_dtype}" if weight_dtype else ""


def _sliding_window(config: dict[str, Any], layers: int, origin: str) -> SlidingWindow | None:
    layer_types = config.get("layer_types")
    window = _optional(config, "sliding_window")
    if isinstance(layer_types, list) and layer_types:
        unknown = sorted({str(t) for t in layer_types} - _ATTENTION_LAYERS)
        if unknown:
            raise InputError(
                f"{origin}: layer_types has {', '.join(unknown)} layers; the planner sizes "
                "attention KV caches only (full_attention, sliding_attention), not linear "
                "attention or state-space layers",
            )
        sliding = sum(1 for t in layer_types if t == "sliding_attention")
        if sliding and not window:
            raise InputError(f"{origin}: layer_types has sliding_attention but no sliding_window")
        return SlidingWindow(window, sliding) if sliding and window else None
    # Qwen2-style configs carry a sliding_window but switch it off with use_sliding_window.
    if config.get("use_sliding_window") is False or not window:
        return None
    return SlidingWindow(window, layers)


def _moe(config: dict[str, Any], layers: int, origin: str, prefix: str) -> Moe | None:
    experts = _optional(config, "num_experts", "num_local_experts", "n_routed_experts")
    if not experts:
        return None
    active = _optional(config, "num_experts_per_tok", "experts_per_token", "moe_topk")
    if not active:
        raise InputError(
            f"{origin}: a mixture-of-experts config ({experts} experts) without "
            "num_experts_per_tok: cannot derive the active experts per token"
        )
    if active > experts:
        raise _refuse(
            origin,
            f"{prefix}num_experts_per_tok",
            f"{active} experts per token, more than the {experts} experts",
        )
    expert_size = _optional(config, "moe_intermediate_size") or _first(
        config, ("intermediate_size",), "the experts' intermediate size", origin
    )
    shared = _optional(config, "n_shared_experts", "num_shared_experts") or 0
    shared_size = 0
    if shared:
        shared_size = expert_size
    elif _optional(config, "shared_expert_intermediate_size"):
        shared, shared_size = 1, int(config["shared_expert_intermediate_size"])
    dense = _optional(config, "first_k_dense_replace") or 0
    only_mlp = config.get("mlp_only_layers")
    if isinstance(only_mlp, list) and only_mlp:
        dense = max(dense, len(only_mlp))
    return Moe(experts, active, expert_size, shared, shared_size, min(dense, layers))


def from_hf_config(
    config: dict[str, Any],
    name: str,
    origin: str = "config.json",
    gated: bool | None = None,
    quant_file: dict[str, Any] | None = None,
    quant_origin: str = quantization.QUANT_FILE,
    weight_dtype: str | None = None,
) -> ModelArch:
    """The architecture a config.json describes (with the checkpoint's hf_quant_config.json, when
    it has one; `weight_dtype` where nothing declares it); InputError naming the missing field
    otherwise."""
    if not isinstance(config, dict):
        raise InputError(f"{origin}: not a JSON object")
    text, prefix = _text_config(config)
    quant = quantization.read(text, quant_file, origin, quant_origin)
    _bounded(text, prefix, origin)
    layers = _first(text, ("num_hidden_layers", "n_layer", "num_layers"), "the layer count", origin)
    hidden = _first(text, ("hidden_size", "n_embd", "d_model"), "the hidden size", origin)
    heads = _first(
        text, ("num_attention_heads", "n_head", "num_heads"), "the attention heads", origin
    )
    kv_heads = _optional(text, "num_key_value_heads", "num_kv_heads", "multi_query_group_num")
    if kv_heads is None:
        kv_heads = 1 if text.get("multi_query") else heads
    if kv_heads > heads:
        raise _refuse(
            origin,
            f"{prefix}num_key_value_heads",
            f"{kv_heads} KV heads, more than the {heads} attention heads",
        )
    intermediate = _first(
        text, ("intermediate_size", "ffn_hidden_size", "n_inner"), "the MLP size", origin
    )
    vocab = _first(text, ("vocab_size", "padded_vocab_size"), "the vocabulary size", origin)
    max_positions = _first(
        text,
        ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
        "the context length",
        origin,
    )
    mla = None
    kv_lora = _optional(text, "kv_lora_rank")
    if kv_lora:
        rope = _first(text, ("qk_rope_head_dim",), "the MLA rope head dim", origin)
        nope = _first(text, ("qk_nope_head_dim",), "the MLA head dim", origin)
        v_dim = _optional(text, "v_head_dim") or nope
        mla = Mla(kv_lora, rope, nope, v_dim, _optional(text, "q_lora_rank"))
        head_dim = rope + nope
    else:
        head_dim = _optional(text, "head_dim") or hidden // heads
    if head_dim < 1:
        raise _refuse(
            origin,
            f"{prefix}num_attention_heads",
            f"{heads} heads of a hidden size of {hidden}: under one dimension each",
        )
    architectures = _architectures(text, config, origin)
    return ModelArch(
        name=name,
        model_type=str(text.get("model_type") or config.get("model_type") or "unknown"),
        architecture=str(architectures[0]),
        layers=layers,
        hidden_size=hidden,
        intermediate_size=intermediate,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        max_positions=max_positions,
        tied_embeddings=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings"))),
        weight_dtype=_weight_dtype(text, quant, weight_dtype, origin),
        mla=mla,
        moe=_moe(text, layers, origin, prefix),
        sliding_window=_sliding_window(text, layers, origin),
        extra_layers=_optional(text, "num_nextn_predict_layers") or 0,
        gated=gated,
        source=origin,
        quantization=quant.declared_in if quant else _stated(weight_dtype),
        auto_kv_dtype=quant.kv_cache_dtype if quant else None,
    )


def _architectures(text: dict[str, Any], config: dict[str, Any], origin: str) -> list[str]:
    """config.json's `architectures`: a list of class names (["unknown"] when absent)."""
    found = text.get("architectures") or config.get("architectures") or ["unknown"]
    if not isinstance(found, list) or not all(isinstance(name, str) for name in found):
        raise _refuse(origin, "architectures", f"expected a list of class names, not {found!r}")
    return found


def _json(file: Path) -> dict[str, Any]:
    data = files.parse_json(files.read_text(file, MAX_CONFIG_BYTES), str(file))
    if not isinstance(data, dict):
        raise InputError(f"{file}: not a JSON object")
    return data


def load_config_file(path: Path, name: str, weight_dtype: str | None = None) -> ModelArch:
    """--model-config PATH: a config.json file or a checkpoint folder holding one; an
    hf_quant_config.json beside it (ModelOpt) is read too, as vLLM reads it."""
    file = path / "config.json" if path.is_dir() else path
    beside = file.parent / quantization.QUANT_FILE
    quant_file = _json(beside) if beside.is_file() and beside != file else None
    return from_hf_config(
        _json(file),
        name,
        str(file),
        quant_file=quant_file,
        quant_origin=str(beside),
        weight_dtype=weight_dtype,
    )


# ---- the Hugging Face hub (the one place that talks to it)

HUB_TIMEOUT_S = 10


def _unreachable(error: Exception) -> bool:
    """A connection failure of the hub client's HTTP library: requests' are OSErrors, httpx's
    (huggingface_hub 1.x) and httpx2's (2.x) TransportErrors."""
    return isinstance(error, OSError) or any(
        kind.__name__ == "TransportError" and kind.__module__.startswith("httpx")
        for kind in type(error).__mro__
    )


def fetch_config(repo: str, weight_dtype: str | None = None) -> ModelArch:
    """config.json of a hub repository, with huggingface_hub (token from HF_TOKEN, as the
    library reads it). Missing library or unreachable hub: EnvironmentProblem (exit 3); a
    repository that does not exist, is gated or has no config.json: InputError (exit 1)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise EnvironmentProblem(
            f"{repo} is not in the planner's catalog and HF_HUB_OFFLINE is set",
            hint="pass --model-config PATH to a config.json of the model",
        )
    try:
        import huggingface_hub
        from huggingface_hub import errors as hub_errors
    except ImportError:
        raise EnvironmentProblem(
            f"{repo} is not in the planner's catalog, and reading its config.json from the "
            "Hugging Face hub needs huggingface_hub, which is not installed",
            hint=hints.install_extra("hub") + "; or pass --model-config PATH (a config.json)",
        ) from None
    try:
        # One request without retries first: an unreachable hub or a missing, gated or private
        # repository answers in seconds (hf_hub_download retries a failed lookup five times).
        huggingface_hub.get_hf_file_metadata(
            huggingface_hub.hf_hub_url(repo, "config.json"), timeout=HUB_TIMEOUT_S
        )
        path = huggingface_hub.hf_hub_download(repo_id=repo, filename="config.json")
        _fetch_quant_file(huggingface_hub, hub_errors, repo)
    except (hub_errors.OfflineModeIsEnabled, hub_errors.LocalEntryNotFoundError) as error:
        # LocalEntryNotFoundError: the hub could not be reached and nothing is cached (it
        # subclasses EntryNotFoundError, so it is caught first).
        raise EnvironmentProblem(
            f"cannot read {repo}/config.json from the Hugging Face hub: {error}",
            hint="pass --model-config PATH to a config.json of the model, or --offline to "
            "plan from the catalog only",
        ) from None
    except hub_errors.GatedRepoError:
        raise InputError(
            f"{repo} is gated: its config.json needs a Hugging Face token with access",
            hint="accept the terms on the model's page and set HF_TOKEN, or pass --model-config",
        ) from None
    except hub_errors.RepositoryNotFoundError:
        raise InputError(
            f"{repo}: no such model repository on the Hugging Face hub (or it is private)",
            hint="check the name, or pass --model-config PATH",
        ) from None
    except hub_errors.EntryNotFoundError:
        raise InputError(f"{repo} has no config.json", hint="pass --model-config PATH") from None
    except hub_errors.HfHubHTTPError as error:
        raise EnvironmentProblem(
            f"the Hugging Face hub refused {repo}/config.json: {error}",
            hint="pass --model-config PATH",
        ) from None
    except Exception as error:  # connection failures that reach us unwrapped
        if not _unreachable(error):
            raise
        raise EnvironmentProblem(
            f"cannot read {repo}/config.json from the Hugging Face hub: {error}",
            hint="pass --model-config PATH, or --offline to plan from the catalog only",
        ) from None
    # hf_hub_download keeps a repository's files in one snapshot folder: hf_quant_config.json, when
    # the repository has one, is read beside config.json.
    arch = load_config_file(Path(path), repo, weight_dtype)
    return replace(arch, source=f"config.json of {repo} (Hugging Face hub)")


def _fetch_quant_file(hub: Any, hub_errors: Any, repo: str) -> None:
    """hf_quant_config.json of `repo` into the hub cache, when the repository has one (ModelOpt
    checkpoints declare their quantization there)."""
    try:
        hub.hf_hub_download(repo_id=repo, filename=quantization.QUANT_FILE)
    except hub_errors.EntryNotFoundError as error:
        if isinstance(error, hub_errors.LocalEntryNotFoundError):
            raise
