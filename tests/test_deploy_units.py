"""The pieces of pdctl deploy/status/uninstall that need no cluster: helm's command lines per
major, helm's errors, timeouts, the per-object diff, the groups of a render, the evidence text."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pdctl import helm as helm_mod
from pdctl import manifests, naming
from pdctl.cli._release_view import change_lines, evidence, why
from pdctl.cluster import Event, Pod
from pdctl.errors import EnvironmentProblem, InputError, UsageError
from pdctl.helm import Helm, ReleaseNotFound, UpgradeRequest
from pdctl.release import Change, Group, diff_objects, groups_of, parse_timeout
from tests.helpers import TUTORIAL_VALUES, Render

REQUEST = UpgradeRequest(
    release="pd",
    chart=Path("/chart"),
    namespace="serving",
    values_files=(Path("/tmp/values.json"),),
    timeout=600,
    create_namespace=True,
)


def test_upgrade_command_per_helm_major() -> None:
    common = [
        "upgrade", "--install", "--namespace", "serving",
        "--values", "/tmp/values.json", "--create-namespace", "--timeout", "600s",
    ]  # fmt: skip
    positional = ["--", "pd", "/chart"]
    assert REQUEST.args(4) == [*common, "--wait=watcher", "--rollback-on-failure", *positional]
    assert REQUEST.args(3) == [*common, "--atomic", "--wait", *positional]


def test_rollback_and_uninstall_commands(helm3: Helm, helm4: Helm) -> None:
    assert helm_mod.rollback_args(helm4, "pd", "ns", 2, 60)[-4] == "--wait=watcher"
    assert helm_mod.rollback_args(helm3, "pd", "ns", 2, 60) == [
        "rollback", "--namespace", "ns", "--timeout", "60s", "--wait", "--", "pd", "2",
    ]  # fmt: skip
    assert helm_mod.uninstall_args(helm3, "pd", "ns", 60)[-2:] == ["--", "pd"]


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ("Error: release: not found", ReleaseNotFound),
        (
            'Error: Kubernetes cluster unreachable: Get "http://localhost:8080/version": dial '
            "tcp 127.0.0.1:8080: connect: connection refused",
            EnvironmentProblem,
        ),
        (
            'Error: kubernetes cluster unreachable: Get "https://x/version": i/o timeout',
            EnvironmentProblem,
        ),
        (
            'Error: secrets is forbidden: User "dev" cannot list resource "secrets" in API '
            'group ""',
            EnvironmentProblem,
        ),
        (
            'Error: UPGRADE FAILED: Deployment.apps "x" is invalid: spec.strategy.rollingUpdate: '
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
            InputError,
        ),
    ],
)
def test_helm_failures_are_classified(stderr: str, error: type[Exception]) -> None:
    found = helm_mod.failure(subprocess.CompletedProcess([], 1, "", stderr), "helm x")
    assert type(found) is error


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("20m", 1200), ("1h30m", 5400), ("1m30s", 90), ("45", 45)]
)
def test_timeouts(text: str, seconds: int) -> None:
    assert parse_timeout(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "0", "0s", "5d", "1.5m"])
def test_bad_timeouts_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_timeout(text)


def test_diff_per_object_with_secrets_redacted(rendered: Render, helm4: Helm) -> None:
    before = rendered(helm4, TUTORIAL_VALUES)
    after = rendered(helm4, TUTORIAL_VALUES)
    deployment = manifests.find(after, "Deployment", "pd-llama-decode-deployment-vllm")
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    secret = manifests.find(after, "Secret", "pd-secrets")
    secret["data"] = dict.fromkeys(secret["data"], "c2VjcmV0LXRva2Vu")
    after = [o for o in after if o["metadata"]["name"] != "pd-llama-prefill-engine-service"]
    changes = {(c.kind, c.name): c for c in diff_objects(before, after)}
    assert {key: c.change for key, c in changes.items()} == {
        ("Deployment", "pd-llama-decode-deployment-vllm"): "changed",
        ("Secret", "pd-secrets"): "changed",
        ("Service", "pd-llama-prefill-engine-service"): "removed",
    }
    assert (
        "+        image: vllm/vllm-openai:v0.11.0"
        in changes[("Deployment", "pd-llama-decode-deployment-vllm")].diff
    )
    secret_diff = changes[("Secret", "pd-secrets")].diff
    assert "c2VjcmV0LXRva2Vu" not in secret_diff and "<redacted sha256:" in secret_diff
    # Hooks are not part of a release's manifest: never a change.
    assert all(c.kind != "Pod" for c in diff_objects([], before))


def test_groups_of_a_render(rendered: Render, helm4: Helm) -> None:
    groups = groups_of(rendered(helm4, TUTORIAL_VALUES), naming.Release("pd"))
    assert [(g.name, g.role, g.deployment, g.replicas) for g in groups] == [
        ("llama-prefill", "prefill", "pd-llama-prefill-deployment-vllm", 1),
        ("llama-decode", "decode", "pd-llama-decode-deployment-vllm", 1),
        ("router", "router", "pd-deployment-router", 1),
    ]


def test_evidence_text() -> None:
    group = Group("llama-decode", "decode", "pd-llama-decode-deployment-vllm", 1)
    pending = Pod(
        "pd-a", {}, "Pending", False, 0, "Unschedulable",
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        events=["FailedScheduling: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."],
    )  # fmt: skip
    crash = Pod(
        "pd-b", {}, "Running", False, 5, "CrashLoopBackOff", "last exit code 1 (Error)",
        logs=["ValueError: bad --kv-transfer-config"],
    )  # fmt: skip
    assert why(pending) == "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    assert evidence([(group, pending), (group, crash)]) == [
        "  pd-a (llama-decode, decode): Pending, restarts 0, Unschedulable: 0/4 nodes are "
        "available: 4 Insufficient nvidia.com/gpu.",
        "    event FailedScheduling: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        "  pd-b (llama-decode, decode): Running, restarts 5, CrashLoopBackOff: last exit code 1 "
        "(Error)",
        "    last log lines:",
        "      | ValueError: bad --kv-transfer-config",
    ]


def test_change_lines() -> None:
    added = [Change("Deployment", "a", "added"), Change("Service", "b", "added")]
    assert change_lines("install", "pd", added) == [
        "install of release pd: 2 objects (Deployment 1, Service 1)"
    ]
    assert change_lines("upgrade", "pd", []) == ["upgrade of release pd: no object changes"]
    lines = change_lines("upgrade", "pd", [Change("Service", "b", "changed", "-a\n+b")])
    assert lines == [
        "upgrade of release pd: 1 object(s) change",
        "  ~ Service b (changed)",
        "      -a",
        "      +b",
    ]


def test_live_view_draws_a_table_on_a_terminal() -> None:
    from rich.console import Console

    from pdctl.cli._release_view import LiveView

    view = LiveView("pd")
    view.console = Console(force_terminal=True, width=160, record=True, file=open(os.devnull, "w"))
    pod = Pod("pd-a", {}, "Pending", False, 0, "Unschedulable", "1 Insufficient nvidia.com/gpu.")
    with view:
        view.progress([Group("llama-prefill", "prefill", "d", 1, pods=[pod])], 3.0)
    text = view.console.export_text()
    assert "release pd: waiting for every pod to be Ready (3s)" in text
    assert "Unschedulable: 1 Insufficient nvidia.com/gpu." in text


class _PodsOnly:
    """A stand-in for pdctl.cluster.Cluster (a test double): the pods each selector finds."""

    def __init__(self, pods: dict[str, list[Pod]]) -> None:
        self._pods = pods
        self.selectors: list[dict[str, str]] = []

    def events(self, namespace: str) -> list[object]:
        return []

    def pod_list(self, namespace: str, selector: dict[str, str]) -> tuple[list[Pod], str]:
        self.selectors.append(selector)
        return self._pods.get(selector.get("model", "router"), []), "1"

    def deployment(self, namespace: str, name: str) -> None:
        raise AssertionError(f"a multi-node pool has no Deployment {name} to read")

    def logs(self, namespace: str, pod: str, lines: int) -> list[str]:
        return []


@pytest.mark.parametrize("asset", ["values-22-llama405b-multinode", "values-24-disaggregatedset"])
def test_multi_node_pools_are_ready_when_every_pod_of_every_group_is(
    rendered: Render, helm4: Helm, asset: str
) -> None:
    """A LeaderWorkerSet or DisaggregatedSet pool: its leaders and workers are its pods (selected
    without the component label) and it is rolled out when replicas x nodes of them are Ready."""
    from pdctl.release import Watch
    from tests.helpers import ASSETS

    names = naming.Release("pd")
    groups = [
        g for g in groups_of(rendered(helm4, ASSETS / f"{asset}.yaml"), names) if g.role != "router"
    ]
    assert groups and all(g.kind != "Deployment" for g in groups)
    group = groups[0]
    wanted = group.replicas * group.nodes

    def pods(ready: int) -> list[Pod]:
        return [Pod(f"{group.name}-{i}", {}, "Running", i < ready, 0) for i in range(wanted)]

    for ready, rolled_out in ((wanted - 1, False), (wanted, True)):
        kube = _PodsOnly({group.name: pods(ready)})
        observed = Watch(kube, names, [group]).observe()  # type: ignore[arg-type]
        assert (observed[0].ready, observed[0].rolled_out) == (ready, rolled_out)
        assert kube.selectors == [names.pool_pods_selector(group.name)]
    short = _PodsOnly({group.name: pods(wanted)[:-1]})  # a worker not created yet
    assert not Watch(short, names, [group]).observe()[0].rolled_out  # type: ignore[arg-type]


class _History:
    """A stand-in for pdctl.cluster.Cluster (a test double): no pod at any look, and a history of
    pod changes since the first one."""

    def __init__(self, changes: list[tuple[str, Pod]]) -> None:
        self.changes = changes
        self.since: list[str] = []

    def events(self, namespace: str) -> list[Event]:
        warning = ("Warning", "FailedScheduling", "1 Insufficient gpu", "Pod", "pd-p-1", 1, None)
        return [Event(*warning)]

    def pod_list(self, namespace: str, selector: dict[str, str]) -> tuple[list[Pod], str]:
        return [], "41"

    def pod_changes(
        self, namespace: str, selector: dict[str, str], since: str
    ) -> list[tuple[str, Pod]]:
        assert selector == naming.Release("pd").pods_selector
        self.since.append(since)
        return self.changes

    def deployment(self, namespace: str, name: str) -> None:
        return None

    def logs(self, namespace: str, pod: str, lines: int) -> list[str]:
        return []


def test_a_stuck_pod_no_look_saw_is_evidence_from_the_history() -> None:
    """However late the looks come, the pods' history since the first one is replayed: a pod
    the rollback deleted is reported as it was when last stuck, with its warnings, though it ran
    in between (the rollback freed its GPUs); a pod that is Ready at the end is not, nor a pod of
    no watched group."""
    from pdctl.release import Watch

    names = naming.Release("pd")
    labels = names.pool_selector("p")
    group = Group("p", "prefill", "pd-p-deployment-vllm", 1)
    unschedulable = Pod("pd-p-1", labels, "Pending", False, 0, "Unschedulable", "1 Insufficient")
    changes = [
        ("ADDED", Pod("pd-p-1", labels, "Pending", False, 0)),
        ("MODIFIED", unschedulable),
        ("ADDED", Pod("pd-p-2", labels, "Pending", False, 0, "Unschedulable", "1 Insufficient")),
        ("MODIFIED", Pod("pd-p-1", labels, "Running", True, 0)),
        ("MODIFIED", Pod("pd-p-2", labels, "Running", True, 0)),
        ("MODIFIED", Pod("pd-p-1", labels, "Running", True, 0, "Terminating", terminating=True)),
        ("DELETED", Pod("pd-p-1", labels, "Running", True, 0, "Terminating", terminating=True)),
        ("ADDED", Pod("pd-other-1", {**labels, naming.POOL: "other"}, "Pending", False, 0)),
    ]
    kube = _History(changes)
    watch = Watch(kube, names, [group])  # type: ignore[arg-type]
    watch.observe()
    assert watch.stuck() == []  # no look saw a pod
    watch.replay()
    assert kube.since == ["41"]  # from the first look's list on
    ((found_group, pod),) = watch.stuck()
    assert (found_group.name, pod.name, pod.reason) == ("p", "pd-p-1", "Unschedulable")
    assert pod.events == ["FailedScheduling: 1 Insufficient gpu"]
