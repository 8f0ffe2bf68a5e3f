"""Rules on values written for vLLM production-stack: features pd-stack does not serve are refused
by name, with the reason and what to use instead (helm/files/production-stack.yaml)."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl import production_stack
from pdctl.rules.deployment import Deployment
from pdctl.rules.registry import Issue, rule


@rule(
    "PD019",
    "production-stack features pd-stack does not serve are refused by name",
    explain=(
        "production-stack features pd-stack does not serve are refused by name with the "
        "reason and what to use instead "
        "(docs/production-stack.md); with `routerSpec.type: "
        "vllm-router`, `lmcache-proxy` or `llm-d`, so are the production-stack router's own "
        "keys (`staticBackends`, `rootPath`, `prefixMinMatchLength`, the LMCache controller "
        "keys)"
    ),
)
def unsupported_features(deployment: Deployment) -> Iterator[Issue]:
    router = deployment.router_type
    for key in production_stack.load(deployment.chart_dir).values():
        if key.status == "refused":
            for path in production_stack.used(deployment.values, key):
                yield Issue(
                    path, f"production-stack's {key.name} is not supported by pd-stack: {key.note}"
                )
        # Keys of the production-stack router's own flags, with another router type.
        elif router in key.refused_by:
            for path in production_stack.used(deployment.values, key):
                yield Issue(
                    path,
                    f"production-stack's {key.name} is not supported with routerSpec.type "
                    f"{router}: {key.refused_by[router]}",
                )
