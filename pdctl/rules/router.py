"""Rules on the router: PD routing needs both roles, and its labels name the right pools."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.rules.model import Deployment
from pdctl.rules.registry import Issue, rule
from pdctl.validation.findings import Severity

LABEL_FLAGS = {"--prefill-model-labels": "prefill", "--decode-model-labels": "decode"}


def label_args(args: list[object]) -> Iterator[tuple[int, str, list[str]]]:
    """(index in extraArgs, role, labels) for each --prefill/--decode-model-labels argument."""
    for index, arg in enumerate(args):
        flag, _, inline = str(arg).partition("=")
        if flag not in LABEL_FLAGS:
            continue
        if inline:
            yield index, LABEL_FLAGS[flag], [x for x in inline.split(",") if x]
        elif index + 1 < len(args):
            text = str(args[index + 1])
            yield index + 1, LABEL_FLAGS[flag], [x for x in text.split(",") if x]
        else:
            yield index, LABEL_FLAGS[flag], []


@rule("PD008", "router --prefill/--decode-model-labels name existing pools of the right role")
def router_labels(deployment: Deployment) -> Iterator[Issue]:
    if not deployment.router_enabled:
        return
    args = deployment.router.get("extraArgs")
    args = args if isinstance(args, list) else []
    seen_roles = set()
    for index, role, labels in label_args(args):
        seen_roles.add(role)
        path = ("routerSpec", "extraArgs", index)
        if not labels:
            yield Issue(path, f"--{role}-model-labels has no value", "name the pools, e.g. a,b")
        for label in labels:
            pools = deployment.by_name(label)
            if not pools:
                known = ", ".join(p.name for p in deployment.by_role(role)) or "none"
                yield Issue(
                    path,
                    f"--{role}-model-labels names {label!r}, which is not a pool of this release",
                    f"{role} pools: {known}",
                )
            elif pools[0].role != role:
                yield Issue(
                    path,
                    f"--{role}-model-labels names {label!r}, a {pools[0].role} pool",
                    f"list {role} pools here",
                )
    pd, _ = deployment.pd_routing
    if deployment.router.get("routingLogic") == "disaggregated_prefill" and deployment.pools:
        for role in ("prefill", "decode"):
            if role not in seen_roles:
                yield Issue(
                    ("routerSpec", "extraArgs"),
                    f"routingLogic disaggregated_prefill without --{role}-model-labels: the "
                    f"router cannot find the {role} pools",
                    f"add '--{role}-model-labels', '<{role} pool names>' to extraArgs",
                )


@rule("PD009", "PD routing needs both a prefill and a decode pool")
def pd_routing_has_both_roles(deployment: Deployment) -> Iterator[Issue]:
    pd, path = deployment.pd_routing
    if not deployment.router_enabled or not deployment.pools:
        return
    roles = {pool.role for pool in deployment.pools}
    if pd and not {"prefill", "decode"} <= roles:
        present = ", ".join(sorted(roles))
        yield Issue(
            path,
            f"PD routing is on but the pools have only role(s) {present}",
            "add a prefill (kv_producer) and a decode (kv_consumer) pool, or use roundrobin",
        )
    elif not pd and {"prefill", "decode"} <= roles:
        yield Issue(
            path if path != ("routerSpec",) else ("routerSpec", "routingLogic"),
            "prefill and decode pools exist but the router does not route PD "
            f"(routingLogic {deployment.router.get('routingLogic', 'roundrobin')!r})",
            "set routerSpec.routingLogic: disaggregated_prefill",
            Severity.error,
        )
