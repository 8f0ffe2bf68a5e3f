"""The PD canary (PD025): something to prove and somewhere to send its probe."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.rules.deployment import Deployment, as_dict
from pdctl.rules.registry import Issue, rule


@rule(
    "PD025",
    "the canary has a PD pair to prove and a router to send its probe to (canary)",
    explain=(
        "the canary (`canary.enabled`) needs a prefill and a decode pool, and a router Service "
        "or `canary.routerUrl` (the llm-d router in gateway mode renders no router Service)"
    ),
)
def canary(deployment: Deployment) -> Iterator[Issue]:
    settings = as_dict(deployment.values.get("canary"))
    if not settings.get("enabled"):
        return
    for role in ("prefill", "decode"):
        if not deployment.by_role(role):
            yield Issue(
                ("canary", "enabled"),
                f"canary.enabled: the release has no {role} pool, so the canary has no PD pair "
                "to prove",
                "add prefill and decode pools to servingEngineSpec.modelSpec, or disable the "
                "canary",
            )
            return
    gateway = (
        deployment.router_type == "llm-d"
        and as_dict(deployment.router.get("llmd")).get("mode") == "gateway"
    )
    if not settings.get("routerUrl") and (not deployment.router_enabled or gateway):
        yield Issue(
            ("canary", "routerUrl"),
            "canary.routerUrl is required when the chart renders no router Service "
            "(routerSpec.enableRouter false, or routerSpec.llmd.mode gateway)",
            "give the URL the canary's probe should go to",
        )
