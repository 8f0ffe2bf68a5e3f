"""The engine rollout that keeps helm's own --wait truthful: a one-replica pool is
replaced with Recreate, a larger one rolls with maxSurge 0 / maxUnavailable 1, and what helm's
wait makes of it against the Kubernetes API server test double (tests/doubles/kube_api.py):
Helm 3's legacy check (readyReplicas >= replicas - maxUnavailable) now fails when the engine
pods are Pending, where the old rollout (maxUnavailable 1 on one replica) let it succeed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import manifests
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble, serving
from tests.helpers import ASSETS, CHART, TUTORIAL_VALUES, Render, write_values

runner = CliRunner()
XPYD = ASSETS / "values-18-nixl-xpyd.yaml"  # two prefill replicas, one decode
OLD_STRATEGY = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def strategies(objects: list[manifests.Manifest]) -> dict[str, dict[str, object]]:
    return {
        obj["metadata"]["name"]: obj["spec"]["strategy"]
        for obj in objects
        if obj["kind"] == "Deployment" and "vllm" in obj["metadata"]["name"]
    }


def test_default_rollout_per_pool_size(rendered: Render, helm: Helm) -> None:
    assert strategies(rendered(helm, XPYD)) == {
        "pd-llama-prefill-deployment-vllm": OLD_STRATEGY,  # two replicas: one at a time
        "pd-llama-decode-deployment-vllm": {"type": "Recreate"},
    }


def test_a_set_strategy_applies_to_every_pool(helm4: Helm, tmp_path: Path) -> None:
    values = manifests.parse(TUTORIAL_VALUES.read_text())[0]
    values["servingEngineSpec"]["strategy"] = OLD_STRATEGY
    run = helm4.run(["template", "pd", str(CHART), "-f", str(write_values(tmp_path, values))])
    assert run.returncode == 0, run.stderr
    assert list(strategies(manifests.parse(run.stdout)).values()) == [OLD_STRATEGY, OLD_STRATEGY]


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        (
            {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
            "rollingUpdate is set with type Recreate",
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}},
            "maxSurge and maxUnavailable are both 0",
        ),
    ],
)
def test_strategies_kubernetes_refuses_are_refused(
    tmp_path: Path, helm4: Helm, strategy: dict[str, object], message: str
) -> None:
    values = manifests.parse(TUTORIAL_VALUES.read_text())[0]
    values["servingEngineSpec"]["strategy"] = strategy
    path = write_values(tmp_path, values)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and message in result.stdout, result.output
    run = helm4.run(["template", "pd", str(CHART), "-f", str(path)])
    assert run.returncode != 0 and "servingEngineSpec/strategy" in run.stderr


@pytest.fixture
def pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeAPIDouble]:
    """The API double with no GPU: the engine pods stay Pending, the router becomes Ready."""
    with serving(tmp_path, monkeypatch, gpus=0) as api:
        yield api


def plain_install(helm: Helm, wait: list[str], *extra: str) -> tuple[int, str]:
    run = helm.run(
        ["upgrade", "--install", "pd", str(CHART), "-f", str(TUTORIAL_VALUES), "--timeout", "2s"]
        + wait
        + list(extra)
    )
    return run.returncode, run.stderr


@pytest.mark.parametrize("major", [3, 4])
def test_plain_helm_wait_fails_when_engine_pods_are_pending(
    pending: KubeAPIDouble, helm3: Helm, helm4: Helm, major: int
) -> None:
    """Helm 3's --wait and Helm 4's --wait=legacy: the legacy ready check, now truthful."""
    helm, wait = (helm3, ["--wait"]) if major == 3 else (helm4, ["--wait=legacy"])
    code, stderr = plain_install(helm, wait)
    assert code != 0
    assert "context deadline exceeded" in stderr
    phases = {
        p["metadata"]["labels"].get("model", "router"): p["status"]["phase"]
        for p in pending.items("pods")
    }
    assert phases == {"llama-prefill": "Pending", "llama-decode": "Pending", "router": "Running"}


def test_the_old_rollout_let_helm3_report_success(pending: KubeAPIDouble, helm3: Helm) -> None:
    """Why the rollout changed: maxUnavailable 1 on a one-replica pool expects 0 ready pods."""
    old = [
        "--set", "servingEngineSpec.strategy.type=RollingUpdate",
        "--set", "servingEngineSpec.strategy.rollingUpdate.maxSurge=0",
        "--set", "servingEngineSpec.strategy.rollingUpdate.maxUnavailable=1",
    ]  # fmt: skip
    code, stderr = plain_install(helm3, ["--wait", "--atomic"], *old)
    assert code == 0, stderr
    assert all(
        p["status"]["phase"] == "Pending"
        for p in pending.items("pods")
        if "vllm" in p["metadata"]["name"]
    )
