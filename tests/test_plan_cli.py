"""pdctl plan through CliRunner and as a subprocess: the JSON contract, the acceptance figures,
exit codes, --model-config on real config.json files of each family, start-up imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from tests.helpers import ROOT

CONFIGS = ROOT / "tests" / "fixtures" / "configs"
runner = CliRunner()


def plan_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["plan", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(
    ("model", "gpus", "gpu", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "2", "H100-80GB", 131072),
        ("meta-llama/Llama-3.1-70B-Instruct", "8", "H100-80GB", 327680),
        ("Qwen/Qwen2.5-7B-Instruct", "2", "L40S", 57344),
        ("deepseek-ai/DeepSeek-V3", "16", "H200", 70272),
    ],
)
def test_kv_bytes_per_token_in_plan_json(model: str, gpus: str, gpu: str, expected: int) -> None:
    data = plan_json("--model", model, "--gpus", gpus, "--gpu-type", gpu, "--offline")
    assert data["kv_bytes_per_token"] == expected


def test_plan_json_has_the_documented_fields() -> None:
    data = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "h100", "--offline")
    assert data["schema_version"] == 2
    assert data["choice"]["mode"] in ("pd", "aggregated") and "verdict" not in data
    for role in ("prefill", "decode"):
        assert {
            "tp",
            "replicas",
            "gpus",
            "weights_gib_per_gpu",
            "kv_tokens_per_gpu",
            "max_seqs_at_max_model_len",
            "pod",
        } <= set(data["roles"][role])
    estimates = data["estimates"]
    assert any("prefill_tokens_per_s" in key for key in estimates)
    assert any("decode_step_ms" in key for key in estimates)
    assert data["rules_of_thumb"]["pd"] in ("likely", "may", "unlikely")
    assert data["gpu"]["name"] == "H100-80GB"


def test_llama_8b_kv_pool_at_095_is_within_5_percent_of_vllm() -> None:
    """llm-d-planner 0.3.3's accuracy report: vLLM measured 58.11 GiB, 476,016 tokens
    (Llama-3.1-8B, TP 1, H100, 0.95)."""
    data = plan_json(
        "-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "H100-80GB",
        "--gpu-memory-utilization", "0.95",
    )  # fmt: skip
    decode = data["roles"]["decode"]
    assert decode["tp"] == 1
    assert decode["kv_pool_gib_per_gpu"] == pytest.approx(58.11, rel=0.05)
    assert decode["kv_tokens_per_gpu"] == pytest.approx(476_016, rel=0.05)


def test_decode_step_follows_concurrency_and_prefill_follows_input_len() -> None:
    short = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--input-len", "1024")
    long = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--input-len", "8192")
    assert long["estimates"]["prefill_ms"] > 4 * short["estimates"]["prefill_ms"]
    few = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--concurrency", "4")
    many = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--concurrency", "128")
    assert many["estimates"]["decode_step_ms"] > few["estimates"]["decode_step_ms"]


def test_plan_text_for_people() -> None:
    result = runner.invoke(app, ["plan", "-m", "llama-3.1-70b", "--gpus", "8"])
    assert result.exit_code == 0, result.output
    for text in ("PD layout", "on 8 x H100-80GB", "KV pool per GPU", "prefill:", "TTFT", "PD "):
        assert text in result.stdout


@pytest.mark.parametrize(
    "fixture",
    sorted(path.name for path in CONFIGS.glob("*.json")),
)
def test_model_config_on_real_config_files(fixture: str) -> None:
    """Every family's real config.json plans (on B200s, where even DeepSeek fits a node)."""
    data = plan_json(
        "-m", f"example/{fixture.removesuffix('.json')}", "--gpus", "16", "--gpu-type", "B200",
        "--model-config", str(CONFIGS / fixture), "--offline",
    )  # fmt: skip
    assert data["model"]["source"].endswith(fixture)
    assert data["kv_bytes_per_token"] > 0 and data["gpus_used"] <= 16


def test_70b_on_one_l4_exits_1_with_the_reason_and_no_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pdctl", "plan", "-m", "meta-llama/Llama-3.1-70B-Instruct",
         "--gpus", "1", "--gpu-type", "L4"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "needs TP16 per engine on L4" in result.stderr
    assert "more GPUs per engine than a node has" in result.stderr
    assert "KV pool" in result.stderr  # the numbers that do not fit


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--gpu-type", "H100-94GB"], 2, "not in the GPU catalog"),
        (["--gpus", "0"], 2, ""),
        (["--connector", "Nope"], 2, "not a connector"),
        (["--connector", "P2pNcclConnector"], 1, "not in vLLM 0.33.0"),
        (["--connector", "LMCacheConnectorV1"], 1, "vllm-router cannot route"),
        (["-m", "acme/unknown", "--offline"], 1, "--offline forbids"),
        (["--max-model-len", "1000"], 1, "shorter than --input-len"),
    ],
)
def test_bad_requests(args: list[str], code: int, says: str) -> None:
    base = ["plan", "-m", "llama-3.1-8b", "--gpus", "2"]
    result = runner.invoke(app, [*base, *args])
    assert result.exit_code == code, result.output
    assert says in result.output


def test_help_imports_neither_jinja2_nor_huggingface_hub() -> None:
    code = (
        "import sys; from pdctl.cli.app import app; "
        "print(sorted(m for m in ('jinja2', 'huggingface_hub', 'pdctl.plan') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_refusal_under_json_is_json_on_stdout_with_what_would_fit() -> None:
    args = ["plan", "-m", "llama-3.1-70b", "--gpus", "4", "--gpu-type", "A100-40GB", "-o", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    refusal = json.loads(result.stdout)
    assert refusal["fits"] is False and "cannot hold a PD layout" in refusal["error"]
    assert refusal["needs_gpus"] == 16
    # Only GPU types whose smallest PD layout fits the 4 GPUs asked for.
    assert refusal["fits_on"] and all(w["gpus"] <= 4 for w in refusal["fits_on"])
    assert {"gpu": "A100-80GB", "prefill_tp": 2, "decode_tp": 2, "gpus": 4} in refusal["fits_on"]


def test_one_gpu_gets_the_aggregated_answer_and_the_smallest_pd_layout() -> None:
    """--gpus 1 no longer refuses: one aggregated engine serves on the GPU given, and the smallest
    PD layout (2 GPUs) is shown beside it as the alternative."""
    result = runner.invoke(app, ["plan", "-m", "llama-3.1-8b", "--gpus", "1"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "Smallest PD layout: 2 x H100-80GB (more than the 1 given)" in text
    assert "Aggregated on the 1 GPU given" in text
    assert "Choice (--mode auto) at --concurrency 64 in flight" in text
    assert "): aggregated, 1 x TP1 engine = 1 of 1 x H100-80GB" in text
    assert (
        "Why aggregated: - targets in force: TTFT 2000 ms (default); ITL 200 ms (default)" in text
    )
    assert "- PD needs 2 GPUs and 1 are given" in text
    plan = plan_json("-m", "llama-3.1-8b", "--gpus", "1")
    assert plan["pd_within_gpus"] is False and plan["gpus_used"] == 2
    assert plan["request"]["gpus"] == 1
    agg = plan["aggregated"]
    assert (agg["tp"], agg["replicas"], agg["gpus"]) == (1, 1, 1)
    assert agg["output_tokens_per_s_per_gpu"] > 0 and agg["ttft_ms"] > 0
    assert plan["choice"]["mode"] == "aggregated"
    assert any("PD needs 2 GPUs" in w for w in plan["pd_layout_warnings"])
    assert not any("PD needs" in w for w in plan["warnings"])  # the aggregated choice's
    assert not any("unused" in w for w in plan["warnings"] + plan["pd_layout_warnings"])
    # a GPU that does not hold one engine is still refused, with the count PD needs
    refused = runner.invoke(app, ["plan", "-m", "llama-3.1-70b", "--gpus", "1"])
    assert refused.exit_code == 1 and "give --gpus 4" in " ".join(refused.stderr.split())


def test_a_decode_engine_that_holds_fewer_than_the_concurrency_says_one_number() -> None:
    """On 2 x L4 one decode engine holds 4 requests of 4608 tokens: the step is estimated at
    those 4, the table and the text agree, and the warning says the same."""
    plan = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "L4")
    held = plan["roles"]["decode"]["max_seqs_at_workload"]
    assert plan["estimates"]["decode_step_sequences"] == held < 64
    said = plan["warnings"] + plan["pd_layout_warnings"]  # the choice's, or the PD layout's
    assert any(f"holds {held} sequences" in w and "estimated at" in w for w in said)


def test_a_may_verdict_says_which_reason_speaks_for_pd_and_which_against() -> None:
    plan = plan_json("-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "L4")
    verdict = plan["rules_of_thumb"]
    assert verdict["pd"] == "may"
    assert any(r.startswith("against PD: input:output is 8.0:1, below") for r in verdict["reasons"])
    assert any(r.startswith("for PD: each prefill") for r in verdict["reasons"])


def test_init_refuses_in_json_as_plan_does(tmp_path: Path) -> None:
    out = tmp_path / "values.yaml"
    args = [
        "init",
        "-m",
        "llama-3.1-8b",
        "--gpus",
        "1",
        "--offline",
        "--out",
        str(out),
        "-o",
        "json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and not out.exists()
    assert json.loads(result.stdout)["needs_gpus"] == 2


def test_a_modelopt_fp8_folder_plans_fp8_weights_and_kv_on_one_h200() -> None:
    """nvidia/Llama-3.1-70B-Instruct-FP8 as shipped (config.json + hf_quant_config.json): vLLM
    serves it on one H200 with FP8 weights and (--kv-cache-dtype auto) an FP8 KV cache."""
    folder = "tests/fixtures/checkpoints/llama-3.1-70b-instruct-fp8"
    args = ["-m", "nvidia/Llama-3.1-70B-Instruct-FP8", "--model-config", folder, "--gpus", "1"]
    data = plan_json(*args, "--gpu-type", "H200")
    assert data["model"]["weight_dtype"] == "fp8" and data["request"]["kv_cache_dtype"] == "fp8"
    declared = "hf_quant_config.json (ModelOpt FP8, KV cache FP8)"
    assert data["model"]["quantization"].endswith(declared)
    assert data["choice"]["mode"] == "aggregated" and data["choice"]["gpus"] == 1
    assert data["roles"]["decode"]["kv_tokens_per_gpu"] == pytest.approx(364_000, rel=0.05)
    text = runner.invoke(app, ["plan", *args, "--gpu-type", "H200"]).output
    assert "what vLLM's --kv-cache-dtype auto picks for this checkpoint" in text
    assert "hf_quant_config.json (ModelOpt FP8, KV cache FP8)" in text
