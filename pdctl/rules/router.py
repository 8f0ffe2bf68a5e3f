"""Rules on the router: it routes PD when there are PD pools, speaks their connector, finds them.

Each error here has a twin in the chart (templates/_checks-router.tpl, same rule id
in its message).
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl import topology
from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment
from pdctl.rules.registry import Issue, rule

LABEL_FLAGS = topology.load().router_label_flags


def has_flag(args: list[object], flag: str) -> bool:
    """Whether a flag is among the arguments, alone or as --flag=value (pd-stack.extraArgsHave)."""
    return any(str(arg) == flag or str(arg).startswith(f"{flag}=") for arg in args)


def label_args(args: list[object]) -> Iterator[tuple[int, str, str, list[str]]]:
    """(index in extraArgs, flag, role, labels) for each --prefill/--decode-model-labels."""
    for index, arg in enumerate(args):
        flag, equals, inline = str(arg).partition("=")
        if flag not in LABEL_FLAGS:
            continue
        at, text = index, inline
        if not equals and index + 1 < len(args):
            at, text = index + 1, str(args[index + 1])
        yield at, flag, LABEL_FLAGS[flag], [label for label in text.split(",") if label]


@rule(
    "PD008",
    "router --prefill/--decode-model-labels name existing pools of the right role",
    explain=(
        "`--prefill-model-labels`/`--decode-model-labels` in the production-stack router's "
        "`routerSpec.extraArgs` (comma lists, `--flag=x` too) name existing pools of that "
        "role; `disaggregated_prefill` has both flags, and with your own `staticBackends` "
        "also `--static-model-labels`"
    ),
)
def router_labels(deployment: Deployment) -> Iterator[Issue]:
    if not deployment.router_enabled or deployment.router_type != "production-stack":
        return
    args = deployment.router.get("extraArgs")
    args = args if isinstance(args, list) else []
    seen_roles = set()
    for index, flag, role, labels in label_args(args):
        seen_roles.add(role)
        path = ("routerSpec", "extraArgs", index)
        if not labels:
            yield Issue(path, f"{flag} has no value", f"name the {role} pools, e.g. a,b")
        for label in labels:
            pools = deployment.by_name(label)
            if not pools:
                known = ", ".join(p.name for p in deployment.by_role(role)) or "none"
                yield Issue(
                    path,
                    f"{flag} names {label!r}, which is not a pool of this release",
                    f"{role} pools: {known}",
                )
            elif pools[0].role != role:
                _, _, decided_by = pools[0].role_source
                yield Issue(
                    path,
                    f"{flag} names {label!r}, a {pools[0].role} pool (by {decided_by})",
                    f"list {role} pools here, or, if the label is right, make {label!r} a "
                    f"{role} pool",
                )
    if (
        deployment.router.get("routingLogic") == "disaggregated_prefill"
        and deployment.router_discovery == "static"
        and deployment.router.get("staticBackends")
        and deployment.router.get("staticModels")
        and not has_flag(args, "--static-model-labels")
    ):
        yield Issue(
            ("routerSpec", "extraArgs"),
            "routingLogic disaggregated_prefill with routerSpec.staticBackends needs "
            "--static-model-labels: the router finds the prefill and decode backends by these "
            "labels",
            "add '--static-model-labels', '<pool name of each backend, comma separated>'",
        )
    if deployment.router.get("routingLogic") == "disaggregated_prefill" and deployment.pools:
        for role in ("prefill", "decode"):
            if role not in seen_roles:
                yield Issue(
                    ("routerSpec", "extraArgs"),
                    f"routingLogic disaggregated_prefill without --{role}-model-labels: the "
                    f"router cannot find the {role} pools",
                    f"add '--{role}-model-labels', '<{role} pool names>' to extraArgs",
                )


@rule(
    "PD009",
    "PD routing needs both a prefill and a decode pool, and PD pools need PD routing",
    explain=(
        "PD routing (`disaggregated_prefill`, or `routerSpec.type` vllm-router, lmcache-proxy"
        " or llm-d) has both roles; prefill+decode pools have PD routing"
    ),
)
def pd_routing_has_both_roles(deployment: Deployment) -> Iterator[Issue]:
    if not deployment.router_enabled or not deployment.pools:
        return
    pd, path = deployment.pd_routing
    roles = {pool.role for pool in deployment.pools}
    both = {"prefill", "decode"} <= roles
    if pd and not both:
        yield Issue(
            path,
            f"PD routing is on but the pools have only role(s) {', '.join(sorted(roles))}",
            "add a prefill (kv_producer) and a decode (kv_consumer) pool, or use roundrobin",
        )
    elif both and not pd:
        yield Issue(
            path,
            "prefill and decode pools exist but the router does not route PD "
            f"(routingLogic {deployment.router.get('routingLogic')!r})",
            "set routerSpec.routingLogic: disaggregated_prefill or routerSpec.type: vllm-router",
        )


@rule(
    "PD017",
    "the router speaks the pools' KV connector and its discovery finds them",
    explain=(
        "the router can route the pools' connector (production-stack's "
        "`disaggregated_prefill`: the tutorial's LMCache and PyNccl; vllm-router: NIXL, "
        "Mooncake, P2pNccl; lmcache-proxy: LMCache >= 0.3.7; llm-d: NIXL, Mooncake); "
        "LMCache's proxy has its script (`lmcacheProxy.scriptConfigMap` or `scriptPath`), the"
        " pools' Services (no `serviceDiscovery: k8s`) and one list of receiver ports for all"
        " decode pools; vllm-router's `kvConnector` is the one the pools need; static "
        "discovery has a prefill and a decode worker; `routerSpec.serviceDiscovery` agrees "
        "with `vllmRouter.serviceDiscovery`; the production-stack router's `staticBackends` "
        "and `staticModels` come together, one model per backend"
    ),
)
def router_speaks_connector(deployment: Deployment) -> Iterator[Issue]:
    if not deployment.router_enabled:
        return
    kind = deployment.router_type
    if kind == "production-stack":
        yield from _static_backends(deployment)
    if kind == "lmcache-proxy":
        yield from _lmcache_proxy(deployment)
    if not deployment.pd_routing[0]:
        return
    for pool in deployment.pools:
        connector = pool.connector
        if connector and kind not in connector.routers:
            yield Issue(
                ("routerSpec", "type"),
                f"routerSpec.type {kind} cannot route pool {pool.name!r} ({connector.summary}): "
                f"{connector.not_routed_by.get(kind, 'not supported')}",
            )
    if kind == "vllm-router":
        yield from _vllm_router(deployment)


def _vllm_router(deployment: Deployment) -> Iterator[Issue]:
    settings = deployment.router.get("vllmRouter")
    settings = settings if isinstance(settings, dict) else {}
    needed = sorted(
        {
            str(pool.connector.routers["vllm-router"].get("kvConnector"))
            for pool in deployment.pools
            if pool.connector and "vllm-router" in pool.connector.routers
        }
    )
    if len(needed) > 1:
        yield Issue(
            ("servingEngineSpec", "modelSpec"),
            "the engine pools need different vllm-router --kv-connector values "
            f"({', '.join(needed)})",
            "use one connector for the release",
        )
    chosen = settings.get("kvConnector")
    if chosen and needed and chosen != needed[0]:
        yield Issue(
            ("routerSpec", "vllmRouter", "kvConnector"),
            f"kvConnector is {chosen} but the engine pools' connector needs {needed[0]}",
            f"set it to {needed[0]} or leave it unset",
        )
    shared, own = deployment.router.get("serviceDiscovery"), settings.get("serviceDiscovery")
    if shared and own and shared != own:
        yield Issue(
            ("routerSpec", "serviceDiscovery"),
            f"routerSpec.serviceDiscovery is {shared} but routerSpec.vllmRouter.serviceDiscovery "
            f"is {own}: both say how vllm-router finds the engines",
            "set one of them",
        )
    if deployment.router_discovery == "static":
        for role, key in (("prefill", "prefillUrls"), ("decode", "decodeUrls")):
            if not settings.get(key) and not deployment.by_role(role):
                yield Issue(
                    ("routerSpec", "vllmRouter", key),
                    f"serviceDiscovery static has no {role} worker: no {key} and no {role} pool",
                    f"set routerSpec.vllmRouter.{key}, or add a pool with role {role}",
                )


def _lmcache_proxy(deployment: Deployment) -> Iterator[Issue]:
    """LMCache's PD proxy: its script given one way; the pools' Services, not Kubernetes discovery;
    one list of receiver ports for every decode pool (LMCache 0.3.7 disagg_proxy_server.py
    --decoder-init-port/--decoder-alloc-port)."""
    settings = deployment.router.get("lmcacheProxy")
    settings = settings if isinstance(settings, dict) else {}
    if bool(settings.get("scriptConfigMap")) == bool(settings.get("scriptPath")):
        yield Issue(
            ("routerSpec", "lmcacheProxy"),
            "routerSpec.type lmcache-proxy needs LMCache's proxy script "
            "(examples/disagg_prefill/disagg_proxy_server.py), which is neither in the lmcache "
            "package nor in the release images lmcache/vllm-openai:vX.Y.Z",
            "set routerSpec.lmcacheProxy.scriptConfigMap to a ConfigMap made from LMCache's "
            "repository at your image's tag (tutorial 19), or scriptPath to the script inside "
            "the image; not both",
        )
    if deployment.router.get("serviceDiscovery") == "k8s":
        yield Issue(
            ("routerSpec", "serviceDiscovery"),
            "serviceDiscovery is k8s but LMCache's PD proxy takes the pools' Services (static)",
            "remove routerSpec.serviceDiscovery",
        )
    receivers = [
        (pool, pool.listeners())
        for pool in deployment.by_role("decode")
        if pool.connector and "lmcache-proxy" in pool.connector.routers
    ]
    for pool, ports in receivers[1:]:
        first, first_ports = receivers[0]
        if sorted(port for _, port in ports) != sorted(port for _, port in first_ports):
            yield Issue(
                pool.at("kvTransfer", "lmcache"),
                f"decode pool {pool.name!r} receives on other ports than {first.name!r} "
                f"({_ports(ports)} vs {_ports(first_ports)}): LMCache's PD proxy takes one list "
                "for every decode pool",
                "give the decode pools the same tensorParallelSize and kvTransfer.lmcache ports",
            )


def _ports(ports: list[tuple[str, int]]) -> str:
    return ",".join(str(port) for _, port in ports)


def _static_backends(deployment: Deployment) -> Iterator[Issue]:
    """The production-stack router's static backends: staticBackends and staticModels together,
    one model per backend (its StaticServiceDiscovery asserts it at start)."""
    if deployment.router_discovery != "static":
        return
    backends = deployment.router.get("staticBackends")
    models = deployment.router.get("staticModels")
    if bool(backends) != bool(models):
        given, missing = ("staticBackends", "staticModels")
        if not backends:
            given, missing = missing, given
        yield Issue(
            ("routerSpec", given),
            f"routerSpec.{given} is set without routerSpec.{missing}",
            "with serviceDiscovery static give both (one model per backend URL), or neither for "
            "one backend per pool Service",
        )
    elif backends and isinstance(backends, str) and isinstance(models, str):
        urls, names = len(backends.split(",")), len(models.split(","))
        if urls != names:
            yield Issue(
                ("routerSpec", "staticModels"),
                f"routerSpec.staticBackends lists {urls} URL(s) but staticModels {names} "
                "model(s): the production-stack router needs one model per backend",
            )


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
    if deployment.router_type != "production-stack":
        return
    if deployment.router.get("routingLogic") != "disaggregated_prefill":
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
