"""Rendered manifests: parsing helm's output and summarising what it deploys."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from pdctl import naming

Manifest = dict[str, Any]
KEEP_POLICY = "helm.sh/resource-policy"


def helm_keeps(obj: Manifest) -> bool:
    """Whether the object is marked helm.sh/resource-policy: keep: helm then leaves it in the
    cluster when the release is uninstalled or when an upgrade no longer renders it."""
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(KEEP_POLICY) == "keep"


def parse(text: str) -> list[Manifest]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    for obj in objects:
        if obj.get("kind") == kind and obj["metadata"]["name"] == name:
            return obj
    raise KeyError(f"{kind}/{name} was not rendered")


@dataclass
class RenderedPool:
    name: str
    role: str
    replicas: int
    image: str
    model: str
    gpus_per_pod: int
    connector: str | None = None  # vLLM's kv_connector, from --kv-transfer-config
    kv_role: str | None = None
    transfer_ports: dict[str, int] = field(default_factory=dict)  # KV listeners by port name
    nodes: int = 1  # pods per engine (a LeaderWorkerSet group)
    kind: str = "Deployment"  # the workload: Deployment, LeaderWorkerSet or DisaggregatedSet


@dataclass
class Summary:
    pools: list[RenderedPool] = field(default_factory=list)
    router: dict[str, str] = field(default_factory=dict)
    services: dict[str, list[int]] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)

    @property
    def total_gpus(self) -> int:
        return sum(pool.replicas * pool.nodes * pool.gpus_per_pod for pool in self.pools)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_gpus": self.total_gpus}


def _gpus(container: Manifest) -> int:
    limits = container.get("resources", {}).get("limits", {})
    return sum(int(v) for k, v in limits.items() if k.endswith("/gpu"))


def _flag(args: list[str], flag: str) -> str:
    return str(args[args.index(flag) + 1]) if flag in args[:-1] else ""


def _router(obj: Manifest, container: Manifest) -> dict[str, str]:
    args = container.get("args", [])
    routing = _flag(args, "--routing-logic")
    if "--vllm-pd-disaggregation" in args:  # vllm-router in PD mode
        connector = _flag(args, "--kv-connector")
        routing = f"vllm-router PD ({connector})" if connector else "vllm-router PD"
    elif "--decoder-init-port" in args:  # LMCache's PD proxy (routerSpec.type lmcache-proxy)
        routing = f"LMCache PD proxy (notifications on port {_flag(args, '--proxy-port')})"
    elif "--endpoint-selector" in args:  # the llm-d router's EPP (routerSpec.type llm-d)
        routing = "llm-d EPP, standalone (Envoy in the pod)"
    elif "--pool-name" in args:
        routing = f"llm-d EPP behind a Gateway (InferencePool {_flag(args, '--pool-name')})"
    return {"name": obj["metadata"]["name"], "image": container["image"], "routing": routing}


def _pool(obj: Manifest, container: Manifest, labels: dict[str, str]) -> RenderedPool:
    args = [str(arg) for arg in container.get("args", [])]
    transfer = json.loads(_flag(args, "--kv-transfer-config") or "{}")
    return RenderedPool(
        name=labels[naming.POOL],
        role=labels.get(naming.ROLE, "both"),
        replicas=obj["spec"].get("replicas", 1),
        image=container["image"],
        model=args[1] if len(args) > 1 and args[0] == "serve" else "",
        gpus_per_pod=_gpus(container),
        connector=transfer.get("kv_connector"),
        kv_role=transfer.get("kv_role"),
        transfer_ports={
            port["name"]: port["containerPort"]
            for port in container.get("ports", [])
            # http: the engine port; vllm: vLLM's own port behind the llm-d decode sidecar.
            if port.get("name") not in ("http", "vllm")
        },
    )


def _engine_group(summary: Summary, spec: Manifest, kind: str) -> None:
    """A pool rendered as a LeaderWorkerSet (or a DisaggregatedSet role): its leader's pod."""
    template = spec["leaderWorkerTemplate"]
    pod = template.get("leaderTemplate") or template["workerTemplate"]
    container = pod["spec"]["containers"][0]
    pool = _pool(
        {"spec": {"replicas": spec.get("replicas", 1)}}, container, pod["metadata"]["labels"]
    )
    pool.nodes = int(template.get("size", 1))
    pool.kind = kind
    summary.pools.append(pool)


def summarize(objects: list[Manifest]) -> Summary:
    summary = Summary()
    for obj in objects:
        kind = obj["kind"]
        if "helm.sh/hook" in obj["metadata"].get("annotations", {}):
            kind = f"{kind} (helm hook)"
        summary.objects[kind] = summary.objects.get(kind, 0) + 1
        if kind == "Service":
            summary.services[obj["metadata"]["name"]] = [p["port"] for p in obj["spec"]["ports"]]
        if kind == "LeaderWorkerSet":
            _engine_group(summary, obj["spec"], kind)
        elif kind == "DisaggregatedSet":
            for role in obj["spec"].get("roles", []):
                _engine_group(summary, role["spec"], kind)
        if kind != "Deployment":
            continue
        pod = obj["spec"]["template"]
        labels = pod["metadata"]["labels"]
        container = pod["spec"]["containers"][0]
        if labels.get(naming.COMPONENT) == naming.ROUTER:
            summary.router = _router(obj, container)
        elif labels.get(naming.COMPONENT) == naming.ENGINE:
            summary.pools.append(_pool(obj, container, labels))
    return summary
