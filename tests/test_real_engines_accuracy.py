"""The planner's accuracy run (benchmarks/real_engines/accuracy.py) and the catalog entries made
from its kept records (accuracy_catalog.py): what the catalog holds is what the records say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.real_engines import accuracy, accuracy_catalog, model_dir
from pdctl.models import quantization
from pdctl.plan import measurements

ROOT = Path(__file__).resolve().parent.parent
RECORDS = sorted((ROOT / "benchmarks/records").glob("real-engines-h200-accuracy-*.json"))
CATALOG = yaml.safe_load(measurements.MEASUREMENTS_FILE.read_text())["measurements"]


def test_the_decode_step_is_the_window_over_the_steps_each_request_took() -> None:
    # 64 requests, 16,000 gaps inside a 1.5 s window: 250 steps each, 6 ms a step
    assert accuracy.mean_step_ms(1.5, 64, 16_000) == 6.0
    assert accuracy.mean_step_ms(1.5, 64, 0) is None


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_every_figure_of_a_kept_record_is_in_the_catalog_as_generated(record: Path) -> None:
    data = json.loads(record.read_text())
    generated = accuracy_catalog.entries(data, str(record.relative_to(ROOT)))
    assert len(generated) >= 10
    for key, entry in generated.items():
        kept = dict(CATALOG[key])
        kept.pop("miss", None)  # written by hand after the fit
        assert kept == entry, key


def test_fit_and_held_out_models_are_fixed_in_the_script_and_the_records() -> None:
    for record in RECORDS:
        data = json.loads(record.read_text())
        wave = {m.name: m.use for m in accuracy.WAVES[data["wave"]]}
        assert {name: m["use"] for name, m in data["models"].items()} == wave
        # The FP8 waves are fitted only: their held-out models are measured elsewhere.
        fp8 = data["wave"].startswith("fp8")
        assert set(wave.values()) == ({"fit"} if fp8 else {"fit", "check"})


# Held out of the FP8 fits (issue "Planner 3b"): measured elsewhere, never run or fitted here.
FP8_HELD_OUT = ("qwen3-32b-fp8", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-8b")


FP8_MODELS = [
    m for wave, models in accuracy.WAVES.items() if wave.startswith("fp8") for m in models
]


@pytest.mark.parametrize("model", FP8_MODELS, ids=lambda m: m.name)
def test_the_fp8_wave_serves_what_the_planner_reads_as_fp8(
    model: accuracy.Model, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    data = accuracy.config(model)
    (source / "config.json").write_text(json.dumps(data))
    if model.quant_file:
        (source / quantization.QUANT_FILE).write_bytes(model.quant_file.read_bytes())
    folder = model_dir.make(source / "config.json", tmp_path / "model")
    quant_file = folder / quantization.QUANT_FILE
    read = quantization.read(
        json.loads((folder / "config.json").read_text()),
        json.loads(quant_file.read_text()) if quant_file.is_file() else None,
        str(folder),
    )
    argv = accuracy.engine(model, 0, folder).argv
    kv_fp8 = "--kv-cache-dtype" in argv and argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    assert (read is not None and read.weight_dtype == "fp8") or kv_fp8
    assert model.use == "fit" and (model.base or model.name) not in FP8_HELD_OUT
    if model.layers:
        assert data["num_hidden_layers"] == model.layers


def test_the_fp8_wave_covers_both_kernel_families_an_moe_and_an_fp8_kv_cache() -> None:
    wave = accuracy.WAVES["fp8"]
    assert any(m.quant_file == accuracy.MODELOPT_FP8 for m in wave)  # per-tensor: CUTLASS
    blocks = [m for m in wave if m.quantization and m.quantization.get("weight_block_size")]
    assert {accuracy.config(m).get("num_experts") is not None for m in blocks} == {True, False}
    assert any(m.args[-2:] == ("--kv-cache-dtype", "fp8") for m in wave)


def test_an_fp8_kv_cache_as_nvidia_ships_it_holds_the_tokens_vllm_logged(tmp_path: Path) -> None:
    """benchmarks/records/fp8-h200-modelopt-start.json: Llama-3.1-8B with ModelOpt's
    hf_quant_config.json, --kv-cache-dtype auto, 10 GiB of KV: vLLM 0.26 logged 163,840 tokens
    (FP8, 64 KiB a token). pdctl reads the checkpoint folder as vLLM does and counts the same."""
    from pdctl.models import config as model_config
    from pdctl.models import memory

    record = json.loads((ROOT / "benchmarks/records/fp8-h200-modelopt-start.json").read_text())
    (model,) = record["models"].values()
    (wave_model,) = [m for m in accuracy.WAVES["fp8"] if m.name in record["models"]]
    (tmp_path / "config.json").write_text(json.dumps(accuracy.config(wave_model)))
    (tmp_path / quantization.QUANT_FILE).write_bytes(accuracy.MODELOPT_FP8.read_bytes())
    arch = model_config.load_config_file(tmp_path / "config.json", wave_model.name)
    assert arch.auto_kv_dtype == "fp8"
    budget = 8192  # vLLM's default --max-num-batched-tokens on an H200
    layout = memory.kv_layout(arch, tp=1, kv_cache_dtype=arch.auto_kv_dtype, budget=budget)
    tokens = layout.tokens(model["kv_cache_bytes"], record["max_model_len"])
    assert tokens == model["kv_tokens"] == 163_840
