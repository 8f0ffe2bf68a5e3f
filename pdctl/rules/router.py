"""Warnings on the router. That it routes PD when there are PD pools, speaks their connector and
finds them is the chart's check: helm/templates/_checks-router.tpl."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment
from pdctl.rules.registry import Issue, rule


@rule(
    "PD104",
    "the production-stack PD router keeps one endpoint per role",
    Severity.warning,
    explain=(
        "the production-stack router's `disaggregated_prefill` with more than one pod per "
        "role (it uses one endpoint per role: no balancing, no failover)"
    ),
)
def single_endpoint_router(deployment: Deployment) -> Iterator[Issue]:
    """production-stack's disaggregated_prefill holds one client session per role, bound to the
    last discovered endpoint: extra prefill or decode pods get no traffic and no failover
    (router src/vllm_router/service_discovery.py::initialize_client_sessions)."""
    if deployment.router_type != "production-stack" or not deployment.routes_pd:
        return
    for role in ("prefill", "decode"):
        pods = sum(pool.replicas for pool in deployment.by_role(role))
        if pods > 1:
            yield Issue(
                ("routerSpec", "routingLogic"),
                f"{pods} {role} pods, but routingLogic disaggregated_prefill sends every "
                f"request to one {role} endpoint: the others get no traffic and no failover",
                "use routerSpec.type: vllm-router (with NixlConnector) for more than one pod "
                "per role",
            )
