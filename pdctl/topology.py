"""The chart's topology table (helm/files/topology.yaml): pool roles, kv roles and the role each
implies, router types, the production-stack router's label flags. The chart's templates and the
schema builder read the same file; pdctl takes these facts from here, never restates them."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pdctl.chart import bundled_chart_dir, read_yaml


@dataclass(frozen=True)
class Topology:
    roles: tuple[str, ...]  # a pool's PD role: prefill, decode, both
    kv_roles: tuple[str, ...]  # vLLM's kv_role values
    role_by_kv_role: dict[str, str]  # the role a declared kv_role gives a pool with no role
    router_types: tuple[str, ...]  # routerSpec.type
    router_label_flags: dict[str, str]  # the production-stack router's flag -> the role it names


@functools.cache
def load() -> Topology:
    data = read_yaml(bundled_chart_dir() / "files" / "topology.yaml")
    return Topology(
        roles=tuple(data["roles"]),
        kv_roles=tuple(data["kvRoles"]),
        role_by_kv_role=dict(data["roleByKvRole"]),
        router_types=tuple(data["routerTypes"]),
        router_label_flags=dict(data["routerLabelFlags"]),
    )
