"""config.json to ModelArch: real files of each family, the fields that must be named when
missing, and the Hugging Face hub path at its boundary (a test double of the download)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pdctl.errors import EnvironmentProblem, InputError
from pdctl.models.config import Mla, Moe, SlidingWindow, from_hf_config, load_config_file
from pdctl.plan import resolve_model
from tests.helpers import ROOT

CONFIGS = ROOT / "tests" / "fixtures" / "configs"
CHECKPOINTS = ROOT / "tests" / "fixtures" / "checkpoints"
MODELOPT_FP8 = CHECKPOINTS / "llama-3.1-70b-instruct-fp8"  # nvidia/Llama-3.1-70B-Instruct-FP8


def config(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / name).read_text())


def test_llama_dense_gqa() -> None:
    arch = load_config_file(CONFIGS / "llama-3.1-8b.json", "x")
    assert (arch.layers, arch.kv_heads, arch.head_dim, arch.weight_dtype) == (32, 8, 128, "bf16")
    assert arch.attention == "gqa" and not arch.moe and not arch.sliding_window


def test_llama_32_head_dim_and_tied_embeddings() -> None:
    arch = from_hf_config(config("llama-3.2-3b.json"), "x")
    assert arch.head_dim == 128 and arch.tied_embeddings


def test_qwen2_sliding_window_switched_off_is_no_window() -> None:
    raw = config("qwen2.5-7b.json")
    assert raw["sliding_window"] == 131072 and raw["use_sliding_window"] is False
    assert from_hf_config(raw, "x").sliding_window is None


def test_mistral_v01_slides_on_every_layer() -> None:
    assert from_hf_config(config("mistral-7b-v0.1.json"), "x").sliding_window == SlidingWindow(
        4096, 32
    )


def test_gpt_oss_alternating_layers_mxfp4_moe() -> None:
    arch = from_hf_config(config("gpt-oss-20b.json"), "x")
    assert arch.sliding_window == SlidingWindow(128, 12)
    assert arch.weight_dtype == "mxfp4"
    assert arch.moe == Moe(32, 4, 2880)


def test_deepseek_is_mla_despite_its_kv_heads() -> None:
    raw = config("deepseek-v3.json")
    assert raw["num_key_value_heads"] == 128  # MLA: the config's KV heads are not what vLLM caches
    arch = from_hf_config(raw, "x")
    assert arch.mla == Mla(512, 64, 128, 128, 1536)
    assert arch.moe == Moe(256, 8, 2048, 1, 2048, 3)
    assert (arch.weight_dtype, arch.extra_layers) == ("fp8", 1)


@pytest.mark.parametrize(
    ("fixture", "experts"),
    [("mixtral-8x7b.json", Moe(8, 2, 14336)), ("qwen3-30b-a3b.json", Moe(128, 8, 768))],
)
def test_moe_families(fixture: str, experts: Moe) -> None:
    assert from_hf_config(config(fixture), "x").moe == experts


def test_a_multimodal_wrapper_is_read_through_text_config() -> None:
    wrapped = {
        "architectures": ["SomethingForConditionalGeneration"],
        "torch_dtype": "bfloat16",
        "text_config": {**config("qwen3-8b.json"), "torch_dtype": None},
        "vision_config": {"hidden_size": 1152},
    }
    wrapped["text_config"].pop("torch_dtype")  # type: ignore[attr-defined]
    arch = from_hf_config(wrapped, "x")
    assert (arch.layers, arch.weight_dtype) == (36, "bf16")


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        ("num_hidden_layers", "num_hidden_layers"),
        ("hidden_size", "hidden_size"),
        ("num_attention_heads", "num_attention_heads"),
        ("vocab_size", "vocab_size"),
        ("max_position_embeddings", "max_position_embeddings"),
    ],
)
def test_a_missing_field_is_named(drop: str, named: str) -> None:
    raw = config("llama-3.1-8b.json")
    del raw[drop]
    with pytest.raises(InputError, match=named) as caught:
        from_hf_config(raw, "x", origin="my/config.json")
    assert caught.value.message.startswith("my/config.json: cannot derive")


def test_layers_the_planner_cannot_size_are_refused() -> None:
    raw = {**config("qwen3-8b.json"), "layer_types": ["linear_attention", "full_attention"] * 18}
    with pytest.raises(InputError, match="linear_attention"):
        from_hf_config(raw, "x")


def test_an_unknown_quantization_is_refused_by_name() -> None:
    raw = {**config("qwen3-8b.json"), "quantization_config": {"quant_method": "mystery"}}
    with pytest.raises(InputError, match="'mystery'"):
        from_hf_config(raw, "x")


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot be read"):
        load_config_file(tmp_path / "missing.json", "x")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        load_config_file(tmp_path, "x")  # a folder holding config.json


def test_model_config_keeps_the_catalog_name_and_gating() -> None:
    arch = resolve_model("llama-3.1-8b", CONFIGS / "llama-3.1-8b.json")
    assert arch.name == "meta-llama/Llama-3.1-8B-Instruct" and arch.gated is True
    assert arch.source.endswith("llama-3.1-8b.json")


# ---- the hub, at its boundary: huggingface_hub's lookup and download replaced by a test double


class FakeHub:
    """Test double of huggingface_hub's get_hf_file_metadata (one lookup, no retries) and
    hf_hub_download: serves fixture files, or raises `error` from the lookup."""

    def __init__(self, files: dict[str, Path] | None = None, error: Exception | None = None):
        self.files = files or {}
        self.error = error
        self.calls: list[tuple[str, str]] = []
        self.lookups: list[tuple[str, float | None]] = []

    def url(self, repo_id: str, filename: str, **_: Any) -> str:
        return f"hub://{repo_id}/{filename}"

    def metadata(self, url: str, timeout: float | None = None, **_: Any) -> None:
        self.lookups.append((url, timeout))
        if self.error:
            raise self.error

    def __call__(self, repo_id: str, filename: str, **_: Any) -> str:
        """The repository's file: `files[repo_id]` is its config.json (a file, or a checkpoint
        folder holding one); other files are read beside it, hf_hub_download's error if absent."""
        from huggingface_hub import errors

        self.calls.append((repo_id, filename))
        where = self.files[repo_id]
        config = where / "config.json" if where.is_dir() else where
        found = config if filename == "config.json" else config.parent / filename
        if not found.is_file():
            # huggingface_hub 1.x raises its RemoteEntryNotFoundError, earlier ones the parent
            missing: Any = getattr(errors, "RemoteEntryNotFoundError", errors.EntryNotFoundError)
            raise missing(f"{repo_id} has no {filename}", response=_404())
        return str(found)


def _404() -> Any:
    import httpx

    return httpx.Response(404, request=httpx.Request("GET", "https://hub.invalid/"))


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    import huggingface_hub

    double = FakeHub(
        {
            "acme/qwen-like": CONFIGS / "qwen3-8b.json",
            "acme/llama-fp8": CHECKPOINTS / "llama-3.1-70b-instruct-fp8",
        }
    )
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", double)
    monkeypatch.setattr(huggingface_hub, "hf_hub_url", double.url)
    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", double.metadata)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return double


def test_a_model_outside_the_catalog_is_read_from_the_hub(fake_hub: FakeHub) -> None:
    arch = resolve_model("acme/qwen-like")
    assert fake_hub.calls == [
        ("acme/qwen-like", "config.json"),
        ("acme/qwen-like", "hf_quant_config.json"),  # absent: the hub's 404, nothing declared
    ]
    assert arch.quantization == "" and arch.weight_dtype == "bf16"
    assert arch.name == "acme/qwen-like" and arch.layers == 36 and arch.gated is None
    assert "Hugging Face hub" in arch.source


def test_offline_forbids_the_hub(fake_hub: FakeHub) -> None:
    with pytest.raises(InputError, match="--offline forbids"):
        resolve_model("acme/qwen-like", offline=True)
    assert fake_hub.calls == []


def test_hf_hub_offline_forbids_the_hub(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EnvironmentProblem):
        resolve_model("acme/qwen-like")
    assert fake_hub.calls == []


def test_catalog_models_never_touch_the_hub(fake_hub: FakeHub) -> None:
    resolve_model("deepseek-v3")
    assert fake_hub.calls == []


class TransportError(Exception):
    """Named and placed like the hub client's connection errors (httpx2.TransportError)."""


TransportError.__module__ = "httpx2._exceptions"


def _hub_error(kind: str) -> Exception:
    from huggingface_hub import errors

    if kind == "unreachable":
        return errors.LocalEntryNotFoundError("cannot reach the hub and nothing is cached")
    if kind == "no-connection":
        return TransportError("[Errno -2] Name or service not known")
    import httpx

    response: Any = httpx.Response(  # the hub's client may be httpx2; the errors read the status
        403 if kind == "gated" else 404, request=httpx.Request("GET", "https://hub.invalid/")
    )
    cls = {"gated": errors.GatedRepoError, "missing": errors.RepositoryNotFoundError}[kind]
    return cls(kind, response=response)


@pytest.mark.parametrize(
    ("kind", "exit_code", "says"),
    [
        ("gated", 1, "is gated"),
        ("missing", 1, "no such model"),
        ("unreachable", 3, "cannot read"),
        ("no-connection", 3, "cannot read"),
    ],
)
def test_hub_failures_map_to_exit_codes(
    fake_hub: FakeHub, kind: str, exit_code: int, says: str
) -> None:
    """One lookup with a timeout and no retries decides (hf_hub_download would retry a failed
    lookup five times, 26 s); nothing is downloaded after it fails."""
    fake_hub.error = _hub_error(kind)
    with pytest.raises((InputError, EnvironmentProblem), match=says) as caught:
        resolve_model("acme/other")
    assert caught.value.exit_code == exit_code
    assert fake_hub.lookups == [("hub://acme/other/config.json", 10)]
    assert fake_hub.calls == []


def test_a_name_that_is_no_repository_id_is_refused_with_suggestions(fake_hub: FakeHub) -> None:
    with pytest.raises(InputError, match="not a Hugging Face repository id") as caught:
        resolve_model("llama3-70b")
    assert "did you mean" in (caught.value.hint or "")
    assert "meta-llama/Llama-3.1-70B-Instruct" in (caught.value.hint or "")
    assert fake_hub.lookups == [] and fake_hub.calls == []


def test_hub_errors_carry_the_catalogs_suggestions(fake_hub: FakeHub) -> None:
    fake_hub.error = _hub_error("missing")
    with pytest.raises(InputError) as caught:
        resolve_model("meta-llama/Llama-3-70B-Instruct")
    hint = caught.value.hint or ""
    assert hint.startswith("did you mean ") and "meta-llama/Llama-3.1-70B-Instruct" in hint


def test_without_huggingface_hub_the_hint_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(EnvironmentProblem) as caught:
        resolve_model("acme/other")
    assert "pip install '.[hub]'" in (caught.value.hint or "")


def test_a_modelopt_checkpoint_on_the_hub_reads_its_hf_quant_config(fake_hub: FakeHub) -> None:
    arch = resolve_model("acme/llama-fp8")
    assert (arch.weight_dtype, arch.auto_kv_dtype) == ("fp8", "fp8")
    assert "hf_quant_config.json (ModelOpt FP8, KV cache FP8)" in arch.quantization


# ---- quantization as checkpoints ship it (publishers' files, tests/fixtures/README.md)


def test_a_modelopt_folder_declares_fp8_weights_and_an_fp8_kv_cache() -> None:
    arch = load_config_file(MODELOPT_FP8, "x")
    assert json.loads((MODELOPT_FP8 / "config.json").read_text()).get("quantization_config") is None
    assert (arch.weight_dtype, arch.auto_kv_dtype) == ("fp8", "fp8")
    declared = f"{MODELOPT_FP8 / 'hf_quant_config.json'} (ModelOpt FP8, KV cache FP8)"
    assert arch.quantization == declared
    # the config.json file alone: its folder's hf_quant_config.json is read as well
    assert load_config_file(MODELOPT_FP8 / "config.json", "x").weight_dtype == "fp8"


def test_block_fp8_declares_fp8_weights_and_leaves_the_kv_cache_to_the_model() -> None:
    arch = load_config_file(CONFIGS / "qwen3-32b-fp8.json", "x")
    assert (arch.weight_dtype, arch.auto_kv_dtype) == ("fp8", None)
    assert arch.quantization == "config.json quantization_config (fp8, blocks [128, 128])"


def test_modelopt_declared_inside_config_json_is_read_without_a_quant_method() -> None:
    raw = config("qwen3-32b-fp8-static-pertensor.json")
    assert "quant_method" not in raw["quantization_config"]  # producer modelopt says it
    arch = from_hf_config(raw, "x")
    assert (arch.weight_dtype, arch.auto_kv_dtype) == ("fp8", "fp8")


def test_quant_method_modelopt_is_no_longer_refused() -> None:
    raw = {
        **config("qwen3-8b.json"),
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"},
    }
    assert from_hf_config(raw, "x").weight_dtype == "fp8"
    raw["quantization_config"]["quant_algo"] = "W4A8_MYSTERY"
    with pytest.raises(InputError, match="quant_algo 'W4A8_MYSTERY'"):
        from_hf_config(raw, "x")


def test_weight_dtype_is_stated_where_nothing_declares_it() -> None:
    arch = load_config_file(CONFIGS / "llama-3.1-8b.json", "x", weight_dtype="fp8")
    assert (arch.weight_dtype, arch.quantization) == ("fp8", "--weight-dtype fp8")
    assert resolve_model("llama-3.1-8b", weight_dtype="fp8").weight_dtype == "fp8"
    with pytest.raises(InputError, match="contradicts"):
        load_config_file(MODELOPT_FP8, "x", weight_dtype="bf16")
    with pytest.raises(InputError, match="contradicts"):
        resolve_model("llama-3.1-70b-fp8", weight_dtype="bf16")


def test_the_catalog_entry_of_the_modelopt_checkpoint_agrees_with_its_files() -> None:
    catalog_arch = resolve_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    files_arch = load_config_file(MODELOPT_FP8, catalog_arch.name)
    for field in ("layers", "hidden_size", "kv_heads", "head_dim", "weight_dtype", "auto_kv_dtype"):
        assert getattr(catalog_arch, field) == getattr(files_arch, field), field
