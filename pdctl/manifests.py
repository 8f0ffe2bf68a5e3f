"""Rendered manifests: parsing helm's output and summarising what it deploys."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

Manifest = dict[str, Any]


def parse(text: str) -> list[Manifest]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    for obj in objects:
        if obj.get("kind") == kind and obj["metadata"]["name"] == name:
            return obj
    raise KeyError(f"{kind}/{name} was not rendered")


@dataclass
class Pool:
    name: str
    role: str
    replicas: int
    image: str
    model: str
    gpus_per_pod: int


@dataclass
class Summary:
    pools: list[Pool] = field(default_factory=list)
    router: dict[str, str] = field(default_factory=dict)
    services: dict[str, list[int]] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)

    @property
    def total_gpus(self) -> int:
        return sum(pool.replicas * pool.gpus_per_pod for pool in self.pools)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_gpus": self.total_gpus}


def _gpus(container: Manifest) -> int:
    limits = container.get("resources", {}).get("limits", {})
    return sum(int(v) for k, v in limits.items() if k.endswith("/gpu"))


def summarize(objects: list[Manifest]) -> Summary:
    summary = Summary()
    for obj in objects:
        kind = obj["kind"]
        if "helm.sh/hook" in obj["metadata"].get("annotations", {}):
            kind = f"{kind} (helm hook)"
        summary.objects[kind] = summary.objects.get(kind, 0) + 1
        if kind == "Service":
            ports = [port["port"] for port in obj["spec"]["ports"]]
            summary.services[obj["metadata"]["name"]] = ports
        if kind != "Deployment":
            continue
        pod = obj["spec"]["template"]
        labels = pod["metadata"]["labels"]
        container = pod["spec"]["containers"][0]
        if labels.get("app.kubernetes.io/component") == "router":
            args = container.get("args", [])
            logic = args[args.index("--routing-logic") + 1] if "--routing-logic" in args else ""
            if "--vllm-pd-disaggregation" in args:  # vllm-router in PD mode
                connector = (
                    args[args.index("--kv-connector") + 1] if "--kv-connector" in args else ""
                )
                logic = f"vllm-router PD ({connector})" if connector else "vllm-router PD"
            summary.router = {
                "name": obj["metadata"]["name"],
                "image": container["image"],
                "routing": logic,
            }
        elif "model" in labels:
            args = container.get("args", [])
            summary.pools.append(
                Pool(
                    name=labels["model"],
                    role=labels.get("pd-stack.io/role", "both"),
                    replicas=obj["spec"].get("replicas", 1),
                    image=container["image"],
                    model=args[1] if len(args) > 1 and args[0] == "serve" else "",
                    gpus_per_pod=_gpus(container),
                )
            )
    return summary
