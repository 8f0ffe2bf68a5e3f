"""A tolerant view of the values for the rules: pools with their role, connector, parallelism.

Every accessor tolerates missing keys and wrong types (rules run even when the schema failed),
and keys the chart may add later (role, vllmVersion, kvTransfer, ...) are optional.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.values.paths import KeyPath

ROLE_BY_KV = {"kv_producer": "prefill", "kv_consumer": "decode"}
POOLS_PATH: KeyPath = ("servingEngineSpec", "modelSpec")
_VERSION_TAG = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return default


def parse_version(text: Any) -> tuple[int, int, int] | None:
    match = _VERSION_TAG.match(str(text)) if text is not None else None
    return tuple(int(p) for p in match.groups()) if match else None  # type: ignore[return-value]


def format_version(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


@dataclass
class Pool:
    index: int
    spec: dict[str, Any]

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
        return _dict(self.spec.get("vllmConfig"))

    @property
    def lmcache(self) -> dict[str, Any]:
        return _dict(self.spec.get("lmcacheConfig"))

    @property
    def kv_transfer(self) -> dict[str, Any]:
        return _dict(self.spec.get("kvTransfer"))

    @property
    def kv_role(self) -> tuple[str | None, KeyPath]:
        """The KV role the pool declares, and where."""
        if self.lmcache.get("kvRole"):
            return self.lmcache["kvRole"], self.at("lmcacheConfig", "kvRole")
        if self.kv_transfer.get("kvRole"):
            return self.kv_transfer["kvRole"], self.at("kvTransfer", "kvRole")
        return None, self.path

    @property
    def role(self) -> str:
        if self.spec.get("role") in ("prefill", "decode", "both"):
            return str(self.spec["role"])
        return ROLE_BY_KV.get(str(self.kv_role[0]), "both")

    @property
    def connector(self) -> tuple[str | None, KeyPath]:
        if self.kv_transfer.get("connector"):
            return str(self.kv_transfer["connector"]), self.at("kvTransfer", "connector")
        if self.lmcache.get("enabled"):
            return "LMCacheConnectorV1", self.at("lmcacheConfig", "enabled")
        return None, self.path

    @property
    def legacy_nixl(self) -> bool:
        """The tutorial's LMCache NIXL form (1P1D, nixlRole/nixlPeerHost/nixlPeerPort)."""
        return bool(self.lmcache.get("enabled") and self.lmcache.get("enableNixl"))

    @property
    def replicas(self) -> int:
        return _int(self.spec.get("replicaCount"), 1)

    @property
    def tp(self) -> int:
        return _int(self.vllm.get("tensorParallelSize"), 1)

    @property
    def pp(self) -> int:
        return _int(self.vllm.get("pipelineParallelSize"), 1)

    @property
    def dp(self) -> int:
        return _int(self.vllm.get("dataParallelSize"), 1)

    @property
    def gpus(self) -> int:
        return _int(self.spec.get("requestGPU"), 0)

    @property
    def version(self) -> tuple[tuple[int, int, int] | None, KeyPath]:
        """The vLLM version of the image: vllmVersion, else a vX.Y.Z tag of vllm/vllm-openai."""
        if self.spec.get("vllmVersion"):
            return parse_version(self.spec["vllmVersion"]), self.at("vllmVersion")
        if str(self.spec.get("repository", "")).endswith("vllm/vllm-openai") and not str(
            self.spec.get("repository", "")
        ).startswith("lmcache/"):
            return parse_version(self.spec.get("tag")), self.at("tag")
        return None, self.path


@dataclass
class Deployment:
    values: dict[str, Any]
    release: str
    pools: list[Pool] = field(default_factory=list)
    chart_dir: Path | None = None  # the chart whose files/vllm-support.yaml applies (None: bundled)

    @classmethod
    def from_values(
        cls, values: dict[str, Any], release: str, chart_dir: Path | None = None
    ) -> Deployment:
        engine = _dict(values.get("servingEngineSpec"))
        specs = engine.get("modelSpec") if engine.get("enableEngine", True) is not False else []
        pools = [
            Pool(index, spec)
            for index, spec in enumerate(specs if isinstance(specs, list) else [])
            if isinstance(spec, dict)
        ]
        return cls(values=values, release=release, pools=pools, chart_dir=chart_dir)

    @property
    def router(self) -> dict[str, Any]:
        return _dict(self.values.get("routerSpec"))

    @property
    def router_enabled(self) -> bool:
        return self.router.get("enableRouter", True) is not False

    def by_role(self, role: str) -> list[Pool]:
        return [pool for pool in self.pools if pool.role == role]

    def by_name(self, name: str) -> list[Pool]:
        return [pool for pool in self.pools if pool.name == name]

    def service_name(self, pool: Pool) -> str:
        return f"{self.release}-{pool.name}-engine-service"

    @property
    def pd_routing(self) -> tuple[bool, KeyPath]:
        if self.router.get("routingLogic") == "disaggregated_prefill":
            return True, ("routerSpec", "routingLogic")
        if self.router.get("type") == "vllm-router":
            return True, ("routerSpec", "type")
        return False, ("routerSpec",)

    def pairs(self) -> list[tuple[Pool, Pool]]:
        """Every (prefill, decode) combination of the release."""
        return [(p, d) for p in self.by_role("prefill") for d in self.by_role("decode")]
