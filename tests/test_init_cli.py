"""pdctl init: what the values file says and how it is written (overwrite, stdout, JSON), and the
refusal of generated values that fail the pipeline's checks."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import connectors
from pdctl.cli.app import app
from pdctl.plan import emit

runner = CliRunner()
LLAMA = [
    "init",
    "-m",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpus",
    "2",
    "--offline",
    "--mode",
    "pd",
]


def init(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, [*args])
    return result.exit_code, result.stdout, result.stderr


def test_writes_a_commented_values_file_without_a_schema_modeline(tmp_path: Path) -> None:
    """No yaml-language-server modeline: the schema has no stable published URL, and a path into
    wherever pdctl is installed would not hold for anyone else reading the file."""
    out = tmp_path / "llama.yaml"
    code, _, stderr = init(*LLAMA, "--out", str(out))
    assert code == 0, stderr
    text = out.read_text()
    assert text.startswith("# pd-stack values for") and "yaml-language-server" not in text
    for why in (
        "KV pool of",  # the memory arithmetic per pool
        "max_position_embeddings 131072",  # why maxModelLen
        "pass through host memory",  # why requestMemory
        "checkpoint (15.0 GiB) x 1.1",  # why pvcStorage
        "roofline estimate, not measured",
        "Layout (--mode pd) at --concurrency 64 in flight",
        "PD, 1 x TP1 prefill + 1 x TP1 decode",
    ):
        assert why in text, why
    assert "Rules of thumb" not in text  # 8:1 says PD "may" help: not a verdict beside the choice
    assert all(
        len(line) <= 100 or "kubectl" in line or "pdctl " in line for line in text.splitlines()
    )
    assert f"wrote {out}" in stderr


def test_gated_model_gets_a_secret_reference_never_a_token(tmp_path: Path) -> None:
    out = tmp_path / "v.yaml"
    assert init(*LLAMA, "--out", str(out), "--hf-token-secret", "hf", "-n", "llm")[0] == 0
    text = out.read_text()
    pools = yaml.safe_load(text)["servingEngineSpec"]["modelSpec"]
    assert all(p["hf_token"] == {"secretName": "hf", "secretKey": "token"} for p in pools)
    assert "kubectl create secret generic hf --from-literal=token=<your token> -n llm" in text


def test_open_model_has_no_token(tmp_path: Path) -> None:
    out = tmp_path / "v.yaml"
    assert init("init", "-m", "qwen3-8b", "--gpus", "2", "--offline", "--out", str(out))[0] == 0
    pools = yaml.safe_load(out.read_text())["servingEngineSpec"]["modelSpec"]
    assert all("hf_token" not in p for p in pools)


def test_values_carry_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "v.yaml"
    code, stdout, _ = init(
        "init", "-m", "llama-3.1-70b", "--gpus", "12", "--offline", "--out", str(out), "-o", "json",
        "--node-selector", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
    )  # fmt: skip
    assert code == 0
    plan = json.loads(stdout)["plan"]
    values = yaml.safe_load(out.read_text())
    pools = {p["role"]: p for p in values["servingEngineSpec"]["modelSpec"]}
    for role in ("prefill", "decode"):
        spec, planned = pools[role], plan["roles"][role]
        assert spec["vllmConfig"]["tensorParallelSize"] == spec["requestGPU"] == planned["tp"]
        assert spec["replicaCount"] == planned["replicas"]
        assert spec["kvTransfer"] == {"connector": "NixlConnector"}
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert spec["tag"] == emit.ENGINE_TAG and spec["repository"] == "vllm/vllm-openai"
        if planned["replicas"] > 1:  # pods of one pool share the cache claim
            assert spec["pvcAccessMode"] == ["ReadWriteMany"]
    router = values["routerSpec"]
    assert router["type"] == "vllm-router"
    image = connectors.load().router_images["vllm-router"]
    assert (router["repository"], router["tag"]) == (image["repository"], image["tag"])
    assert router["vllmRouter"] == {"serviceDiscovery": "k8s", "kvConnector": "nixl"}


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "v.yaml"
    out.write_text("mine\n")
    code, _, stderr = init(*LLAMA, "--out", str(out))
    assert code == 1 and "exists" in stderr and "--force" in stderr
    assert out.read_text() == "mine\n"
    assert init(*LLAMA, "--out", str(out), "--force")[0] == 0
    assert out.read_text().startswith("# pd-stack values")


def test_out_dash_writes_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = init(*LLAMA, "--out", "-")
    assert code == 0 and list(tmp_path.iterdir()) == []
    assert yaml.safe_load(stdout)["routerSpec"]["type"] == "vllm-router"


def test_default_file_name_comes_from_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert init(*LLAMA)[0] == 0
    assert (tmp_path / "llama-3-1-8b-instruct-values.yaml").is_file()


def test_pool_names_fit_kubernetes_with_a_long_release(tmp_path: Path) -> None:
    out = tmp_path / "v.yaml"
    release = "a-very-long-release-name-for-a-test"
    assert init(*LLAMA, "--out", str(out), "--release", release)[0] == 0
    names = [p["name"] for p in yaml.safe_load(out.read_text())["servingEngineSpec"]["modelSpec"]]
    assert all(len(f"{release}-{n}-deployment-vllm") <= 63 for n in names)
    assert names[0].endswith("-prefill") and names[1].endswith("-decode")


def test_production_stack_router_is_refused_with_the_tables_reason() -> None:
    code, _, stderr = init(*LLAMA, "--router", "production-stack", "--out", "-")
    assert code == 1
    assert "production-stack cannot route" in stderr and "NIXL connector" in stderr
    assert "kv_transfer_params" in stderr  # the connector table's notRoutedBy reason


def test_generated_values_that_fail_validation_are_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emit, "ENGINE_TAG", "not a tag!")  # a bug in what init writes
    out = tmp_path / "v.yaml"
    code, _, stderr = init(*LLAMA, "--out", str(out))
    assert code == 1
    assert "internal error" in stderr and "SCHEMA" in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_init_and_plan_take_every_plan_argument() -> None:
    """Both commands build their plan from their parameters by name (PlanArgs.from_parameters)."""
    from pdctl.cli._plan_options import PlanArgs
    from pdctl.cli.init import init as init_command
    from pdctl.cli.plan import plan as plan_command

    wanted = {field.name for field in dataclasses.fields(PlanArgs)}
    for command in (init_command, plan_command):
        assert wanted <= set(inspect.signature(command).parameters), command.__name__


def test_init_plans_what_plan_plans_for_the_same_options() -> None:
    """A value other than the default for each option the two share reaches init's plan as it
    reaches plan's."""
    shared = [
        *("-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "4", "--offline"),
        *("--gpu-type", "H200", "--gpus-per-node", "4", "--input-len", "3000"),
        *("--output-len", "300", "--concurrency", "8", "--rate", "2", "--ttft", "3000"),
        *("--itl", "100", "--max-model-len", "8192", "--kv-cache-dtype", "fp8"),
        *("--gpu-memory-utilization", "0.85", "--weight-dtype", "bf16", "--network-gbps", "40"),
        *("--connector", "MooncakeConnector", "--mode", "pd"),
    ]
    planned = runner.invoke(app, ["plan", *shared, "-o", "json"])
    assert planned.exit_code == 0, planned.output
    code, stdout, stderr = init("init", *shared, "--out", "-", "-o", "json")
    assert code == 0, stderr
    assert json.loads(stdout)["plan"] == json.loads(planned.stdout)
