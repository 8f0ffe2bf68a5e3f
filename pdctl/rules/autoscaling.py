"""Autoscalers that can own the replicas they are given (PD023): KEDA ScaledObjects per pool
(modelSpec[].keda, pd-stack.kedaTriggers in the chart) and the router's HorizontalPodAutoscaler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pdctl.rules.deployment import Deployment, as_dict, as_int
from pdctl.rules.registry import Issue, rule


def _has_default_trigger(role: str, keda: dict[str, Any]) -> bool:
    """Whether pd-stack.kedaTriggers renders any trigger for a pool of `role`."""
    waiting, kv = keda.get("waitingRequests"), keda.get("kvCacheUsage")  # null: the default
    return bool(
        (5 if waiting is None else waiting)
        or (role != "prefill" and (0.8 if kv is None else kv))
        or (role != "decode" and keda.get("ttftSeconds"))
    )


def _min_replicas(keda: dict[str, Any]) -> int:
    """The minReplicaCount pd-stack.kedaMinReplicas renders: as given, else 1."""
    return as_int(keda.get("minReplicaCount"), 1)


def _reaches_zero(keda: dict[str, Any]) -> str | None:
    """The setting that lets a ScaledObject take its pool to zero replicas, or None."""
    if keda.get("idleReplicaCount") is not None:
        return f"idleReplicaCount {as_int(keda['idleReplicaCount'], 0)}"
    return "minReplicaCount 0" if _min_replicas(keda) == 0 else None


def _keda_bounds(keda: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """KEDA's CheckReplicaCountBoundsAreValid (v2.20.2): (key, problem) for each violated bound.
    The chart renders minReplicaCount 1 when it is unset (KEDA's own default is 0)."""
    low = max(_min_replicas(keda), 1)  # KEDA counts a minimum of 0 as 1 here
    high = as_int(keda.get("maxReplicaCount"), 100)
    if low > high:
        yield (
            "minReplicaCount",
            f"minReplicaCount {low} is above maxReplicaCount {high} (KEDA's default maximum is "
            "100); KEDA refuses the ScaledObject",
        )
    if keda.get("idleReplicaCount") is not None and as_int(keda["idleReplicaCount"], 0) >= low:
        yield (
            "idleReplicaCount",
            f"idleReplicaCount {as_int(keda['idleReplicaCount'], 0)} must be below the minimum of "
            f"{low} (minReplicaCount; 0 counts 1); KEDA refuses the ScaledObject",
        )


@rule(
    "PD023",
    "an autoscaler can own the replicas it is given (modelSpec[].keda, the router's HPA)",
    explain=(
        "an autoscaler can own the replicas it is given: no KEDA ScaledObject "
        "(`modelSpec[].keda`) on a pool that must keep one replica (a 1P1D connector, a "
        "decode pool behind LMCache's PD proxy) or on a DisaggregatedSet role that is not "
        "`scalingMode: External`; KEDA's replica bounds (min <= max, idle below min); at "
        "least one trigger; no scale to zero (`minReplicaCount: 0`, `idleReplicaCount`) on "
        "the default triggers, which read only the pool's own engines; no router HPA "
        "(`routerSpec.autoscaling`) for the llm-d router or LMCache's PD proxy, none without "
        "`resources.requests.cpu`, min <= max"
    ),
)
def autoscalers(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        keda = as_dict(pool.spec.get("keda"))
        if not keda.get("enabled"):
            continue
        connector = pool.connector
        if (
            connector
            and connector.pairing == "1P1D"
            and all(pool.settings.get(flag) for flag in connector.pairing_when)
        ):
            yield Issue(
                pool.at("keda"),
                f"{connector.name} ({connector.settings_key}) pairs exactly one prefill pod with "
                "one decode pod, so its pools keep one replica",
                "remove keda, or use a connector that supports xPyD (NixlConnector)",
            )
        if (
            deployment.lmcache_proxy
            and pool.role == "decode"
            and connector
            and "lmcache-proxy" in connector.routers
        ):
            yield Issue(
                pool.at("keda"),
                "LMCache's PD proxy reaches each decode pool through its Service, where a "
                "sender's KV must land on the pod the request decodes on, so a decode pool keeps "
                "one replica",
                "remove keda (add decode pools for more)",
            )
        if deployment.kind(pool) == "DisaggregatedSet" and pool.spec.get("scalingMode") != (
            "External"
        ):
            yield Issue(
                pool.at("keda"),
                "the DisaggregatedSet sets this role's replicas itself",
                "set scalingMode: External, so that the ScaledObject scales the role's "
                "DisaggregatedSetRoleScaler",
            )
        for key, problem in _keda_bounds(keda):
            yield Issue(pool.at("keda", key), problem)
        zero = None if keda.get("triggers") else _reaches_zero(keda)
        if zero:
            yield Issue(
                pool.at("keda"),
                f"{zero} lets the pool go to zero replicas, and the default triggers read only its "
                "own engines' metrics, which then vanish: nothing would scale it back up",
                "keep minReplicaCount >= 1 without idleReplicaCount, or give triggers that see "
                "demand elsewhere",
            )
        if not keda.get("triggers") and not _has_default_trigger(pool.role, keda):
            yield Issue(
                pool.at("keda"),
                "the ScaledObject has no trigger",
                "give triggers, or leave waitingRequests above 0 (or set kvCacheUsage or "
                "ttftSeconds for the pool's role)",
            )
    router = deployment.router
    scaling = as_dict(router.get("autoscaling"))
    if not (deployment.router_enabled and scaling.get("enabled")):
        return
    where = ("routerSpec", "autoscaling")
    if deployment.router_type in ("llm-d", "lmcache-proxy"):
        why = (
            "the llm-d endpoint picker keeps the scheduling state: one active replica, the "
            "others stand by"
            if deployment.router_type == "llm-d"
            else "the LMCache senders report each transfer to the one proxy behind the router "
            "Service"
        )
        yield Issue(where, f"routerSpec.type {deployment.router_type} runs as one pod ({why})")
    if not as_dict(as_dict(router.get("resources")).get("requests")).get("cpu"):
        yield Issue(
            where,
            "the HPA scales on CPU utilization, a share of the container's CPU request, and "
            "routerSpec.resources.requests.cpu is not set",
            "set routerSpec.resources.requests.cpu",
        )
    low, high = as_int(scaling.get("minReplicas"), 1), as_int(scaling.get("maxReplicas"), 3)
    if low > high:
        yield Issue(
            (*where, "minReplicas"),
            f"minReplicas {low} is above maxReplicas {high}; Kubernetes refuses the "
            "HorizontalPodAutoscaler",
        )
