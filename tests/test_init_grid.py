"""Over a grid of (model, GPU count, GPU type) requests, dense, MoE, MLA and sliding-window models
alike, every `pdctl init` output passes `pdctl validate`, renders with the real helm, and every
object passes strict Kubernetes schemas; the rendered pods carry the plan's numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import manifests, naming
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import assert_kube_valid, container, env_of, render_file

runner = CliRunner()

GRID = [  # (model, GPUs, GPU type, extra options)
    ("meta-llama/Llama-3.1-8B-Instruct", 2, "H100-80GB", []),
    ("meta-llama/Llama-3.1-70B-Instruct", 8, "H100-80GB", []),
    ("meta-llama/Llama-3.1-405B-Instruct", 16, "H200", []),
    ("meta-llama/Llama-3.2-1B-Instruct", 4, "A10G", []),
    ("Qwen/Qwen2.5-7B-Instruct", 2, "L4", ["--kv-cache-dtype", "fp8"]),
    ("Qwen/Qwen2.5-72B-Instruct", 8, "A100-80GB", ["--input-len", "8192", "--output-len", "256"]),
    ("Qwen/Qwen3-32B", 4, "L40S", ["--max-model-len", "16384"]),
    ("Qwen/Qwen3-30B-A3B", 4, "H100-80GB-PCIE", []),  # MoE
    ("Qwen/Qwen3-235B-A22B", 8, "B200", []),  # MoE
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 6, "A100-80GB", []),  # MoE
    ("mistralai/Mistral-7B-v0.1", 2, "MI300X", []),  # sliding window, AMD resource
    ("deepseek-ai/DeepSeek-V3", 16, "H200", []),  # MLA + MoE, FP8
    ("deepseek-ai/DeepSeek-R1", 8, "MI300X", []),  # MLA + MoE
    ("openai/gpt-oss-120b", 8, "H100-80GB", ["--connector", "MooncakeConnector"]),  # MoE, window
    ("openai/gpt-oss-20b", 3, "L40S", ["--node-selector", "nvidia.com/gpu.product=NVIDIA-L40S"]),
]


@pytest.mark.parametrize(
    ("model", "gpus", "gpu", "extra"),
    GRID,
    ids=[f"{m.split('/')[1]}-{n}x{g}" for m, n, g, _ in GRID],
)
def test_init_output_validates_renders_and_passes_kubernetes_schemas(
    tmp_path: Path, helm4: Helm, model: str, gpus: int, gpu: str, extra: list[str]
) -> None:
    out = tmp_path / "values.yaml"
    made = runner.invoke(
        app,
        [
            "init",
            "-m",
            model,
            "--gpus",
            str(gpus),
            "--gpu-type",
            gpu,
            "--offline",
            "--out",
            str(out),
            "-o",
            "json",
            "--mode",
            "pd",
            *extra,
        ],
    )  # fmt: skip  (the PD file, role by role against the plan; the choice: the test below)
    assert made.exit_code == 0, made.output
    plan = json.loads(made.stdout)["plan"]

    checked = runner.invoke(app, ["validate", str(out), "-o", "json"])
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.stdout)
    assert report["valid"] and not [
        f for f in report["files"][0]["findings"] if f["severity"] == "error"
    ]

    objects = render_file(helm4, out)
    assert_kube_valid(objects, "1.35.0")
    release = naming.Release("pd")
    pools = {spec["role"]: spec for spec in _pools(out)}
    for role in ("prefill", "decode"):
        planned = plan["roles"][role]
        spec = pools[role]
        deployment = manifests.find(objects, "Deployment", release.pool_deployment(spec["name"]))
        assert deployment["spec"]["replicas"] == planned["replicas"]
        engine = container(objects, release.pool_deployment(spec["name"]))
        args = engine["args"]
        assert args[args.index("--tensor-parallel-size") + 1] == str(planned["tp"])
        assert args[args.index("--max-model-len") + 1] == str(plan["max_model_len"])
        gpu_resource = plan["gpu"]["resource"]
        assert engine["resources"]["limits"][gpu_resource] == str(planned["tp"])
        assert engine["resources"]["requests"]["memory"] == f"{planned['pod']['memory_gib']}Gi"
        claim = manifests.find(objects, "PersistentVolumeClaim", release.pool_claim(spec["name"]))
        assert (
            claim["spec"]["resources"]["requests"]["storage"] == f"{planned['pod']['cache_gib']}Gi"
        )
        token = env_of(engine).get("HF_TOKEN_PATH")  # a file of the Secret's key
        pod = manifests.find(objects, "Deployment", release.pool_deployment(spec["name"]))
        volumes = {v["name"]: v for v in pod["spec"]["template"]["spec"]["volumes"]}
        if plan["model"]["gated"]:
            assert token == "/var/run/secrets/huggingface/token"
            secret = volumes["hf-token"]["secret"]
            assert (secret["secretName"], secret["items"]) == (
                "hf-token",
                [{"key": "token", "path": "token"}],
            )
        else:
            assert token is None and "hf-token" not in volumes
    assert plan["gpus_used"] <= gpus


@pytest.mark.parametrize(
    ("model", "gpus", "gpu", "extra"),
    GRID,
    ids=[f"{m.split('/')[1]}-{n}x{g}" for m, n, g, _ in GRID],
)
def test_init_writes_the_choice_and_it_renders(
    tmp_path: Path, helm4: Helm, model: str, gpus: int, gpu: str, extra: list[str]
) -> None:
    """--mode auto (the default) writes the layout plan chooses, PD or aggregated."""
    out = tmp_path / "values.yaml"
    made = runner.invoke(
        app,
        ["init", "-m", model, "--gpus", str(gpus), "--gpu-type", gpu, "--offline",
         "--out", str(out), "-o", "json", *extra],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    choice = json.loads(made.stdout)["plan"]["choice"]
    checked = runner.invoke(app, ["validate", str(out), "-o", "json"])
    assert checked.exit_code == 0, checked.output
    assert_kube_valid(render_file(helm4, out), "1.35.0")
    pools = {spec["role"]: spec for spec in _pools(out)}
    wanted = {"both": "engine"} if choice["mode"] == "aggregated" else {r: r for r in pools}
    assert set(pools) == set(wanted) and (choice["mode"] == "aggregated") == ("both" in pools)
    for role, key in wanted.items():
        planned, spec = choice["roles"][key], pools[role]
        assert spec["replicaCount"] == planned["replicas"]
        assert spec["vllmConfig"]["tensorParallelSize"] == planned["tp"]


def _pools(path: Path) -> list[dict[str, Any]]:
    import yaml

    data = yaml.safe_load(path.read_text())
    pools: list[dict[str, Any]] = data["servingEngineSpec"]["modelSpec"]
    return pools
