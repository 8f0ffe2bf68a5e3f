"""Rules on values written for vLLM production-stack: features pd-stack does not serve are refused
by name, with the reason and what to use instead (helm/files/production-stack.yaml)."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl import production_stack
from pdctl.rules.model import Deployment
from pdctl.rules.registry import Issue, rule


@rule("PD019", "production-stack features pd-stack does not serve are refused by name")
def unsupported_features(deployment: Deployment) -> Iterator[Issue]:
    for key in production_stack.load(deployment.chart_dir).values():
        if key.status != "refused":
            continue
        for path in production_stack.used(deployment.values, key):
            yield Issue(
                path, f"production-stack's {key.name} is not supported by pd-stack: {key.note}"
            )
