"""The aggregated values file (pdctl.plan.emit of a plan whose choice is aggregated):
one pool of role both behind the production-stack router in round robin, the plan's estimates
in its header; it passes `pdctl validate --render`, renders with the real helm, and no engine
is given a kv-transfer-config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import manifests, naming
from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.models import catalog
from pdctl.plan import emit, sizing
from pdctl.plan.layout import Plan, Request
from tests.helpers import assert_kube_valid, container, render_file

runner = CliRunner()


def _plan(model: str, gpus: int, mode: str = "auto", prompt: tuple[int, int] | None = None) -> Plan:
    """`prompt`: (input_len, output_len) instead of the default workload's."""
    found = catalog.find_model(model)
    assert found is not None
    request = Request(arch=found.arch, gpu=catalog.gpu("H100-80GB"), gpus=gpus, mode=mode)
    if prompt:
        workload = dataclasses.replace(request.workload, input_len=prompt[0], output_len=prompt[1])
        request = dataclasses.replace(request, workload=workload)
    return sizing.plan(request)


@pytest.fixture(scope="module")
def llama() -> Plan:
    """Llama-3.1-8B on 2 x H100 at the default workload: the estimates favour aggregated."""
    plan = _plan("meta-llama/Llama-3.1-8B-Instruct", 2)
    assert plan.better == "aggregated" and plan.aggregated is not None
    return plan


def _options() -> emit.InitOptions:
    return emit.InitOptions(wiring=emit.wiring(), command="pdctl init -m llama-3.1-8b --gpus 2")


def test_the_better_layout_is_written_aggregated(tmp_path: Path, llama: Plan) -> None:
    out = tmp_path / "values.yaml"
    written = emit.write(llama, _options(), out)  # the plan's choice
    assert written.mode == "aggregated"
    text = out.read_text()
    values = yaml.safe_load(text)
    a = llama.aggregated
    assert a is not None
    [pool] = values["servingEngineSpec"]["modelSpec"]
    assert pool["role"] == "both" and "kvTransfer" not in pool
    assert pool["replicaCount"] == a.replicas
    assert pool["vllmConfig"]["tensorParallelSize"] == a.engine.tp == pool["requestGPU"]
    assert values["routerSpec"] == {"type": "production-stack", "routingLogic": "roundrobin"}
    header = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "Layout (--mode auto) at --concurrency 64 in flight" in header
    assert f"): aggregated, {a.replicas} x TP{a.engine.tp} engine" in header
    assert f"= {a.gpus} of 2 GPUs" in header
    assert f"TTFT about {a.ttft_ms:.0f} ms" in header
    assert "Estimates of the aggregated layout" in header
    assert llama.choice is not None and llama.choice.why[1].startswith("aggregated gives")
    assert llama.choice.why[1] in header
    assert "KV transfer" not in header.replace("no KV transfer", "")


def test_the_aggregated_file_validates_and_renders_without_kv_transfer(
    tmp_path: Path, helm4: Helm, llama: Plan
) -> None:
    out = tmp_path / "values.yaml"
    emit.write(llama, _options(), out)
    checked = runner.invoke(app, ["validate", "--render", str(out)])
    assert checked.exit_code == 0, checked.output

    objects = render_file(helm4, out)
    assert_kube_valid(objects, "1.35.0")
    release = naming.Release("pd")
    [pool] = yaml.safe_load(out.read_text())["servingEngineSpec"]["modelSpec"]
    engine = manifests.find(objects, "Deployment", release.pool_deployment(pool["name"]))
    assert engine["spec"]["replicas"] == pool["replicaCount"]
    labels = engine["spec"]["template"]["metadata"]["labels"]
    assert labels[naming.ROLE] == "both"
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            words = [*c.get("command", []), *c.get("args", [])]
            assert not any("kv-transfer-config" in str(w) for w in words), deployment["metadata"]
    router = container(objects, release.router_deployment)
    args = router["args"]
    assert args[args.index("--routing-logic") + 1] == "roundrobin"


def test_aggregated_as_asked_says_what_it_costs_and_pd_stays_writable(tmp_path: Path) -> None:
    """8B on 8 x H100 at 16k-token prompts: PD wins, so --mode aggregated says what it costs."""
    long = (16000, 500)
    asked = _plan("meta-llama/Llama-3.1-8B-Instruct", 8, mode="aggregated", prompt=long)
    text = emit.render(asked, _options())
    assert "Layout (--mode aggregated) at --concurrency 64 in flight" in text
    assert "Cost of --mode aggregated: PD would give" in text
    chosen = _plan("meta-llama/Llama-3.1-8B-Instruct", 8, prompt=long)
    pd = yaml.safe_load(emit.write(chosen, _options(), tmp_path / "pd.yaml").text)
    roles = [spec["role"] for spec in pd["servingEngineSpec"]["modelSpec"]]
    assert roles == ["prefill", "decode"] and pd["routerSpec"]["type"] == "vllm-router"


def test_a_moe_model_renders_aggregated_too(tmp_path: Path, helm4: Helm) -> None:
    """Qwen3-30B-A3B (MoE) on 4 x H100: the aggregated file passes the same checks."""
    plan = _plan("Qwen/Qwen3-30B-A3B", 4, mode="aggregated")
    out = tmp_path / "values.yaml"
    emit.write(plan, _options(), out)
    assert_kube_valid(render_file(helm4, out), "1.35.0")
