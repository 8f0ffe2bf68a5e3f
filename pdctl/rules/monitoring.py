"""Monitors that scrape what they name, once (PD024): the ServiceMonitors and PodMonitors of the
engines and the router."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.rules.deployment import Deployment, as_dict
from pdctl.rules.registry import Issue, rule


@rule(
    "PD024",
    "a monitor scrapes what it names, once (serviceMonitor, podMonitor)",
    explain=(
        "a monitor scrapes what it names, once: not both `serviceMonitor` and `podMonitor` "
        "for the engines or for the router; no router monitor for LMCache's PD proxy (it "
        "exports no metrics)"
    ),
)
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
