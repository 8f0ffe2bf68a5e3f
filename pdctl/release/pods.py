"""What a release consists of: its engine pools and router as groups of pods, selected as the
chart labels them (pdctl.naming), and whether each group is rolled out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pdctl import manifests, naming
from pdctl.cluster import Cluster, Pod, connect

ROLES = naming.ROLES
ROUTER = "router"


@dataclass
class Group:
    """An engine pool, or the router: its workload and the pods of it observed. A multi-node
    pool (a LeaderWorkerSet, or a role of the DisaggregatedSet) has `nodes` pods per replica,
    leader and workers; it is rolled out when all of them are Ready."""

    name: str  # the pool's name, or "router"
    role: str  # prefill, decode, both, or router
    deployment: str  # the workload's name (a Deployment, LeaderWorkerSet or DisaggregatedSet)
    replicas: int
    ready: int = 0
    rolled_out: bool = False
    pods: list[Pod] = field(default_factory=list)
    kind: str = "Deployment"
    nodes: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "kind": self.kind,
            "deployment": self.deployment,
            "replicas": self.replicas,
            "nodes": self.nodes,
            "ready": self.ready,
            "rolled_out": self.rolled_out,
            "pods": [pod.as_dict() for pod in self.pods],
        }


def is_hook(obj: manifests.Manifest) -> bool:
    return "helm.sh/hook" in (obj.get("metadata", {}).get("annotations") or {})


def groups_of(objects: Sequence[manifests.Manifest], names: naming.Release) -> list[Group]:
    """The engine pools and the router among rendered (or stored) objects, pools first."""
    summary = manifests.summarize(list(objects))
    groups = [
        Group(
            pool.name,
            pool.role,
            _workload(names, pool),
            pool.replicas,
            kind=pool.kind,
            nodes=pool.nodes,
        )
        for pool in summary.pools
    ]
    if summary.router:
        router = manifests.find(list(objects), "Deployment", summary.router["name"])
        groups.append(
            Group(ROUTER, ROUTER, summary.router["name"], int(router["spec"].get("replicas", 1)))
        )
    return groups


def _workload(names: naming.Release, pool: manifests.RenderedPool) -> str:
    if pool.kind == "DisaggregatedSet":
        return names.disaggregated_set
    if pool.kind == "LeaderWorkerSet":
        return names.pool_leader_worker_set(pool.name)
    return names.pool_deployment(pool.name)


def selector(names: naming.Release, group: Group) -> dict[str, str]:
    if group.role == ROUTER:
        return names.router_selector
    if group.kind != "Deployment":
        return names.pool_pods_selector(group.name)  # leaders and workers
    return names.pool_selector(group.name)


def rolled_out(kube: Cluster, namespace: str, group: Group, pods: list[Pod]) -> bool:
    """A Deployment by its own status; a multi-node pool when every pod of every group, leader
    and workers, is there and Ready (pdctl reads no LeaderWorkerSet status)."""
    if group.kind == "Deployment":
        deployment = kube.deployment(namespace, group.deployment)
        return bool(deployment and deployment.rolled_out)
    live = [pod for pod in pods if not pod.terminating]
    return len(live) == group.replicas * group.nodes and all(pod.ready for pod in live)


def release_pods(release: str, namespace: str) -> dict[str, list[Pod]]:
    """The pods of a release: "router", and the engine pods of each PD role ("prefill",
    "decode", "both"), selected as the chart labels them (pdctl.naming). Terminating pods are left
    out; Ready pods come first, then by name."""

    kube = connect()
    names = naming.Release(release, namespace)
    selectors = {ROUTER: names.router_selector}
    selectors.update({role: names.role_selector(role) for role in ROLES})
    found = {}
    for key, selector in selectors.items():
        pods = [pod for pod in kube.pods(namespace, selector) if not pod.terminating]
        found[key] = sorted(pods, key=lambda p: (not p.ready, p.name))
    return found
