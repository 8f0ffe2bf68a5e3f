"""pdctl deploy with the real helm binaries (3.17.2 and 4.1.4) against the Kubernetes API server
test double (tests/doubles/kube_api.py, not a cluster): healthy installs, stuck installs and
upgrades (GPU pods Pending, crash loops, image pull errors) that exit 1 with the reason and roll
back, pdctl's own readiness verdict, the dry run without a cluster, and the exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CI, TUTORIAL_VALUES, write_values

runner = CliRunner()
IMAGE = "lmcache/vllm-openai"
NEW_TAG = "2025-06-01-v2"  # the image an upgrade moves the prefill pool to
UPGRADE = f"servingEngineSpec.modelSpec[0].tag={NEW_TAG}"
# The chart's rollout before the fix: Helm 3's --wait accepts 0 ready pods of a one-replica pool.
OLD_STRATEGY = (
    "servingEngineSpec.strategy.type=RollingUpdate,"
    "servingEngineSpec.strategy.rollingUpdate.maxSurge=0,"
    "servingEngineSpec.strategy.rollingUpdate.maxUnavailable=1"
)
# How long helm (or pdctl) waits on a stuck rollout before it rolls back. No evidence depends on
# it: pdctl replays the pods' history from the API after helm ends (pdctl/release/watch.py), so a
# stuck pod that no look caught before the rollback removed it is still reported.
STUCK_TIMEOUT = "5s"
# A healthy rollout ends when every pod is Ready (the double makes them Ready at once); this bound
# only stops a broken one, so a loaded machine never meets it.
HEALTHY_TIMEOUT = "300s"


def deploy(helm: Helm, *args: str, timeout: str = HEALTHY_TIMEOUT) -> Result:
    return runner.invoke(
        app,
        ["deploy", "-f", str(TUTORIAL_VALUES), "--timeout", timeout, "--helm", str(helm.path)]
        + list(args),
    )


def as_json(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


def helm_history(helm: Helm) -> list[dict[str, Any]]:
    run = helm.run(["history", "pd", "-o", "json"])
    return json.loads(run.stdout) if run.returncode == 0 else []


def images(api: KubeAPIDouble, deployment: str) -> str:
    (obj,) = [d for d in api.items("deployments") if d["metadata"]["name"] == deployment]
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


# ---- healthy ----------------------------------------------------------------------------------


def test_healthy_install_then_upgrade(kube: KubeAPIDouble, helm: Helm) -> None:
    first = deploy(helm, "-o", "json")
    assert first.exit_code == 0, first.output
    report = as_json(first)
    assert (report["action"], report["status"], report["ok"], report["revision"]) == (
        "install",
        "deployed",
        True,
        1,
    )
    assert [(p["name"], p["role"], p["ready"], p["replicas"]) for p in report["pools"]] == [
        ("llama-prefill", "prefill", 1, 1),
        ("llama-decode", "decode", 1, 1),
    ]
    assert report["router"]["ready"] == 1 and report["router"]["rolled_out"]
    assert all(pod["ready"] for pool in report["pools"] for pod in pool["pods"])
    assert report["stuck_pods"] == []
    assert {c["change"] for c in report["changes"]} == {"added"}
    wait = (
        ["--wait=watcher", "--rollback-on-failure"] if helm.major == 4 else ["--atomic", "--wait"]
    )
    assert report["helm"]["command"][-len(wait) - 3 : -1] == [*wait, "--", "pd"]  # then the chart
    assert "--timeout" in report["helm"]["command"]
    # The same values again: an upgrade with nothing to change.
    again = deploy(helm)
    assert again.exit_code == 0, again.output
    assert "upgrade of release pd: no object changes" in again.stderr
    assert "release pd revision 2 deployed (upgrade" in again.stdout
    assert [entry["revision"] for entry in helm_history(helm)] == [1, 2]


def test_upgrade_prints_changes_per_object_before_applying(
    kube: KubeAPIDouble, helm4: Helm
) -> None:
    assert deploy(helm4).exit_code == 0
    result = deploy(helm4, "--set", UPGRADE)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    change = lines.index("  ~ Deployment pd-llama-prefill-deployment-vllm (changed)")
    assert f"      -        image: {IMAGE}:2025-05-17-v1" in lines[change:]
    assert f"      +        image: {IMAGE}:{NEW_TAG}" in lines[change:]
    # The diff is printed before helm's wait starts reporting the new pod.
    first_pod_line = next(i for i, line in enumerate(lines) if line.startswith("["))
    assert change < first_pod_line
    assert images(kube, "pd-llama-prefill-deployment-vllm") == f"{IMAGE}:{NEW_TAG}"


def test_create_namespace(kube: KubeAPIDouble, helm4: Helm) -> None:
    missing = deploy(helm4, "-n", "serving")
    assert missing.exit_code == 1
    assert 'namespaces "serving" not found' in missing.stderr
    created = deploy(helm4, "-n", "serving", "--create-namespace")
    assert created.exit_code == 0, created.output
    assert {
        p["metadata"]["namespace"]
        for p in kube.items("pods", None)
        if p["metadata"]["name"].startswith("pd-")
    } == {"serving"}


# ---- stuck: exit 1 with the reason, roll back -------------------------------------------------


def test_install_with_gpu_pods_pending_fails_and_is_removed(
    kube: KubeAPIDouble, helm: Helm
) -> None:
    kube.gpus = 0
    result = deploy(helm, "-o", "json", timeout=STUCK_TIMEOUT)
    assert result.exit_code == 1, result.output
    report = as_json(result)
    assert (report["ok"], report["status"], report["revision"]) == (False, "uninstalled", None)
    stuck = {pod["pool"]: pod for pod in report["stuck_pods"]}
    assert set(stuck) == {"llama-prefill", "llama-decode"}  # the router has no GPU: Ready
    for pod in stuck.values():
        assert pod["phase"] == "Pending" and pod["reason"] == "Unschedulable"
        (event,) = pod["events"]
        assert event.startswith("FailedScheduling: 0/1 nodes are available: 1 Insufficient")
        assert "Insufficient nvidia.com/gpu" in event
    assert helm_history(helm) == []
    assert kube.items("deployments") == [] and kube.release_secrets("pd") == []


def _upgrade_stuck(kube: KubeAPIDouble, helm: Helm, setting: str, *args: str) -> Result:
    """Install, then upgrade with --set `setting`: exit 1, and back on the first revision."""
    first = deploy(helm)
    assert first.exit_code == 0, first.output
    result = deploy(helm, "--set", setting, *args, timeout=STUCK_TIMEOUT)
    assert result.exit_code == 1, result.output
    history = helm_history(helm)
    assert [e["revision"] for e in history] == [1, 2, 3]
    assert history[-1]["status"] == "deployed"
    assert history[-1]["description"] == "Rollback to 1"
    # Back on the first revision's pods, every one Ready.
    assert images(kube, "pd-llama-prefill-deployment-vllm") == f"{IMAGE}:2025-05-17-v1"
    pods = kube.items("pods")
    assert len(pods) == 3
    assert all(p["status"]["containerStatuses"][0]["ready"] for p in pods)
    return result


def _report(result: Result) -> dict[str, Any]:
    report = as_json(result)
    assert (report["action"], report["status"], report["ok"]) == ("upgrade", "rolled-back", False)
    assert (report["previous_revision"], report["revision"]) == (1, 3)
    assert all(pool["ready"] == pool["replicas"] for pool in report["pools"])
    return report


def test_upgrade_crash_loop_rolls_back(kube: KubeAPIDouble, helm: Helm) -> None:
    crash = ["Loading model weights", "RuntimeError: CUDA error: no kernel image is available"]
    kube.crash(f"{IMAGE}:{NEW_TAG}", crash)
    report = _report(_upgrade_stuck(kube, helm, UPGRADE, "-o", "json"))
    (pod,) = report["stuck_pods"]
    assert (pod["pool"], pod["role"], pod["reason"]) == (
        "llama-prefill",
        "prefill",
        "CrashLoopBackOff",
    )
    assert pod["restarts"] > 0 and pod["message"] == "last exit code 1 (Error)"
    assert pod["logs"] == crash
    assert [c["name"] for c in report["changes"]] == ["pd-llama-prefill-deployment-vllm"]


def test_upgrade_image_pull_error_rolls_back(kube: KubeAPIDouble, helm: Helm) -> None:
    kube.fail_pull(f"{IMAGE}:{NEW_TAG}")
    result = _upgrade_stuck(kube, helm, UPGRADE)
    lines = result.stderr.splitlines()
    start = lines.index("pods that did not become Ready:")
    assert (
        "(llama-prefill, prefill): Pending, restarts 0, ImagePullBackOff: Back-off pulling"
        in (lines[start + 1])
    )
    assert f'    event Failed: Failed to pull image "{IMAGE}:{NEW_TAG}": rpc error' in "\n".join(
        lines[start:]
    )
    assert lines[-1] == "hint: the release was rolled back to revision 1 (now revision 3)"


def test_upgrade_gpu_pending_rolls_back(kube: KubeAPIDouble, helm: Helm) -> None:
    # Two GPUs on the node: the first revision's two one-GPU pods fit, two TP=2 pods do not.
    kube.gpus = 2
    tp2 = [
        f"servingEngineSpec.modelSpec[{i}].{key}=2"
        for i in (0, 1)
        for key in ("requestGPU", "vllmConfig.tensorParallelSize")
    ]
    report = _report(_upgrade_stuck(kube, helm, ",".join(tp2), "-o", "json"))
    pending = [pod for pod in report["stuck_pods"] if pod["reason"] == "Unschedulable"]
    assert pending and all("Insufficient nvidia.com/gpu" in pod["events"][0] for pod in pending)


# ---- pdctl's own verdict, whatever helm's wait says --------------------------------------------


def test_pdctl_checks_readiness_when_helm_says_deployed(kube: KubeAPIDouble, helm3: Helm) -> None:
    """With the old rollout, Helm 3's --wait accepts a one-replica pool with no pod Ready
    (tests/test_deploy_rollout.py); pdctl still fails the upgrade and rolls back itself."""
    assert deploy(helm3, "--set", OLD_STRATEGY).exit_code == 0
    kube.gpus = 0
    result = deploy(
        helm3, "--set", OLD_STRATEGY, "--set", UPGRADE, "-o", "json", timeout=STUCK_TIMEOUT
    )
    assert result.exit_code == 1, result.output
    report = as_json(result)
    assert report["message"].startswith("helm reported the release deployed, but not every pod")
    assert (report["status"], report["previous_revision"]) == ("rolled-back", 1)
    history = helm_history(helm3)
    assert [e["description"] for e in history] == [
        "Install complete",
        "Upgrade complete",
        "Rollback to 1",
    ]
    assert report["stuck_pods"][0]["reason"] == "Unschedulable"


# ---- no cluster needed, or none there ----------------------------------------------------------


def test_dry_run_needs_no_cluster(
    helm: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    result = runner.invoke(
        app, ["deploy", "--dry-run", "-f", str(TUTORIAL_VALUES), "--helm", str(helm.path)]
    )
    assert result.exit_code == 0, result.output
    assert "name: pd-llama-prefill-deployment-vllm" in result.stdout
    assert "no cluster contacted" in result.stderr
    assert "upgrade --install --namespace default" in result.stderr
    flags = "--wait=watcher --rollback-on-failure" if helm.major == 4 else "--atomic --wait"
    assert f"{flags} -- pd " in result.stderr


def test_dry_run_json(helm4: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    result = runner.invoke(
        app,
        [
            "deploy",
            "--dry-run",
            "-f",
            str(TUTORIAL_VALUES),
            "--helm",
            str(helm4.path),
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = as_json(result)
    assert (report["action"], report["status"], report["ok"]) == ("dry-run", "rendered", True)
    assert report["summary"]["total_gpus"] == 2
    assert "kind: Deployment" in report["manifest"]
    assert [p["name"] for p in report["pools"]] == ["llama-prefill", "llama-decode"]


def test_refused_values_stop_before_the_cluster(
    helm4: Helm, kube: KubeAPIDouble, tmp_path: Path
) -> None:
    """The chart refuses them (the helm template validation runs): no install, no cluster call."""
    bad = write_values(tmp_path, TUTORIAL_VALUES.read_text().replace("kv_consumer", "kv_producer"))
    result = runner.invoke(app, ["deploy", "-f", str(bad), "--helm", str(helm4.path)])
    assert result.exit_code == 1, result.output
    assert "the values were refused" in result.stderr
    assert kube.requests == []


def test_no_helm_is_exit_3(kube: KubeAPIDouble) -> None:
    result = runner.invoke(app, ["deploy", "-f", str(TUTORIAL_VALUES), "--helm", "/no/such/helm"])
    assert result.exit_code == 3
    assert "not an executable file" in result.stderr
    assert kube.requests == []


def test_no_cluster_is_exit_3(helm4: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    result = deploy(helm4)
    assert result.exit_code == 3, result.output
    assert "no cluster configured" in result.stderr
    assert "Traceback" not in result.output


def test_usage_errors_are_exit_2(helm4: Helm) -> None:
    assert runner.invoke(app, ["deploy"]).exit_code == 2
    bad_timeout = deploy(helm4, timeout="soon")
    assert bad_timeout.exit_code == 2
    assert "--timeout 'soon'" in bad_timeout.stderr


def test_deploy_as_a_subprocess_without_a_cluster(helm4: Helm, tmp_path: Path) -> None:
    """The entry point as a user runs it, KUBECONFIG from the environment: exit 3, one message."""
    with KubeAPIDouble() as api:
        kubeconfig = api.write_kubeconfig(tmp_path)  # its server is gone once the block ends
    run = subprocess.run(
        [sys.executable, "-m", "pdctl", "deploy", "-f", str(TUTORIAL_VALUES)]
        + ["--helm", str(helm4.path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    assert run.returncode == 3, run.stderr
    assert "error: reading the server version: cannot reach the API server" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_default_wait_follows_the_engines_startup_budget(helm4: Helm) -> None:
    """A 70B file's engines may take 195 x 10 s to start (helm/ci/multinode-ray-values.yaml):
    deploy waits that plus 10 minutes to pull images, not the 20 minutes that would roll a
    healthy first install back; an explicit shorter --timeout is kept and warned about."""
    values = str(CI / "multinode-ray-values.yaml")
    result = runner.invoke(app, ["deploy", "--dry-run", "-f", values, "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    assert "--timeout 2550s" in result.stderr
    assert "shorter than the engines' startup probes" not in result.stderr
    args = ["deploy", "--dry-run", "-f", values, "--timeout", "20m", "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--timeout 1200s" in result.stderr
    assert "--timeout 1200s is shorter than the engines' startup probes allow (1950s" in (
        " ".join(result.stderr.split())
    )


def test_the_chart_default_probe_waits_thirty_minutes(helm4: Helm) -> None:
    """The chart's default startup probe allows 10 s x 120 = 20 minutes, plus 10 to pull."""
    args = ["deploy", "--dry-run", "-f", str(TUTORIAL_VALUES), "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "--timeout 1800s" in result.stderr, result.output
