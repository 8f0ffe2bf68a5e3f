"""pdctl preflight against the Kubernetes API server TEST DOUBLE (tests/doubles/kube_api.py, not
Kubernetes): the Jobs it creates from the chart's render (nodes, image, resources, IPC_LOCK, UCX
settings; strict Kubernetes schemas), and whole runs whose probe pods the double ends with the
report lines the test gives (the double runs no container: the probe itself is tested for real
in test_preflight_probe.py); the verdicts, the exit codes and the cleanup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import preflight
from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.preflight import jobs, verdict
from pdctl.preflight.orchestrate import ProbeRun, Side
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CI, KUBE_VERSIONS, TUTORIAL_VALUES, assert_kube_valid

runner = CliRunner()
RDMA_VALUES = CI / "nixl-rdma-hetero-tp-values.yaml"  # rdma/ib, IPC_LOCK, UCX_*, nodeSelector


def plan_of(values: Path, helm: Helm) -> jobs.ProbeJobs:
    options = preflight.Options(values_files=(str(values),), helm_path=str(helm.path))
    return preflight.prepare(options)[0]


def test_probe_jobs_copy_the_rendered_pools(helm4: Helm) -> None:
    plan = plan_of(RDMA_VALUES, helm4)
    assert (plan.target.name, plan.target.role) == ("prefill-tp2", "prefill")
    assert (plan.initiator.name, plan.initiator.role) == ("decode-tp4", "decode")
    target = plan.job(jobs.TARGET)["spec"]["template"]["spec"]
    initiator = plan.job(jobs.INITIATOR, "10.0.0.1:5599")["spec"]["template"]["spec"]
    for spec, gpus in ((target, "2"), (initiator, "4")):
        (container,) = spec["containers"]
        assert container["image"] == "vllm/vllm-openai:v0.33.0"
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert spec["runtimeClassName"] == "nvidia" and spec["hostIPC"] is True
        limits = container["resources"]["limits"]
        assert (limits["nvidia.com/gpu"], limits["rdma/ib"]) == (gpus, "1")
        assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["UCX_TLS"] == "rc,cuda_copy,cuda_ipc" and env["UCX_NET_DEVICES"] == "mlx5_0:1"
        assert spec["restartPolicy"] == "Never" and "serviceAccountName" not in spec
    assert target["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "tolerations" not in initiator  # the decode pool has none
    # The pool's pod anti-affinity names its own pods: left out; the probes keep apart instead.
    assert set(target["affinity"]) == {"podAntiAffinity"}
    assert initiator["containers"][0]["args"][-4:] == ["--target", "10.0.0.1:5599"] + [
        "--iterations",
        "5",
    ]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", [RDMA_VALUES, TUTORIAL_VALUES], ids=lambda p: p.stem)
def test_probe_objects_pass_strict_kubernetes_schemas(
    helm4: Helm, values: Path, kube_version: str
) -> None:
    plan = plan_of(values, helm4)
    objects = [plan.config_map(), plan.job(jobs.TARGET), plan.job(jobs.INITIATOR, "1.2.3.4:5599")]
    assert_kube_valid(objects, kube_version)
    assert "PDCTL-PREFLIGHT" in plan.config_map()["data"]["probe.py"]


# ---- whole runs against the double ------------------------------------------------------------


def report(side: str, **changes: Any) -> dict[str, Any]:
    """A probe report as probe.py prints it, for a healthy RDMA node; `changes` replace keys."""
    data: dict[str, Any] = {
        "role": side,
        "hostname": f"{side}-pod",
        "gpus": ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"],
        "rdma_devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "4: ACTIVE"}]}],
        "net_interfaces": ["eth0", "lo"],
        "ucx_env": {"UCX_TLS": "rc,cuda_copy,cuda_ipc", "UCX_NET_DEVICES": "mlx5_0:1"},
        "capabilities": {"ipc_lock": True, "memlock_bytes": None},
        "nixl": {"importable": True, "ucx_backend": True, "version": "nixl 0.7.1"},
        "ucx": {"version": "1.19.0", "library": "/usr/lib/libucp.so.0"},
        "transports": [
            {
                "scope": "inter-node",
                "operation": "remote memory read by ucp_get* from cuda memory",
                "transports": ["rc_mlx5/mlx5_0:1"],
            }
        ],
        "ok": True,
    }
    if side == jobs.INITIATOR:
        data["transfer"] = {
            "operation": "READ",
            "memory": "VRAM",
            "remote_memory": "VRAM",
            "bytes": 16 << 20,
            "iterations": 5,
            "seconds": [0.0004] * 5,
            "gbps": 41.9,
            "best_gbps": 42.5,
            "verified": True,
        }
    data.update(changes)
    return data


def finish_with(kube: KubeAPIDouble, reports: dict[str, dict[str, Any]]) -> None:
    """The double ends each probe pod with its report line; the target only once the initiator's
    Job exists (it waits for the initiator in a real run)."""

    def outcome(pod: dict[str, Any]) -> tuple[int, list[str]] | None:
        side = pod["metadata"]["labels"][jobs.SIDE]
        if side == jobs.TARGET and not kube.items("jobs", labels=f"{jobs.SIDE}={jobs.INITIATOR}"):
            return None
        data = reports[side]
        return (0 if data["ok"] else 1), ["UCX log lines", "PDCTL-PREFLIGHT " + json.dumps(data)]

    kube.job_outcome(outcome)


def invoke(helm: Helm, values: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = ["preflight", "-f", str(values), "--helm", str(helm.path), "--size-mb", "16"]
    result = runner.invoke(app, [*args, "-o", "json", *extra])
    text = result.stdout
    return result.exit_code, json.loads(text) if text.startswith("{") else {}, result.output


def assert_cleaned(kube: KubeAPIDouble) -> None:
    assert kube.items("jobs") == [] and kube.items("pods") == []
    assert kube.items("configmaps", labels=jobs.RUN) == []
    assert kube.problems() == []


def test_healthy_rdma_pools_pass(kube: KubeAPIDouble, helm4: Helm) -> None:
    finish_with(kube, {side: report(side) for side in (jobs.TARGET, jobs.INITIATOR)})
    code, result, output = invoke(helm4, RDMA_VALUES)
    assert code == 0, output
    assert result["ok"] and result["measured_gbps"] == 41.9
    assert result["transports"] == ["rc_mlx5/mlx5_0:1"]
    # H100-80GB's catalog link (ib-ndr), found from the pools' nvidia.com/gpu.product.
    assert result["assumed"]["gbps"] == 50 and "H100-80GB" in result["assumed"]["source"]
    # The double has one node: both probes ran there, which the verdict says.
    assert [f["id"] for f in result["findings"]] == ["same-node"]
    probes = result["probes"]
    assert probes["target"]["node"] == probes["initiator"]["node"] == "gpu-node-1"
    assert probes["initiator"]["report"]["transfer"]["verified"]
    assert_cleaned(kube)
    # The initiator was pointed at the target pod's IP and side-channel port.
    created = [r for r in kube.requests if r.startswith("POST") and "/jobs" in r]
    assert len(created) == 2


def test_tcp_without_rdma_or_ipc_lock_warns(kube: KubeAPIDouble, helm4: Helm) -> None:
    tcp = {
        "rdma_devices": [],
        "ucx_env": {},
        "capabilities": {"ipc_lock": False, "memlock_bytes": 65536},
        "transports": [
            {
                "scope": "inter-node",
                "operation": "remote memory read by ucp_get* from host memory",
                "transports": ["tcp/eth0"],
            }
        ],
    }
    reports = {side: report(side, **tcp) for side in (jobs.TARGET, jobs.INITIATOR)}
    reports[jobs.INITIATOR]["transfer"]["gbps"] = 1.1
    finish_with(kube, reports)
    code, result, output = invoke(helm4, TUTORIAL_VALUES, "--gpu-type", "H200")
    assert code == 0, output  # warnings only
    ids = [f["id"] for f in result["findings"]]
    assert ids.count("no-rdma-resource") == 2 and ids.count("no-ipc-lock") == 2
    assert "tcp" in ids and "below-assumption" in ids
    tcp_finding = next(f for f in result["findings"] if f["id"] == "tcp")
    assert "tcp/eth0" in tcp_finding["message"]
    # The double has one node: the fix for two engines on one node, UCX's CUDA IPC reads.
    assert tcp_finding["hint"].startswith(
        "both probe pods ran on node gpu-node-1: set UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y"
    )
    assert result["measured_link"].startswith("TCP")
    assert result["assumed"]["gbps"] == 50  # H200: ib-ndr
    text = runner.invoke(app, ["preflight", "-f", str(TUTORIAL_VALUES), "--helm", str(helm4.path)])
    assert text.exit_code == 0 and "preflight passed with warnings" in text.stdout
    assert "planner assumed:" in text.stdout and "warn: [tcp]" in text.stdout
    assert_cleaned(kube)


def test_tcp_advice_follows_the_probe_pods_nodes() -> None:
    def run(target: str | None, initiator: str | None) -> ProbeRun:
        return ProbeRun(
            Side("target", "decode", node=target), Side("initiator", "prefill", node=initiator)
        )

    assert verdict.tcp_advice(run("a", "b")) == verdict.RDMA_ADVICE
    assert verdict.tcp_advice(run("a", "a")).startswith("both probe pods ran on node a: set ")
    unknown = verdict.tcp_advice(run("a", None))
    assert unknown.startswith(verdict.RDMA_ADVICE)
    assert "if prefill and decode run on one node without NVLink, set " in unknown


def test_an_image_without_nixl_is_refused(kube: KubeAPIDouble, helm4: Helm) -> None:
    no_nixl = {
        "ok": False,
        "nixl": {"importable": False, "ucx_backend": False, "error": "import nixl failed: No "
                 "module named 'nixl'"},
    }  # fmt: skip
    finish_with(kube, {side: report(side, **no_nixl) for side in (jobs.TARGET, jobs.INITIATOR)})
    code, result, output = invoke(helm4, RDMA_VALUES, "--network-gbps", "25")
    assert code == 1, output
    refused = [f for f in result["findings"] if f["level"] == "refuse"]
    assert {f["id"] for f in refused} == {"no-nixl"} and len(refused) == 2
    assert "No module named 'nixl'" in refused[0]["message"]
    assert "vllm/vllm-openai:v0.33.0" in refused[0]["message"]
    assert result["assumed"]["source"] == "25 GB/s per GPU (--network-gbps)"
    assert_cleaned(kube)


def test_ucx_net_devices_naming_a_missing_device_warns(kube: KubeAPIDouble, helm4: Helm) -> None:
    other = {"rdma_devices": [{"name": "mlx5_3", "ports": []}]}
    finish_with(kube, {side: report(side, **other) for side in (jobs.TARGET, jobs.INITIATOR)})
    code, result, output = invoke(helm4, RDMA_VALUES)
    assert code == 0, output
    found = [f for f in result["findings"] if f["id"] == "ucx-net-devices"]
    assert len(found) == 2 and "mlx5_0:1" in found[0]["message"]
    assert "mlx5_3" in found[0]["message"]


def test_a_probe_that_cannot_be_scheduled_is_refused(kube: KubeAPIDouble, helm4: Helm) -> None:
    kube.gpus = 0
    code, result, output = invoke(helm4, RDMA_VALUES)
    assert code == 1, output
    (finding,) = [f for f in result["findings"] if f["level"] == "refuse"][:1]
    assert finding["id"] == "probe-not-run" and "Unschedulable" in finding["message"]
    assert result["probes"]["initiator"]["pod"] is None  # never started without a target
    assert_cleaned(kube)


def test_keep_leaves_the_objects(kube: KubeAPIDouble, helm4: Helm) -> None:
    finish_with(kube, {side: report(side) for side in (jobs.TARGET, jobs.INITIATOR)})
    code, result, output = invoke(helm4, RDMA_VALUES, "--keep")
    assert code == 0, output
    assert len(result["kept"]) == 3
    assert len(kube.items("jobs")) == 2 and len(kube.items("configmaps", labels=jobs.RUN)) == 1


def test_values_without_a_pd_pair_are_refused(helm4: Helm) -> None:
    code, _, output = invoke(helm4, CI / "aggregated-values.yaml")
    assert code == 1 and "nothing to preflight" in output


def test_no_cluster_is_an_environment_problem(
    helm4: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, _, output = invoke(helm4, RDMA_VALUES)
    assert code == 3 and "no cluster configured" in output
