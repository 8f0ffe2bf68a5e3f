"""The chart's summary of each pool, read from the render: the facts the chart derives for a pool
(role, connector, kv role, workload kind, nodes, vLLM version, the router's PD facts), which its
templates compute once (helm/templates/_summary.tpl) and write as the annotation
pd-stack.io/summary on each engine workload's own metadata. The warnings and `pdctl init` read
them here instead of deriving them again from the values.

Where the chart refuses the values it renders nothing, so there is no summary: a rule that reads
a fact then reports nothing (Unrendered, caught by the registry); the chart's errors are the
answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pdctl.manifests import Manifest
from pdctl.naming import SUMMARY
from pdctl.vllm_image import Version, parse_version


class Unrendered(Exception):
    """A fact of a pool the chart did not render (it refused the values)."""


@dataclass(frozen=True)
class PoolSummary:
    """One pool's entry of the annotation (docs/chart.md, "The pools' summary", lists its keys)."""

    pool: str
    role: str  # prefill, decode or both
    connector: str | None  # vLLM's kv_connector; None: the pool transfers no KV
    settings_key: str | None  # the modelSpec key of the connector's settings
    kv_role: str | None
    kind: str  # Deployment, LeaderWorkerSet or DisaggregatedSet
    nodes: int  # pods per engine
    vllm_version: Version | None  # None: the image says nothing about vLLM
    vllm_version_key: str | None  # the modelSpec key read for it: vllmVersion, tag, or None
    routes_pd: bool
    router_discovery: str  # k8s or static
    lmcache_proxy: bool
    lmcache_buffer: int  # LMCACHE_PD_BUFFER_SIZE in bytes; 0: not an LMCacheConnectorV1 pool

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> PoolSummary:
        return cls(
            pool=str(entry["pool"]),
            role=str(entry["role"]),
            connector=entry["connector"] or None,
            settings_key=entry["settingsKey"] or None,
            kv_role=entry["kvRole"] or None,
            kind=str(entry["kind"]),
            nodes=int(entry["nodes"]),
            vllm_version=parse_version(entry["vllmVersion"]) if entry["vllmVersion"] else None,
            vllm_version_key=entry["vllmVersionKey"] or None,
            routes_pd=bool(entry["routesPD"]),
            router_discovery=str(entry["routerDiscovery"]),
            lmcache_proxy=bool(entry["lmcacheProxy"]),
            lmcache_buffer=int(entry["lmcacheBuffer"]),
        )


def read(objects: list[Manifest]) -> dict[str, PoolSummary]:
    """Each rendered pool's summary by pool name, from every object that carries the annotation."""
    found = {}
    for obj in objects:
        text = ((obj.get("metadata") or {}).get("annotations") or {}).get(SUMMARY)
        for entry in json.loads(text) if text else []:
            summary = PoolSummary.from_json(entry)
            found[summary.pool] = summary
    return found
