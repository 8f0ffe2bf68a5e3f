"""A tolerant view of the values for the rules: pools with their role, connector, parallelism.

Every accessor tolerates missing keys and wrong types (rules run even when the schema failed).
Roles, kv roles and connectors are derived exactly as the chart derives them (templates/
_helpers-pools.tpl pd-stack.poolRole, _connectors.tpl pd-stack.poolConnector and pd-stack.kvRole),
from the connector table the chart reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import naming, topology
from pdctl.connectors import Connector, Table
from pdctl.naming import Release
from pdctl.values.paths import KeyPath
from pdctl.vllm_image import Version as Version
from pdctl.vllm_image import is_official, parse_version

ROLE_BY_KV = topology.load().role_by_kv_role
POOLS_PATH: KeyPath = ("servingEngineSpec", "modelSpec")


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return default


def as_count(value: Any) -> int:
    """A count of at least 1 (GPUs per rank, ranks, pods per engine); 1 for anything else."""
    return max(as_int(value, 1), 1)


def as_number(value: Any) -> float | None:
    """A number, or a string of one (production-stack files quote some: "0.9"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def format_version(version: Version) -> str:
    return ".".join(map(str, version))


@dataclass
class Pool:
    index: int
    spec: dict[str, Any]
    table: Table

    @property
    def path(self) -> KeyPath:
        return (*POOLS_PATH, self.index)

    def at(self, *keys: str | int) -> KeyPath:
        return (*self.path, *keys)

    @property
    def name(self) -> str:
        return str(self.spec.get("name", f"#{self.index}"))

    @property
    def vllm(self) -> dict[str, Any]:
        return as_dict(self.spec.get("vllmConfig"))

    @property
    def lmcache(self) -> dict[str, Any]:
        return as_dict(self.spec.get("lmcacheConfig"))

    @property
    def kv_transfer(self) -> dict[str, Any]:
        return as_dict(self.spec.get("kvTransfer"))

    @property
    def role(self) -> str:
        """prefill, decode or both: role, else lmcacheConfig.kvRole, else kvTransfer.kvRole."""
        return self.role_source[0]

    @property
    def role_source(self) -> tuple[str, KeyPath, str]:
        """(role, the key that decides it, and that key for people: "role decode",
        "lmcacheConfig.kvRole kv_consumer")."""
        if self.spec.get("role") in naming.ROLES:
            return str(self.spec["role"]), self.at("role"), f"role {self.spec['role']}"
        for key, declared in (
            ("lmcacheConfig", self.lmcache.get("kvRole")),
            ("kvTransfer", self.kv_transfer.get("kvRole")),
        ):
            if isinstance(declared, str) and declared in ROLE_BY_KV:
                return ROLE_BY_KV[declared], self.at(key, "kvRole"), f"{key}.kvRole {declared}"
        return "both", self.at("role"), "no role key (so both)"

    @property
    def connector(self) -> Connector | None:
        """The table entry of the pool's KV transfer: kvTransfer.connector's, or the tutorial's
        LMCache form for lmcacheConfig.enabled; None when it transfers no KV."""
        name = self.kv_transfer.get("connector")
        if isinstance(name, str) and name in self.table.connectors:
            return self.table.connectors[name]
        if self.lmcache.get("enabled"):
            return self.table.tutorial_lmcache
        return None

    @property
    def connector_path(self) -> KeyPath:
        connector = self.connector
        if connector and connector.settings_key == "lmcacheConfig":
            return self.at("lmcacheConfig", "enabled")
        return self.at("kvTransfer", "connector")

    @property
    def settings(self) -> dict[str, Any]:
        """The connector's settings (kvTransfer, or lmcacheConfig for the tutorial's form)."""
        connector = self.connector
        return as_dict(self.spec.get(connector.settings_key)) if connector else {}

    @property
    def kv_role(self) -> str | None:
        """The kv_role the chart renders, None without a connector (pd-stack.kvRole)."""
        connector = self.connector
        if not connector:
            return None
        declared = self.settings.get("kvRole")
        if isinstance(declared, str) and declared:
            return declared
        return connector.kv_roles.get(self.role, "kv_both")

    def listeners(self) -> list[tuple[str, int]]:
        """The KV-transfer ports this pool's pods listen on (name, number)."""
        connector, kv_role = self.connector, self.kv_role
        if not connector or not kv_role:
            return []
        return connector.listeners(self.settings, kv_role, self.tp, self.dp)

    @property
    def legacy_nixl(self) -> bool:
        """The tutorial's LMCache NIXL form (1P1D, nixlRole/nixlPeerHost/nixlPeerPort)."""
        return bool(self.lmcache.get("enabled") and self.lmcache.get("enableNixl"))

    @property
    def replicas(self) -> int:
        return as_int(self.spec.get("replicaCount"), 1)

    @property
    def tp(self) -> int:
        return as_count(self.vllm.get("tensorParallelSize"))

    @property
    def pp(self) -> int:
        return as_count(self.vllm.get("pipelineParallelSize"))

    @property
    def dp(self) -> int:
        return as_count(self.vllm.get("dataParallelSize"))

    @property
    def gpus(self) -> int:
        return as_int(self.spec.get("requestGPU"), 0)

    @property
    def multi_node(self) -> dict[str, Any]:
        return as_dict(self.spec.get("multiNode"))

    @property
    def nodes(self) -> int:
        """Pods per engine (pd-stack.poolNodes): multiNode.nodes, else 1."""
        return as_count(self.multi_node.get("nodes"))

    @property
    def version(self) -> tuple[Version | None, KeyPath]:
        """The vLLM version of the image, as helm/files/vllm-image.yaml reads it: vllmVersion,
        else the official image's tag."""
        if self.spec.get("vllmVersion"):
            return parse_version(self.spec["vllmVersion"]), self.at("vllmVersion")
        if is_official(self.spec.get("repository")):
            return parse_version(self.spec.get("tag")), self.at("tag")
        return None, self.path


@dataclass
class Deployment:
    values: dict[str, Any]
    release: Release
    table: Table
    pools: list[Pool] = field(default_factory=list)
    chart_dir: Path | None = None  # the chart whose data files apply (None: the bundled one)

    @classmethod
    def from_values(
        cls, values: dict[str, Any], release: Release, table: Table, chart_dir: Path | None = None
    ) -> Deployment:
        engine = as_dict(values.get("servingEngineSpec"))
        specs = engine.get("modelSpec") if engine.get("enableEngine", True) is not False else []
        pools = [
            Pool(index, spec, table)
            for index, spec in enumerate(specs if isinstance(specs, list) else [])
            if isinstance(spec, dict) and spec.get("enabled") is not False
        ]
        return cls(values=values, release=release, table=table, pools=pools, chart_dir=chart_dir)

    @property
    def engines_enabled(self) -> bool:
        return as_dict(self.values.get("servingEngineSpec")).get("enableEngine", True) is not False

    @property
    def router(self) -> dict[str, Any]:
        return as_dict(self.values.get("routerSpec"))

    @property
    def disaggregated_set(self) -> dict[str, Any]:
        return as_dict(as_dict(self.values.get("servingEngineSpec")).get("disaggregatedSet"))

    @property
    def in_set(self) -> bool:
        """Whether the pools are roles of one DisaggregatedSet (disaggregatedSet.enabled)."""
        return bool(self.disaggregated_set.get("enabled"))

    def kind(self, pool: Pool) -> str:
        """How the chart renders a pool (pd-stack.poolKind)."""
        if self.in_set:
            return "DisaggregatedSet"
        return "LeaderWorkerSet" if pool.multi_node else "Deployment"

    @property
    def router_enabled(self) -> bool:
        return self.router.get("enableRouter", True) is not False

    @property
    def router_type(self) -> str:
        return str(self.router.get("type", ""))  # the chart's default is merged in (values.yaml)

    @property
    def router_discovery(self) -> str:
        """k8s or static (pd-stack.routerDiscovery): routerSpec.serviceDiscovery, else for
        vllm-router routerSpec.vllmRouter.serviceDiscovery, else k8s."""
        own = as_dict(self.router.get("vllmRouter")).get("serviceDiscovery")
        shared = self.router.get("serviceDiscovery")
        if self.router_type == "lmcache-proxy":  # it takes the pools' Services
            return "static"
        if shared:
            return str(shared)
        if self.router_type == "vllm-router" and own:
            return str(own)
        return "k8s"

    @property
    def lmcache_proxy(self) -> bool:
        """Whether the chart deploys LMCache's PD proxy (pd-stack.isLMCacheProxy)."""
        return self.router_enabled and self.router_type == "lmcache-proxy"

    @property
    def pd_routing(self) -> tuple[bool, KeyPath]:
        """Whether the router routes PD, and the key that says so (pd-stack.routesPD)."""
        if self.router_type != "production-stack":
            return True, ("routerSpec", "type")
        if self.router.get("routingLogic") == "disaggregated_prefill":
            return True, ("routerSpec", "routingLogic")
        return False, ("routerSpec", "routingLogic")

    def by_role(self, role: str) -> list[Pool]:
        return [pool for pool in self.pools if pool.role == role]

    def by_name(self, name: str) -> list[Pool]:
        return [pool for pool in self.pools if pool.name == name]

    def pairs(self) -> list[tuple[Pool, Pool]]:
        """Every (prefill, decode) combination of the release."""
        return [(p, d) for p in self.by_role("prefill") for d in self.by_role("decode")]
