"""The real-engine harness's planning (benchmarks/real_engines/local.py) on a real render: what
runs on the GPU machine is the rendered commands with only the host-level changes. The GPU run
itself (benchmarks/real_engines/run.py) needs a GPU and vLLM, which this machine has not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.real_engines import local
from pdctl import manifests, pipeline
from pdctl.cli.app import app
from pdctl.helm import Helm

runner = CliRunner()


@pytest.fixture(scope="module")
def rendered(helm4: Helm, tmp_path_factory: pytest.TempPathFactory) -> list[manifests.Manifest]:
    values = tmp_path_factory.mktemp("init") / "values.yaml"
    init = [
        "init",
        "-m",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpus",
        "2",
        "--offline",
        "--mode",
        "pd",
    ]
    assert runner.invoke(app, [*init, "--out", str(values)]).exit_code == 0
    return pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path)).objects


def test_engines_run_the_rendered_command_with_only_host_changes(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", Path("/models/llama"), gpus=1)
    prefill, decode = layout.engines
    assert (prefill.role, decode.role) == ("prefill", "decode")
    for process, kv_role in ((prefill, "kv_producer"), (decode, "kv_consumer")):
        argv = process.argv
        assert argv[:3] == ["vllm", "serve", "/models/llama"]
        assert argv[argv.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
        assert argv[argv.index("--load-format") + 1] == "dummy"
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.45"  # two on one GPU
        config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        assert config["kv_role"] == kv_role  # the rendered transfer config, unchanged
        assert process.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "127.0.0.1"
        assert process.env["PYTHONHASHSEED"] == "123"
        assert not {"HF_HOME", "HF_TOKEN_PATH"} & set(process.env)
    assert prefill.port != decode.port
    assert prefill.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] != decode.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]
    assert any("0.9 -> 0.45" in change for change in layout.changes)


def test_the_router_gets_the_engines_urls_instead_of_kubernetes_selectors(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", Path("/models/llama"), gpus=2)
    router = layout.router
    assert router is not None
    argv = router.argv
    assert argv[0] == "vllm-router" and "--vllm-pd-disaggregation" in argv
    assert not any(word.startswith("--service-discovery") or "=" in word for word in argv)
    assert argv[argv.index("--prefill") + 1] == layout.engines[0].url
    assert argv[argv.index("--decode") + 1] == layout.engines[1].url
    assert argv[argv.index("--kv-connector") + 1] == "nixl"  # rendered flags kept
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    # On two GPUs each engine keeps the rendered utilization.
    assert (
        layout.engines[0].argv[layout.engines[0].argv.index("--gpu-memory-utilization") + 1]
        == "0.9"
    )


def test_the_default_values_are_rendered_for_the_vllm_that_runs_there(tmp_path: Path) -> None:
    """run.py's default: pdctl init's 8B layout, the pools' image tag set to the local vLLM."""
    from benchmarks.real_engines import run

    values = run.init_values(tmp_path, "v0.26.0")
    pools = pipeline.load_values([str(values)]).data["servingEngineSpec"]["modelSpec"]
    assert {pool["tag"] for pool in pools} == {"v0.26.0"} and len(pools) == 2
    assert not pipeline.errors(pipeline.check(pipeline.load_values([str(values)])))
