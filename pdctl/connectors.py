"""The chart's connector table (helm/files/connectors.yaml), read as typed records.

The table is the one place a KV connector's facts are written: the vLLM versions that have it,
its roles, ports, router support, env and extra-config keys, and the metrics that prove a
transfer. The chart's templates read it; this module gives the same facts to the rules, the
render summary, the planner and verify.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import topology
from pdctl.chart import bundled_chart_dir, read_yaml

TABLE = Path("files") / "connectors.yaml"
KV_ROLES = topology.load().kv_roles
_COUNTS = {"one", "tp", "2tp", "dp*tp"}


def setting(settings: dict[str, Any], key: tuple[str, ...]) -> Any:
    """The value at a key path inside a connector's settings, or None."""
    value: Any = settings
    for part in key:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


@dataclass(frozen=True)
class Port:
    """A listener the connector opens: count consecutive ports from a base."""

    name: str
    key: tuple[str, ...]  # where the base is set, inside the connector's settings
    default: int | None
    count: str  # one | tp | 2tp | dp*tp
    listen_on: tuple[str, ...]  # kv roles whose pods listen
    when: tuple[str, ...] = ()  # settings flags that must be true
    what: str = ""

    def ports(self, base: int, tp: int, dp: int) -> list[tuple[str, int]]:
        """(port name, number) of every port this listener opens for a pod with TP and DP."""
        count = {"one": 1, "tp": tp, "2tp": 2 * tp, "dp*tp": dp * tp}[self.count]
        if self.count == "one":
            return [(self.name, base)]
        return [(f"{self.name}-{i}", base + i) for i in range(count)]


@dataclass(frozen=True)
class Requirement:
    key: tuple[str, ...]
    kv_roles: tuple[str, ...]
    why: str
    unless_router: str | None = None  # a router type whose deployment supplies the setting


@dataclass(frozen=True)
class KnownFailure:
    """A real run's failure of a connector on the image's vLLM versions `vllm` (a range)."""

    vllm: str
    what: str
    record: str  # the kept record (benchmarks/records/...)


@dataclass(frozen=True)
class Connector:
    """One entry of the table. `name` is vLLM's kv_connector; `settings_key` the modelSpec key
    that holds its settings (kvTransfer, or lmcacheConfig for the tutorial's form)."""

    name: str
    settings_key: str
    summary: str
    fragment: str
    engine: str
    kv_roles: dict[str, str]
    kv_both: bool
    kv_both_deprecated: str | None  # vLLM versions that deprecate kv_both on prefill/decode pools
    hetero_tp: bool
    pairing: str
    pairing_when: tuple[str, ...]
    smaller_prefill_blocks: bool
    ports: tuple[Port, ...]
    requires: tuple[Requirement, ...]
    routers: dict[str, dict[str, Any]]
    not_routed_by: dict[str, str]
    extra_config: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    metrics: dict[str, tuple[str, ...]] = field(default_factory=dict)
    metrics_every: float = 0.0  # seconds between its metric updates (0: as it counts)
    sender_needs_router: str | None = None  # why a prefill must get requests from the router only
    fails_with: tuple[KnownFailure, ...] = ()  # what real runs found broken, by vLLM version

    def listeners(
        self, settings: dict[str, Any], kv_role: str, tp: int = 1, dp: int = 1
    ) -> list[tuple[str, int]]:
        """(name, number) of the ports a pod with these settings, kv role, TP and DP listens
        on, as the chart declares them (pd-stack.connectorPorts)."""
        found: list[tuple[str, int]] = []
        for port in self.ports:
            if kv_role not in port.listen_on or not all(settings.get(f) for f in port.when):
                continue
            base = setting(settings, port.key)
            if isinstance(base, str) and base.isdigit():  # production-stack files quote some
                base = int(base)
            if isinstance(base, bool) or not isinstance(base, int):  # unset, or schema-refused
                base = port.default or 0
            found += port.ports(base, tp, dp)
        return found


@dataclass(frozen=True)
class Table:
    connectors: dict[str, Connector]  # by kvTransfer.connector value
    tutorial_lmcache: Connector  # the PD tutorial's lmcacheConfig form
    kv_transfer_fields: dict[str, dict[str, str]]
    v0_engine: dict[str, str]  # the vLLM versions that still have the V0 engine, and why
    router_images: dict[str, dict[str, Any]]  # by routerSpec.type (llm-d: its release table)
    transfer_evidence: dict[str, Any]
    lmcache_metrics: tuple[dict[str, str], ...]  # LMCache's own metrics: name, counts, help
    raw: dict[str, Any]  # the file as loaded (for the schema builder)


def _port(data: dict[str, Any]) -> Port:
    if data["count"] not in _COUNTS:
        raise ValueError(f"port {data['name']}: count must be one of {sorted(_COUNTS)}")
    return Port(
        name=data["name"],
        key=tuple(data["key"]),
        default=data.get("default"),
        count=data["count"],
        listen_on=tuple(data["listenOn"]),
        when=tuple(data.get("when", ())),
        what=data.get("what", ""),
    )


def _connector(name: str, settings_key: str, data: dict[str, Any]) -> Connector:
    metrics = data.get("metrics") or {}
    return Connector(
        name=name,
        settings_key=settings_key,
        summary=data["summary"],
        fragment=data["fragment"],
        engine=data["engine"],
        kv_roles=dict(data.get("kvRoles", {})),
        kv_both=bool(data["kvBoth"]),
        kv_both_deprecated=data.get("kvBothDeprecated"),
        hetero_tp=bool(data["heteroTP"]),
        pairing=data["pairing"],
        pairing_when=tuple(data.get("pairingWhen", ())),
        smaller_prefill_blocks=bool(data.get("smallerPrefillBlocks", False)),
        ports=tuple(_port(port) for port in data.get("ports", ())),
        requires=tuple(
            Requirement(tuple(r["key"]), tuple(r["kvRoles"]), r["why"], r.get("unlessRouter"))
            for r in data.get("requires", ())
        ),
        routers={router: dict(facts or {}) for router, facts in data.get("routers", {}).items()},
        not_routed_by=dict(data.get("notRoutedBy", {})),
        extra_config=tuple(data.get("extraConfig", ())),
        env=tuple(data.get("env", ())),
        metrics={kind: tuple(names) for kind, names in metrics.items()},
        metrics_every=float(data.get("metricsEvery", 0)),
        sender_needs_router=data.get("senderNeedsRouter"),
        fails_with=tuple(
            KnownFailure(f["vllm"], " ".join(f["what"].split()), f["record"])
            for f in data.get("failsWith", ())
        ),
    )


def parse(data: dict[str, Any]) -> Table:
    return Table(
        connectors={
            name: _connector(name, "kvTransfer", entry)
            for name, entry in data["connectors"].items()
        },
        tutorial_lmcache=_connector(
            data["tutorialLMCache"]["kvConnector"], "lmcacheConfig", data["tutorialLMCache"]
        ),
        kv_transfer_fields=data["kvTransferFields"],
        v0_engine=data["v0Engine"],
        router_images=data["routerImages"],
        transfer_evidence=data["transferEvidence"],
        lmcache_metrics=tuple(dict(entry) for entry in data["lmcacheMetrics"]),
        raw=data,
    )


@functools.cache
def load(chart_dir: Path | None = None) -> Table:
    """The table of a chart directory; a chart without one (older or foreign) gets the bundled
    chart's table."""
    own = chart_dir / TABLE if chart_dir else None
    path = own if own and own.is_file() else bundled_chart_dir() / TABLE
    return parse(read_yaml(path))
