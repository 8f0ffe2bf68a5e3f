"""pdctl status against the Kubernetes API server test double (tests/doubles/kube_api.py), with
releases the real helm binaries installed: revision and state, pools and roles, pods Ready,
the router's endpoint, recent warning events; exit codes and the -o json shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CHART, TUTORIAL_VALUES

runner = CliRunner()


def install(helm: Helm) -> None:
    """helm itself installs the tutorial (no wait: the double's pods are at once what they
    will be)."""
    run = helm.run(["upgrade", "--install", "pd", str(CHART), "-f", str(TUTORIAL_VALUES)])
    assert run.returncode == 0, run.stderr


def test_status_of_a_healthy_release(kube: KubeAPIDouble, helm: Helm) -> None:
    install(helm)
    result = runner.invoke(app, ["status", "--helm", str(helm.path), "-o", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {
        "release", "namespace", "revision", "status", "ready", "chart", "app_version", "updated",
        "description", "pools", "router", "router_service", "endpoint", "events",
    }  # fmt: skip
    assert (report["release"], report["namespace"], report["revision"]) == ("pd", "default", 1)
    assert (report["status"], report["ready"], report["chart"]) == (
        "deployed",
        True,
        "pd-stack-0.1.0",
    )
    assert [(p["name"], p["role"], p["ready"], p["replicas"]) for p in report["pools"]] == [
        ("llama-prefill", "prefill", 1, 1),
        ("llama-decode", "decode", 1, 1),
    ]
    (pod,) = report["pools"][0]["pods"]
    assert pod["ready"] and pod["phase"] == "Running" and pod["restarts"] == 0
    assert (
        report["router"]["ready"] == 1 and report["router"]["deployment"] == "pd-deployment-router"
    )
    service = report["router_service"]
    assert (service["name"], service["type"], service["ports"]) == (
        "pd-router-service",
        "ClusterIP",
        [80],
    )
    assert report["endpoint"] == "http://pd-router-service.default.svc.cluster.local:80"
    assert report["events"] == []


def test_status_shows_why_engine_pods_are_pending(kube: KubeAPIDouble, helm4: Helm) -> None:
    kube.gpus = 0
    install(helm4)
    result = runner.invoke(app, ["status", "--helm", str(helm4.path), "-o", "json"])
    assert result.exit_code == 1, result.output  # the release is there, not every pod Ready
    report = json.loads(result.stdout)
    assert report["status"] == "deployed" and not report["ready"]
    for pool in report["pools"]:
        assert pool["ready"] == 0 and not pool["rolled_out"]
        assert pool["pods"][0]["reason"] == "Unschedulable"
    assert report["router"]["ready"] == 1
    scheduling = [e for e in report["events"] if e["reason"] == "FailedScheduling"]
    assert {e["name"].rsplit("-", 2)[0] for e in scheduling} == {
        "pd-llama-prefill-deployment-vllm",
        "pd-llama-decode-deployment-vllm",
    }
    assert all("Insufficient nvidia.com/gpu" in e["message"] for e in scheduling)
    text = runner.invoke(app, ["status", "--helm", str(helm4.path)])
    assert text.exit_code == 1
    assert "Insufficient nvidia.com/gpu" in text.stdout
    assert "ready: no" in text.stdout


def test_status_text_of_a_healthy_release(kube: KubeAPIDouble, helm4: Helm) -> None:
    install(helm4)
    result = runner.invoke(app, ["status", "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    assert "release pd (namespace default): revision 1, deployed" in result.stdout
    assert "endpoint http://pd-router-service.default.svc.cluster.local:80" in result.stdout
    assert "ready: yes, every pod is Ready" in result.stdout


def test_status_of_an_unknown_release(kube: KubeAPIDouble, helm4: Helm) -> None:
    result = runner.invoke(app, ["status", "--release", "nope", "--helm", str(helm4.path)])
    assert result.exit_code == 1
    assert "release 'nope' not found in namespace 'default'" in result.stderr


def test_status_without_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 3
    assert "no cluster configured" in result.stderr
