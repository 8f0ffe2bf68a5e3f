"""Production settings that deploy but do not work as meant (warnings): a startup probe that
restarts an engine before a known model can load, a PodDisruptionBudget that no node drain can
ever satisfy, and a NetworkPolicy that shuts out the release's own Prometheus or Gateway."""

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
        and llmd.get("mode") == "gateway"
    ):
        yield Issue(
            where,
            "the llm-d router's gateway mode sends requests from your Gateway's pods straight to "
            "the engine pods, which the NetworkPolicy does not admit",
            "add your Gateway's pods or namespace in networkPolicy.ingress",
        )
