"""Engines that span pods (LeaderWorkerSet pools) and the release's DisaggregatedSet, rendered
by the real helm: the exact leader and worker command lines of each vLLM version form
(helm/files/workloads.yaml engineForms), every flag in that version's table
(tests/test_engine_flags.py), leaders alone behind the Services and the routers, and the objects
against their CRDs (tests/crd_schemas.py, LWS v0.10.0) and Kubernetes' schemas."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests, naming, workloads
from pdctl.helm import Helm
from tests import crd_schemas
from tests.helpers import KUBE_VERSIONS, assert_kube_valid, render_file, write_values
from tests.test_engine_flags import assert_accepted

# The prefill pool's: kv_producer (vLLM deprecates kv_both for NixlConnector; connectors.yaml).
KV = '{"kv_connector":"NixlConnector","kv_load_failure_policy":"fail","kv_role":"kv_producer"}'
KV_OLD = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'  # before kv_load_failure_policy
RELEASE = naming.Release("pd")


def pool(name: str, role: str, tag: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "role": role,
        "repository": "vllm/vllm-openai",
        "tag": tag,
        "modelURL": "meta-llama/Llama-3.1-405B-Instruct",
        "hf_token": {"secretName": "hf", "secretKey": "token"},
        "requestGPU": 8,
        "multiNode": {"nodes": 2},
        "vllmConfig": {"tensorParallelSize": 8, "pipelineParallelSize": 2},
        "kvTransfer": {"connector": "NixlConnector"},
    }
    for key, value in extra.items():
        spec[key] = value
    return spec


def release(*pools: dict[str, Any], **engine: Any) -> dict[str, Any]:
    return {
        "servingEngineSpec": {"modelSpec": list(pools), **engine},
        "routerSpec": {
            "type": "vllm-router",
            "repository": "vllm/vllm-router",
            "tag": "nightly-20260710-b93cbcb",
        },
    }


def render(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[manifests.Manifest]:
    return render_file(helm, write_values(tmp_path, values))


def group(objects: list[manifests.Manifest], name: str) -> dict[str, Any]:
    """leader and worker containers and pod labels of the LWS `name`."""
    lws = manifests.find(objects, "LeaderWorkerSet", name)
    template = lws["spec"]["leaderWorkerTemplate"]
    return {
        part: {
            "container": template[f"{part}Template"]["spec"]["containers"][0],
            "labels": template[f"{part}Template"]["metadata"]["labels"],
        }
        for part in ("leader", "worker")
    }


SERVE = ["serve", "meta-llama/Llama-3.1-405B-Instruct", "--host", "0.0.0.0", "--port", "8000"]
TP_PP = ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]

# (tag, vllmConfig, multiNode) -> the exact leader and worker (command, args) per form.
FORMS = {
    "nnodes-v0.33.0": (
        "v0.33.0",
        {"tensorParallelSize": 8, "pipelineParallelSize": 2},
        {"nodes": 2},
        (["vllm"], [*SERVE, *TP_PP, "--kv-transfer-config", KV, "--nnodes", "2", "--node-rank",
                    "0", "--master-addr", "$(LWS_LEADER_ADDRESS)", "--master-port", "29501"]),
        (["vllm"], [*SERVE, *TP_PP, "--kv-transfer-config", KV, "--nnodes", "2", "--node-rank",
                    "$(LWS_WORKER_INDEX)", "--master-addr", "$(LWS_LEADER_ADDRESS)",
                    "--master-port", "29501", "--headless"]),
    ),
    "ray-v0.10.1": (
        "v0.10.1",
        {"tensorParallelSize": 8, "pipelineParallelSize": 2},
        {"nodes": 2, "rayPort": 6380},
        (["/bin/sh", "-c", "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh "
          "leader --ray_cluster_size=$(LWS_GROUP_SIZE) --ray_port=6380 && exec \"$0\" \"$@\""],
         ["vllm", *SERVE, *TP_PP, "--kv-transfer-config", KV_OLD,
          "--distributed-executor-backend", "ray"]),
        (["/bin/sh", "-c", "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh "
          "worker --ray_address=$(LWS_LEADER_ADDRESS) --ray_port=6380"], None),
    ),
    "data-parallel-v0.33.0": (
        "v0.33.0",
        {"dataParallelSize": 16, "enableExpertParallel": True},
        {"nodes": 2, "dataParallelRpcPort": 13345},
        (["vllm"], [*SERVE, "--data-parallel-size", "16", "--enable-expert-parallel",
                    "--kv-transfer-config", KV, "--data-parallel-size-local", "8",
                    "--data-parallel-address", "$(LWS_LEADER_ADDRESS)",
                    "--data-parallel-rpc-port", "13345"]),
        (["/bin/sh", "-c",
          "exec \"$0\" \"$@\" --data-parallel-start-rank $$((LWS_WORKER_INDEX * 8))"],
         ["vllm", *SERVE, "--data-parallel-size", "16", "--enable-expert-parallel",
          "--kv-transfer-config", KV, "--headless", "--data-parallel-size-local", "8",
          "--data-parallel-address", "$(LWS_LEADER_ADDRESS)", "--data-parallel-rpc-port",
          "13345"]),
    ),
    "data-parallel-v0.9.2": (
        "v0.9.2",
        {"dataParallelSize": 4, "tensorParallelSize": 4},
        {"nodes": 2},
        (["vllm"], [*SERVE, "--tensor-parallel-size", "4", "--data-parallel-size", "4",
                    "--kv-transfer-config", KV_OLD, "--data-parallel-size-local", "2",
                    "--data-parallel-address", "$(LWS_LEADER_ADDRESS)",
                    "--data-parallel-rpc-port", "29550"]),
        (["/bin/sh", "-c",
          "exec \"$0\" \"$@\" --data-parallel-start-rank $$((LWS_WORKER_INDEX * 2))"],
         ["vllm", *SERVE, "--tensor-parallel-size", "4", "--data-parallel-size", "4",
          "--kv-transfer-config", KV_OLD, "--headless", "--data-parallel-size-local", "2",
          "--data-parallel-address", "$(LWS_LEADER_ADDRESS)", "--data-parallel-rpc-port",
          "29550"]),
    ),
}  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
def test_exact_command_lines_per_vllm_version(helm4: Helm, tmp_path: Path, form: str) -> None:
    tag, vllm, multi_node, leader, worker = FORMS[form]
    spec = {"vllmConfig": vllm, "multiNode": multi_node, "requestGPU": 8}
    values = release(pool("prefill", "prefill", tag, **spec), pool("decode", "decode", tag, **spec))
    objects = render(helm4, tmp_path, values)
    found = group(objects, RELEASE.pool_leader_worker_set("prefill"))
    for part, (command, args) in (("leader", leader), ("worker", worker)):
        container = found[part]["container"]
        assert container["command"] == command, part
        assert container.get("args") == args, part
        assert_accepted(container, tag.removeprefix("v"))
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)


def test_every_form_is_tested() -> None:
    assert {form.name for form in workloads.load().forms} == {
        name.rsplit("-v", 1)[0] for name in FORMS
    }


def test_leaders_alone_are_served_and_discovered(helm4: Helm, tmp_path: Path) -> None:
    network = {"rdmaResource": "rdma/ib", "rdmaCount": 4, "ipcLock": True}
    values = release(
        pool("prefill", "prefill", "v0.33.0", network=network, shmSize="64Gi"),
        pool("decode", "decode", "v0.33.0", network=network, shmSize="64Gi"),
    )
    objects = render(helm4, tmp_path, values)
    found = group(objects, RELEASE.pool_leader_worker_set("decode"))
    leader, worker = found["leader"], found["worker"]
    assert leader["labels"][naming.COMPONENT] == naming.ENGINE
    assert worker["labels"][naming.COMPONENT] == naming.ENGINE_WORKER
    service = manifests.find(objects, "Service", RELEASE.pool_service("decode"))
    selector = service["spec"]["selector"]
    assert selector == RELEASE.pool_selector("decode")
    assert selector.items() <= leader["labels"].items()
    assert not selector.items() <= worker["labels"].items()
    # vllm-router discovers decode pods by a selector that workers do not match.
    router = manifests.find(objects, "Deployment", RELEASE.router_deployment)
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--decode-selector")
    wanted = dict(pair.split("=", 1) for pair in args[at + 1 : at + 4])
    assert wanted.items() <= leader["labels"].items()
    assert not wanted.items() <= worker["labels"].items()
    # Probes on leaders only (headless workers serve no HTTP); GPUs, RDMA, shm on every pod.
    assert "readinessProbe" in leader["container"] and "startupProbe" in leader["container"]
    assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(worker["container"])
    for part in (leader, worker):
        limits = part["container"]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "8" and limits["rdma/ib"] == "4"
        assert "IPC_LOCK" in part["container"]["securityContext"]["capabilities"]["add"]
        env = {e["name"] for e in part["container"]["env"]}
        needed = {"VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT", "HF_TOKEN_PATH"}
        assert needed <= env
    lws = manifests.find(objects, "LeaderWorkerSet", RELEASE.pool_leader_worker_set("decode"))
    volumes = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in volumes
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert not [o for o in objects if o["kind"] == "Deployment" and "vllm" in o["metadata"]["name"]]
    summary = manifests.summarize(objects)
    assert summary.total_gpus == 32 and {p.nodes for p in summary.pools} == {2}


def test_disaggregated_set(helm: Helm, tmp_path: Path) -> None:
    single = pool("prefill", "prefill", "v0.33.0", multiNode=None, requestGPU=1, vllmConfig={})
    single.pop("multiNode")
    wide = pool(
        "decode",
        "decode",
        "v0.33.0",
        replicaCount=2,
        vllmConfig={"dataParallelSize": 16, "enableExpertParallel": True},
        multiNode={"nodes": 2},
    )
    settings = {
        "enabled": True,
        "slices": 2,
        "placementPolicy": {"type": "ExclusiveSlice", "topology": "nvidia.com/gpu.clique"},
    }
    values = release(single, wide, disaggregatedSet=settings, lwsVersion="0.10.0")
    objects = render(helm, tmp_path, values)
    (ds,) = [o for o in objects if o["kind"] == "DisaggregatedSet"]
    assert ds["metadata"]["name"] == RELEASE.disaggregated_set
    assert (
        ds["spec"]["slices"] == 2 and ds["spec"]["placementPolicy"] == settings["placementPolicy"]
    )
    roles = {role["name"]: role for role in ds["spec"]["roles"]}
    assert list(roles) == ["prefill", "decode"]
    assert roles["prefill"]["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert "leaderTemplate" not in roles["prefill"]["spec"]["leaderWorkerTemplate"]
    assert roles["decode"]["spec"]["replicas"] == 2
    assert roles["decode"]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": 0,
        "maxUnavailable": 1,
    }
    # No other engine workload; the pools' Services stay (they select the leaders by label).
    assert not [o for o in objects if o["kind"] in ("LeaderWorkerSet",)]
    assert not [o for o in objects if o["kind"] == "Deployment" and "vllm" in o["metadata"]["name"]]
    manifests.find(objects, "Service", RELEASE.pool_service("decode"))
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)
    # External scaling: no replicas in the role (an autoscaler owns them).
    external = copy.deepcopy(values)
    external["servingEngineSpec"]["modelSpec"][1]["scalingMode"] = "External"
    external["servingEngineSpec"]["disaggregatedSet"].pop("slices")
    (ds,) = [o for o in render(helm, tmp_path, external) if o["kind"] == "DisaggregatedSet"]
    decode = ds["spec"]["roles"][1]
    assert decode["scaling"] == {"mode": "External"} and "replicas" not in decode["spec"]


def test_crd_check_is_strict() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "x"},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": []}}}},
    }
    assert crd_schemas.errors(lws, "1.35.0") == []
    bad = json.loads(json.dumps(lws))
    bad["spec"]["leaderWorkerTemplate"]["sizes"] = 2
    bad["spec"]["rolloutStrategy"] = {"type": "Recreate"}
    problems = " ".join(crd_schemas.errors(bad, "1.35.0"))
    assert "sizes" in problems and "Recreate" in problems


def test_init_writes_multi_node_pools_that_validate_and_render(helm: Helm, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pdctl.cli.app import app
    from tests.helpers import load_values

    out = tmp_path / "llama-405b-values.yaml"
    result = CliRunner().invoke(
        app,
        [
            "init",
            "--model",
            "meta-llama/Llama-3.1-405B-Instruct",
            "--gpus",
            "32",
            "--gpu-type",
            "H100-80GB",
            "--offline",
            "--mode",
            "pd",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "each engine spans 2 nodes" in text
    for spec in load_values(out)["servingEngineSpec"]["modelSpec"]:
        assert spec["multiNode"]["nodes"] == 2 and spec["requestGPU"] == 8
        assert spec["vllmConfig"]["tensorParallelSize"] == 8
        assert spec["vllmConfig"]["pipelineParallelSize"] == 2
    check = CliRunner().invoke(app, ["validate", str(out), "--strict"])
    assert check.exit_code == 0, check.output
    objects = render_file(helm, out)
    groups = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    assert len(groups) == 2 and all(g["spec"]["leaderWorkerTemplate"]["size"] == 2 for g in groups)
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)
