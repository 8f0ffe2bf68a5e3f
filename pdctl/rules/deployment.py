"""A tolerant view of the values for the rules: pools with their parallelism and settings, and
the facts the chart derives for each (role, connector, kv role, kind, nodes, vLLM version), read
from its render (pdctl.rules.summary), never derived here again.

Every accessor of the values tolerates missing keys and wrong types (rules run even when the
schema failed). A fact of a pool the chart did not render raises summary.Unrendered: the rule
that asked reports nothing (the registry), as the chart's refusal is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.connectors import Connector, Table
from pdctl.naming import Release
from pdctl.rules.summary import PoolSummary, Unrendered
from pdctl.values.paths import KeyPath
from pdctl.vllm_image import Version

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
    rendered: PoolSummary | None  # the chart's summary; None: it rendered nothing

    @property
    def summary(self) -> PoolSummary:
        """The chart's facts of this pool; Unrendered when the chart refused the values."""
        if self.rendered is None:
            raise Unrendered(self.name)
        return self.rendered

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
        """prefill, decode or both (pd-stack.poolRole)."""
        return self.summary.role

    @property
    def connector(self) -> Connector | None:
        """The table entry of the pool's KV transfer (pd-stack.poolConnector); None when it
        transfers no KV."""
        summary = self.summary
        if summary.settings_key == "lmcacheConfig":
            return self.table.tutorial_lmcache
        return self.table.connectors[summary.connector] if summary.connector else None

    @property
    def settings(self) -> dict[str, Any]:
        """The connector's settings (kvTransfer, or lmcacheConfig for the tutorial's form)."""
        connector = self.connector
        return as_dict(self.spec.get(connector.settings_key)) if connector else {}

    @property
    def kv_role(self) -> str | None:
        """The kv_role the chart renders, None without a connector (pd-stack.kvRole)."""
        return self.summary.kv_role

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
    def nodes(self) -> int:
        """Pods per engine (pd-stack.poolNodes)."""
        return self.summary.nodes

    @property
    def kind(self) -> str:
        """How the chart renders the pool (pd-stack.poolKind)."""
        return self.summary.kind

    @property
    def version(self) -> tuple[Version | None, KeyPath]:
        """The vLLM version of the image (pd-stack.vllmVersion), and the key it is read from
        (pd-stack.vllmVersionKey; the pool when the image says nothing about vLLM)."""
        summary = self.summary
        key = summary.vllm_version_key
        return summary.vllm_version, self.at(key) if key else self.path


@dataclass
class Deployment:
    values: dict[str, Any]
    release: Release
    table: Table
    pools: list[Pool] = field(default_factory=list)
    chart_dir: Path | None = None  # the chart whose data files apply (None: the bundled one)

    @classmethod
    def from_values(
        cls,
        values: dict[str, Any],
        release: Release,
        table: Table,
        rendered: dict[str, PoolSummary] | None,
        chart_dir: Path | None = None,
    ) -> Deployment:
        """The pools of the values, each with the chart's summary of it (`rendered`, by pool
        name; None when the chart rendered nothing)."""
        engine = as_dict(values.get("servingEngineSpec"))
        specs = engine.get("modelSpec") if engine.get("enableEngine", True) is not False else []
        pools = [
            Pool(
                index,
                spec,
                table,
                None if rendered is None else rendered.get(str(spec.get("name"))),
            )
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
    def router_enabled(self) -> bool:
        return self.router.get("enableRouter", True) is not False

    @property
    def router_type(self) -> str:
        return str(self.router.get("type", ""))  # the chart's default is merged in (values.yaml)

    @property
    def routes_pd(self) -> bool:
        """Whether the router routes PD (pd-stack.routesPD, in every pool's summary)."""
        return any(pool.summary.routes_pd for pool in self.pools)

    def by_role(self, role: str) -> list[Pool]:
        return [pool for pool in self.pools if pool.role == role]

    def pairs(self) -> list[tuple[Pool, Pool]]:
        """Every (prefill, decode) combination of the release."""
        return [(p, d) for p in self.by_role("prefill") for d in self.by_role("decode")]
