"""Production settings that deploy but do not work as meant (warnings): a PodDisruptionBudget that
no node drain can ever satisfy, and a NetworkPolicy that shuts out the release's own Prometheus or
Gateway. (A startup probe too short for a known model is PD110, in rules/model_fit.py.)"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment, as_dict, as_int
from pdctl.rules.registry import Issue, rule


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
    explain=(
        "a PodDisruptionBudget (`modelSpec[].pdb`, `routerSpec.pdb`) that lets no pod be "
        "evicted (`minAvailable` of all the pods, `maxUnavailable` 0), so node drains wait "
        "forever"
    ),
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
    explain=(
        "the engines' NetworkPolicy (`servingEngineSpec.networkPolicy`) admits the clients "
        "the release sets up: Prometheus when a monitor is on (`metricsFrom`), the Gateway of"
        " the llm-d router's gateway mode (`ingress`)"
    ),
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
