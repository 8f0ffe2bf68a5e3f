"""Production settings that deploy but do not work as meant: a startup probe that restarts an engine
before a known model can load, and a PodDisruptionBudget that no node drain can ever satisfy."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pdctl.findings import Severity
from pdctl.rules.model import Deployment, as_dict, as_int
from pdctl.rules.registry import Issue, rule

# Kubernetes' defaults for a probe's periodSeconds and failureThreshold (core/v1 Probe).
_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _probe_seconds(probe: dict[str, Any]) -> int:
    """How long a startup probe lets a container start: initialDelaySeconds + periodSeconds x
    failureThreshold."""
    get = {k: as_int(probe.get(k), v) for k, v in _PROBE_DEFAULTS.items()}
    return get["initialDelaySeconds"] + get["periodSeconds"] * get["failureThreshold"]


@rule(
    "PD110",
    "a known model's engines get a startup budget long enough to download and load it",
    Severity.warning,
)
def startup_budget(deployment: Deployment) -> Iterator[Issue]:
    from pdctl.plan import catalog, sizing  # the catalogs load only when a pool exists

    shared = as_dict(as_dict(deployment.values.get("servingEngineSpec")).get("startupProbe"))
    for pool in deployment.pools:
        known = catalog.find_model(str(pool.spec.get("modelURL", "")))
        if known is None:
            continue
        probe = {**shared, **as_dict(pool.spec.get("startupProbe"))}
        allowed = _probe_seconds(probe)
        needed = sizing.startup_seconds(known.arch)
        if allowed >= needed:
            continue
        period = as_int(probe.get("periodSeconds"), _PROBE_DEFAULTS["periodSeconds"])
        delay = as_int(probe.get("initialDelaySeconds"), 0)
        threshold = math.ceil(max(needed - delay, 0) / max(period, 1))
        gib = sizing.checkpoint_bytes(known.arch) / sizing.GiB
        yield Issue(
            pool.at("startupProbe"),
            f"the startup probe gives {known.arch.name} {allowed // 60} minutes to start but its "
            f"checkpoint ({gib:.0f} GiB) needs about {math.ceil(needed / 60)} minutes to "
            f"download and load into an empty cache ({sizing.STARTUP_DOWNLOAD_MIB_S} MiB/s, plus "
            f"{sizing.STARTUP_BASE_S // 60} minutes); the kubelet would restart the engine first",
            f"startupProbe: {{failureThreshold: {threshold}}} (what `pdctl init` writes)",
        )


def _blocks(budget: dict[str, Any], pods: int) -> str | None:
    """Why a PodDisruptionBudget over `pods` pods lets no pod be evicted, or None."""
    minimum, maximum = budget.get("minAvailable"), budget.get("maxUnavailable")
    if minimum is None and maximum is None:
        return None
    if maximum is not None:
        value = str(maximum)
        if value in ("0", "0%"):
            return f"maxUnavailable {value} lets no pod go"
        if value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) * pods < 100:
            return f"maxUnavailable {value} of {pods} pod(s) rounds down to none"
        return None
    value = str(minimum)
    if value.endswith("%") and value[:-1].isdigit():
        keep = math.ceil(int(value[:-1]) * pods / 100)
    else:
        keep = as_int(minimum, 0)
    if keep >= pods:
        return f"minAvailable {value} keeps all {pods} pod(s)"
    return None


@rule(
    "PD111",
    "a PodDisruptionBudget leaves node drains room to evict a pod",
    Severity.warning,
)
def disruption_budget(deployment: Deployment) -> Iterator[Issue]:
    hint = "leave minAvailable and maxUnavailable unset (maxUnavailable 1), or add replicas"
    for pool in deployment.pools:
        budget = as_dict(pool.spec.get("pdb"))
        why = _blocks(budget, pool.replicas * pool.nodes) if budget.get("enabled") else None
        if why:
            yield Issue(
                pool.at("pdb"),
                f"{why}: every node drain (upgrades, autoscaler scale-down) would wait for "
                "this pool forever",
                hint,
            )
    router = deployment.router
    budget = as_dict(router.get("pdb"))
    if not (deployment.router_enabled and budget.get("enabled")):
        return
    replicas = as_int(router.get("replicaCount"), 1)
    if deployment.router_type == "llm-d" and replicas > 1:
        # cmd/epp/runner/health.go (v0.10.0): with leader election only the leader is Ready.
        why = f"of {replicas} llm-d EPP replicas only the elected leader is Ready, and no budget "
        why += "lets the only Ready pod go"
        hint = "remove routerSpec.pdb: a standby EPP takes over when the leader is evicted"
    else:
        why = _blocks(budget, replicas)
    if why:
        yield Issue(
            ("routerSpec", "pdb"),
            f"{why}: every node drain would wait for the router forever",
            hint,
        )


def _is_set(value: Any) -> bool:
    return value is not None


def _has_default_trigger(role: str, keda: dict[str, Any]) -> bool:
    """Whether pd-stack.kedaTriggers renders any trigger for a pool of `role`."""
    waiting = keda.get("waitingRequests", 5)
    kv = keda.get("kvCacheUsage", 0.8)
    return bool(
        (waiting if _is_set(waiting) else 5)
        or (role != "prefill" and (kv if _is_set(kv) else 0.8))
        or (role != "decode" and keda.get("ttftSeconds"))
    )


def _min_replicas(keda: dict[str, Any]) -> int:
    """The minReplicaCount pd-stack.kedaMinReplicas renders: as given, else 1."""
    return as_int(keda.get("minReplicaCount"), 1) if _is_set(keda.get("minReplicaCount")) else 1


def _reaches_zero(keda: dict[str, Any]) -> str | None:
    """The setting that lets a ScaledObject take its pool to zero replicas, or None."""
    if _is_set(keda.get("idleReplicaCount")):
        return f"idleReplicaCount {as_int(keda['idleReplicaCount'], 0)}"
    return "minReplicaCount 0" if _min_replicas(keda) == 0 else None


def _keda_bounds(keda: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """KEDA's CheckReplicaCountBoundsAreValid (v2.20.2): (key, problem) for each violated bound.
    The chart renders minReplicaCount 1 when it is unset (KEDA's own default is 0)."""
    low = max(_min_replicas(keda), 1)  # KEDA counts a minimum of 0 as 1 here
    high = as_int(keda.get("maxReplicaCount"), 100) if _is_set(keda.get("maxReplicaCount")) else 100
    if low > high:
        yield (
            "minReplicaCount",
            f"minReplicaCount {low} is above maxReplicaCount {high} (KEDA's default maximum is "
            "100); KEDA refuses the ScaledObject",
        )
    if _is_set(keda.get("idleReplicaCount")) and as_int(keda["idleReplicaCount"], 0) >= low:
        yield (
            "idleReplicaCount",
            f"idleReplicaCount {as_int(keda['idleReplicaCount'], 0)} must be below the minimum of "
            f"{low} (minReplicaCount; 0 counts 1); KEDA refuses the ScaledObject",
        )


@rule(
    "PD023", "an autoscaler can own the replicas it is given (modelSpec[].keda, the router's HPA)"
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


@rule("PD024", "a monitor scrapes what it names, once (serviceMonitor, podMonitor)")
def monitors(deployment: Deployment) -> Iterator[Issue]:
    for where in ("servingEngineSpec", "routerSpec"):
        spec = as_dict(deployment.values.get(where))
        on = [k for k in ("serviceMonitor", "podMonitor") if as_dict(spec.get(k)).get("enabled")]
        if len(on) == 2:
            yield Issue(
                (where, "podMonitor"),
                f"{where}.serviceMonitor and {where}.podMonitor are both enabled: Prometheus would "
                "scrape every pod twice and double every sum",
                "enable one of them",
            )
    if deployment.router_enabled and deployment.router_type == "lmcache-proxy":
        for kind in ("serviceMonitor", "podMonitor"):
            if as_dict(deployment.router.get(kind)).get("enabled"):
                yield Issue(
                    ("routerSpec", kind),
                    "routerSpec.type lmcache-proxy exports no Prometheus metrics (LMCache's PD "
                    "proxy serves only its completion routes)",
                    f"disable routerSpec.{kind}",
                )


@rule(
    "PD112",
    "the engines' NetworkPolicy admits the clients the release sets up",
    Severity.warning,
)
def network_policy(deployment: Deployment) -> Iterator[Issue]:
    engine = as_dict(deployment.values.get("servingEngineSpec"))
    policy = as_dict(engine.get("networkPolicy"))
    if not (deployment.engines_enabled and policy.get("enabled")) or policy.get("ingress"):
        return
    where = ("servingEngineSpec", "networkPolicy")
    scraped = [k for k in ("serviceMonitor", "podMonitor") if as_dict(engine.get(k)).get("enabled")]
    if scraped and not policy.get("metricsFrom"):
        yield Issue(
            where,
            f"servingEngineSpec.{scraped[0]} is enabled but the NetworkPolicy admits no "
            "Prometheus: the engines' /metrics would not be scraped",
            "add your Prometheus' pods or namespace in networkPolicy.metricsFrom",
        )
    llmd = as_dict(deployment.router.get("llmd"))
    if (
        deployment.router_enabled
        and deployment.router_type == "llm-d"
        and llmd.get("mode") == ("gateway")
    ):
        yield Issue(
            where,
            "the llm-d router's gateway mode sends requests from your Gateway's pods straight to "
            "the engine pods, which the NetworkPolicy does not admit",
            "add your Gateway's pods or namespace in networkPolicy.ingress",
        )
