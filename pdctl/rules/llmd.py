"""Rules on the llm-d router (routerSpec.type llm-d): endpoint picker, gateway, decode sidecar.

Each error here has a twin in the chart (templates/_checks-llmd.tpl pd-stack.checks.llmd, same
rule id).
Which connectors the llm-d router routes at all is PD017 (pdctl/rules/router.py, from the connector
table's routers/notRoutedBy); the facts read here are the table's routers.llm-d entries and its
routerImages.llm-d release rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pdctl.rules.deployment import Deployment, Pool, as_dict, as_int
from pdctl.rules.registry import Issue, rule
from pdctl.values.loader import ValuesLoadError, loads

ROUTER = "llm-d"
LLMD: tuple[str, ...] = ("routerSpec", "llmd")


def release(deployment: Deployment) -> tuple[str, dict[str, Any]]:
    """(version, release row) of routerSpec.llmd.version, else the table's default; the row is {}
    for a version the table does not have (the schema refuses it)."""
    table = deployment.table.router_images[ROUTER]
    settings = as_dict(deployment.router.get("llmd"))
    version = str(settings.get("version") or table["default"])
    return version, as_dict(table["releases"].get(version))


def routed(deployment: Deployment) -> list[tuple[Pool, dict[str, Any]]]:
    """Each pool whose connector the llm-d router routes, with its routers.llm-d facts."""
    return [
        (pool, pool.connector.routers[ROUTER])
        for pool in deployment.pools
        if pool.connector and ROUTER in pool.connector.routers
    ]


def model_server_port(deployment: Deployment) -> int:
    sidecar = as_dict(as_dict(deployment.router.get("llmd")).get("sidecar"))
    return as_int(sidecar.get("modelServerPort"), 0)  # values.yaml's default, merged in


@rule(
    "PD022",
    "the llm-d router: discovery, gateway, sidecar connector, TP, ports, scheduler",
    explain=(
        "the llm-d router (`routerSpec.type: llm-d`): no static discovery (its endpoint "
        "picker selects pods by label); gateway mode names a Gateway (`llmd.gateway.name`), "
        "standalone mode none; one sidecar `--kv-connector` and one Mooncake bootstrap port "
        "for the release; the tensor parallelism llm-d's P/D guide requires (NIXL: decode TP "
        ">= prefill TP; Mooncake: equal); vLLM's port behind the sidecar "
        "(`llmd.sidecar.modelServerPort`) is neither the engine port nor a connector port; "
        "`scheduler.stageOrder` and `scheduler.promptTokens` only from llm-d-router v0.10.0, "
        "and no prefix-based decider with `stageOrder: prefill-first`; a raw "
        "`scheduler.config` is an EndpointPickerConfig of the release's apiVersion. The "
        "schema takes `gateway.failureMode` FailOpen or FailClose only (llm-d's chart "
        "README's FailClosed is refused by the InferencePool CRD) and `nonCachedTokens` >= 1 "
        "(0 would never disaggregate)"
    ),
)
def llmd_router(deployment: Deployment) -> Iterator[Issue]:
    if not deployment.router_enabled or deployment.router_type != ROUTER:
        return
    settings = as_dict(deployment.router.get("llmd"))
    gateway = as_dict(settings.get("gateway"))
    mode = settings.get("mode") or "standalone"
    if deployment.router.get("serviceDiscovery") == "static":
        yield Issue(
            ("routerSpec", "serviceDiscovery"),
            "serviceDiscovery is static but the llm-d router's endpoint picker finds the "
            "release's engine pods by label (or through its InferencePool)",
            "remove routerSpec.serviceDiscovery",
        )
    if mode == "gateway" and gateway.get("httpRoute") is not False and not gateway.get("name"):
        yield Issue(
            (*LLMD, "gateway", "name"),
            "routerSpec.llmd.gateway.name is required with routerSpec.llmd.mode gateway: the "
            "HTTPRoute attaches to that Gateway",
            "name your Gateway, or set gateway.httpRoute: false and route to the InferencePool "
            "yourself",
        )
    named = [key for key in ("name", "namespace", "sectionName") if gateway.get(key)]
    if mode != "gateway" and named:
        yield Issue(
            (*LLMD, "gateway", named[0]),
            "routerSpec.llmd.gateway names a Gateway but routerSpec.llmd.mode is standalone, "
            "which renders no InferencePool or HTTPRoute",
            "set routerSpec.llmd.mode: gateway, or remove gateway.name, namespace and sectionName",
        )
    yield from _scheduler(deployment, as_dict(settings.get("scheduler")))
    yield from _sidecar(deployment)


# Scheduler keys that only the release rows saying `<key>: true` take (the chart's PD022 alike).
_NEWER_SCHEDULER_KEYS = {
    "stageOrder": "disagg-profile-handler's stageOrder, PR #2342",
    "promptTokens": "prefix-based-pd-decider's promptTokens, PR #933",
}


def _scheduler(deployment: Deployment, scheduler: dict[str, Any]) -> Iterator[Issue]:
    version, row = release(deployment)
    for key, origin in _NEWER_SCHEDULER_KEYS.items():
        if scheduler.get(key) and row and not row.get(key):
            yield Issue(
                (*LLMD, "scheduler", key),
                f"{key} needs llm-d-router v0.10.0 or later ({origin}) but "
                f"routerSpec.llmd.version is {version}",
                "remove it or use a newer release",
            )
    if (
        scheduler.get("stageOrder") == "prefill-first"
        and scheduler.get("decider") == "prefix-based"
    ):
        yield Issue(
            (*LLMD, "scheduler", "decider"),
            "decider is prefix-based but stageOrder prefill-first runs prefill on every request "
            "and takes no decider (disagg-profile-handler refuses one)",
            "use decider always, or stageOrder decode-first",
        )
    text = scheduler.get("config")
    if not isinstance(text, str) or not text or not row:
        return
    try:  # the values loader's limits: depth, aliases, tags (a hostile string is still YAML)
        config: Any = loads(text).data
    except ValuesLoadError:
        config = None
    path = (*LLMD, "scheduler", "config")
    if not isinstance(config, dict) or config.get("kind") != "EndpointPickerConfig":
        yield Issue(
            path,
            "routerSpec.llmd.scheduler.config is not an EndpointPickerConfig (a YAML mapping "
            "with kind: EndpointPickerConfig): the endpoint picker would not start",
        )
    elif config.get("apiVersion") != row["configApiVersion"]:
        yield Issue(
            path,
            f"scheduler.config has apiVersion {config.get('apiVersion')!r} but llm-d-router "
            f"{version} reads {row['configApiVersion']}",
            "use that apiVersion",
        )


def _sidecar(deployment: Deployment) -> Iterator[Issue]:
    pools = routed(deployment)
    needed = sorted({str(facts.get("sidecarConnector")) for _, facts in pools})
    if len(needed) > 1:
        yield Issue(
            ("servingEngineSpec", "modelSpec"),
            f"the engine pools need different llm-d sidecar --kv-connector values "
            f"({', '.join(needed)})",
            "use one connector for the release",
        )
    bootstrap = [
        (pool, port)
        for pool, facts in pools
        if facts.get("bootstrapPort") and pool.role == "prefill"
        for name, port in pool.listeners()
        if name == facts["bootstrapPort"]
    ]
    for pool, port in bootstrap[1:]:
        first, first_port = bootstrap[0]
        if port != first_port:
            yield Issue(
                pool.at("kvTransfer", "bootstrapPort"),
                f"prefill pool {pool.name!r} announces bootstrap port {port} but "
                f"{first.name!r} {first_port}: the llm-d sidecar asks every prefill pod on one "
                "--mooncake-bootstrap-port",
                "give the prefill pools the same bootstrapPort",
            )
    for prefill, _ in pools:
        for decode, facts in pools:
            if prefill.role != "prefill" or decode.role != "decode":
                continue
            yield from _tensor_parallel(prefill, decode, facts)
    vllm_port = model_server_port(deployment)
    engine = as_dict(deployment.values.get("servingEngineSpec"))
    if vllm_port == as_int(engine.get("containerPort"), 8000):
        yield Issue(
            (*LLMD, "sidecar", "modelServerPort"),
            f"modelServerPort is {vllm_port}, servingEngineSpec.containerPort too: in a decode "
            "pod the sidecar listens on containerPort and vLLM moves to modelServerPort",
            "give them different ports",
        )
    for pool, _ in pools:
        if pool.role != "decode":
            continue
        for name, port in pool.listeners():
            if port == vllm_port:
                yield Issue(
                    (*LLMD, "sidecar", "modelServerPort"),
                    f"modelServerPort {vllm_port} is also the decode pods' {name} port: vLLM's "
                    "HTTP port behind the sidecar must be free",
                    "choose another modelServerPort",
                )


def _tensor_parallel(prefill: Pool, decode: Pool, facts: dict[str, Any]) -> Iterator[Issue]:
    """The TP llm-d's P/D guide requires of a pair: equal (Mooncake), decode >= prefill (NIXL)."""
    connector = decode.connector.name if decode.connector else "the connector"
    path = decode.at("vllmConfig", "tensorParallelSize")
    if facts.get("tp") == "equal" and prefill.tp != decode.tp:
        yield Issue(
            path,
            f"decode TP is {decode.tp} but prefill pool {prefill.name!r} has {prefill.tp}: with "
            f"the llm-d router {connector} needs the same tensor parallelism on both sides "
            "(llm-d's P/D guide)",
            "give both pools the same tensorParallelSize",
        )
    if facts.get("tp") == "decodeAtLeastPrefill" and decode.tp < prefill.tp:
        yield Issue(
            path,
            f"decode TP is {decode.tp} but prefill pool {prefill.name!r} has {prefill.tp}: with "
            f"the llm-d router {connector} needs decode TP >= prefill TP (llm-d's P/D guide: the "
            "reverse crashes decode)",
            "raise the decode pool's tensorParallelSize or lower the prefill pool's",
        )
