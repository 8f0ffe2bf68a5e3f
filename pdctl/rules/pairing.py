"""Warnings on how prefill and decode pools pair up. The pairing errors (roles, peers, ports,
model agreement) are the chart's: helm/templates/_checks-pairing.tpl and _checks-connectors.tpl.
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.naming import service_pool
from pdctl.rules.deployment import Deployment
from pdctl.rules.registry import Issue, rule

_ANY_ADDRESS = {"0.0.0.0", "::"}


@rule(
    "PD116",
    "a receiver of the tutorial's LMCache NIXL form listens on 0.0.0.0 or its own Service",
    Severity.warning,
    explain=(
        "a receiver's `lmcacheConfig.nixlPeerHost` (the tutorial's LMCache NIXL form) is "
        "0.0.0.0, :: or its own Service; another address is likely a copy of the sender's "
        "(was part of PD003)"
    ),
)
def receiver_listens(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        if not pool.legacy_nixl or pool.lmcache.get("nixlRole") != "receiver":
            continue
        host = pool.lmcache.get("nixlPeerHost")
        if host is None or str(host) in _ANY_ADDRESS:
            continue
        if service_pool(deployment.release, str(host)) != pool.name:
            yield Issue(
                pool.at("lmcacheConfig", "nixlPeerHost"),
                f"receiver {pool.name!r} listens on {str(host)!r}, which is neither 0.0.0.0 "
                "nor its own Service",
                "a receiver normally listens on 0.0.0.0",
            )
