"""The planner's catalogs: valid against their schemas, every figure sourced, the model entries
agreeing with real config.json files and with the parameter counts the reference publishes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from pdctl.errors import InputError, UsageError
from pdctl.models import catalog, memory
from pdctl.models.config import from_hf_config
from pdctl.plan import resolve_model
from tests.helpers import ROOT

CONFIGS = ROOT / "tests" / "fixtures" / "configs"
# fixture file -> the catalog entry with the same architecture (Instruct variants share it)
TWINS = {
    "llama-3.1-8b.json": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b.json": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.2-3b.json": "meta-llama/Llama-3.2-3B-Instruct",
    "qwen3-8b.json": "Qwen/Qwen3-8B",
    "qwen3-30b-a3b.json": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b.json": "Qwen/Qwen3-235B-A22B",
    "mistral-7b-v0.1.json": "mistralai/Mistral-7B-v0.1",
    "mixtral-8x7b.json": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "deepseek-v3.json": "deepseek-ai/DeepSeek-V3",
    "gpt-oss-20b.json": "openai/gpt-oss-20b",
    "gpt-oss-120b.json": "openai/gpt-oss-120b",
}
ISSUE_GPUS = ["A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100-80GB", "H100-80GB-PCIE",
              "H200", "B200", "MI300X"]  # fmt: skip
ISSUE_MODELS = [
    "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b",
    "qwen2.5-7b", "qwen2.5-32b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b",
    "qwen3-235b-a22b", "mistral-7b", "mixtral-8x7b", "deepseek-v3", "deepseek-r1",
    "gpt-oss-20b", "gpt-oss-120b",
]  # fmt: skip


def _schema(name: str) -> dict[str, object]:
    return yaml.safe_load((ROOT / "schemas" / name).read_text())


@pytest.mark.parametrize(
    ("data", "schema"),
    [(catalog.GPUS_FILE, "gpus.schema.yaml"), (catalog.MODELS_FILE, "models.schema.yaml")],
    ids=["gpus", "models"],
)
def test_catalog_matches_its_schema(data: Path, schema: str) -> None:
    jsonschema.Draft7Validator.check_schema(_schema(schema))
    jsonschema.validate(yaml.safe_load(data.read_text()), _schema(schema))


def test_the_schemas_refuse_a_figure_without_a_source() -> None:
    gpus = yaml.safe_load(catalog.GPUS_FILE.read_text())
    del gpus["gpus"]["L4"]["sources"]["hbmTBps"]
    with pytest.raises(jsonschema.ValidationError, match="hbmTBps"):
        jsonschema.validate(gpus, _schema("gpus.schema.yaml"))
    models = yaml.safe_load(catalog.MODELS_FILE.read_text())
    models["models"]["Qwen/Qwen3-8B"]["layerz"] = 36
    with pytest.raises(jsonschema.ValidationError, match="layerz"):
        jsonschema.validate(models, _schema("models.schema.yaml"))


def test_the_catalogs_cover_what_the_issue_names() -> None:
    assert [catalog.gpu(name).name for name in ISSUE_GPUS] == ISSUE_GPUS
    for alias in ISSUE_MODELS:
        assert catalog.find_model(alias) is not None, alias


@pytest.mark.parametrize(
    ("typed", "name"),
    [("h100", "H100-80GB"), ("H100_80gb", "H100-80GB"), ("h100-pcie", "H100-80GB-PCIE"),
     ("a100", "A100-80GB"), ("Mi300x", "MI300X"), ("l40s", "L40S")],
)  # fmt: skip
def test_gpu_names_ignore_case_and_take_aliases(typed: str, name: str) -> None:
    assert catalog.gpu(typed).name == name


def test_an_unknown_gpu_is_a_usage_error_with_close_matches() -> None:
    with pytest.raises(UsageError) as caught:
        catalog.gpu("H100-94GB")
    assert caught.value.exit_code == 2
    assert "H100-80GB" in (caught.value.hint or "")


def test_an_unknown_model_names_close_catalog_entries() -> None:
    with pytest.raises(InputError) as caught:
        resolve_model("meta-llama/Llama-3.1-8B-Instruc", offline=True)
    assert "meta-llama/Llama-3.1-8B-Instruct" in (caught.value.hint or "")


def test_aliases_are_unambiguous() -> None:
    for table in (catalog.gpus(), catalog.models()):
        seen: dict[str, str] = {}
        for name, entry in table.items():
            for alias in (name, *entry.aliases):
                key = catalog._key(alias)
                assert seen.setdefault(key, name) == name, f"{alias} names {seen[key]} and {name}"


@pytest.mark.parametrize("fixture", sorted(TWINS))
def test_catalog_entries_agree_with_real_config_files(fixture: str) -> None:
    entry = catalog.models()[TWINS[fixture]].arch
    derived = from_hf_config(json.loads((CONFIGS / fixture).read_text()), entry.name)
    fields = ("layers", "hidden_size", "intermediate_size", "heads", "kv_heads", "head_dim",
              "vocab_size", "tied_embeddings", "weight_dtype", "mla", "moe", "sliding_window",
              "extra_layers", "model_type", "architecture")  # fmt: skip
    for name in fields:
        assert getattr(derived, name) == getattr(entry, name), name


@pytest.mark.parametrize("name", sorted(catalog.models()))
def test_computed_parameters_match_the_published_counts(name: str) -> None:
    entry = catalog.models()[name]
    counted = memory.params(entry.arch)
    assert counted.total / 1e9 == pytest.approx(entry.params_billion, rel=0.015)
    if entry.active_params_billion:
        assert counted.active / 1e9 == pytest.approx(entry.active_params_billion, rel=0.02)
    else:
        assert counted.active == counted.total


def test_gated_repositories() -> None:
    assert catalog.find_model("llama-3.1-8b").arch.gated is True  # type: ignore[union-attr]
    assert catalog.find_model("mixtral-8x7b").arch.gated is True  # type: ignore[union-attr]
    assert catalog.find_model("qwen3-8b").arch.gated is False  # type: ignore[union-attr]


def test_a_suffix_the_catalog_leaves_out_suggests_the_stem_first() -> None:
    """`Qwen3-32B-Instrcut` (a typo of a suffix the catalog's Qwen3 ids lack) is Qwen3-32B, not
    the Qwen2.5 models whose ids end in -Instruct."""
    assert catalog.model_suggestions("Qwen3-32B-Instrcut")[0] == "Qwen/Qwen3-32B"
    assert catalog.model_suggestions("meta-llama/Llama-3.1-8B-Instruc")[0] == (
        "meta-llama/Llama-3.1-8B-Instruct"
    )
