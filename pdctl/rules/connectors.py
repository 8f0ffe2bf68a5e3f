"""Rules on KV connectors: available in the image's vLLM, and their TP constraints.

Version ranges come from the chart's files/vllm-support.yaml (the same file the chart's own
checks read). PyNcclConnector is V0 only; the V1 connectors need the V1 engine; PyNccl and
P2pNccl need the same tensor parallelism on both sides; NIXL, Mooncake and LMCache allow
heterogeneous TP.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from pdctl.chart import bundled_chart_dir
from pdctl.rules.model import Deployment, format_version
from pdctl.rules.registry import Issue, rule

V0_ONLY = {"PyNcclConnector"}
V1_ONLY = {"LMCacheConnectorV1", "NixlConnector", "MooncakeConnector", "P2pNcclConnector"}
SAME_TP = {"PyNcclConnector", "P2pNcclConnector"}


@functools.cache
def vllm_support(chart_dir: Path | None = None) -> dict[str, Any]:
    """The chart's files/vllm-support.yaml (vLLM version ranges of connectors and fields); a
    chart without one (an older or a foreign chart) gets the bundled chart's table."""
    name = Path("files") / "vllm-support.yaml"
    own = chart_dir / name if chart_dir else None
    path = own if own and own.is_file() else bundled_chart_dir() / name
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _outside(version: tuple[int, int, int], versions: str) -> bool:
    """True when a version is outside a chart-style range (">=0.9.2, <0.23.0")."""
    from packaging.specifiers import SpecifierSet

    return format_version(version) not in SpecifierSet(versions.replace(" ", ""))


@rule("PD012", "the KV connector (and its settings) exist in the image's vLLM version and engine")
def connector_available(deployment: Deployment) -> Iterator[Issue]:
    support = vllm_support(deployment.chart_dir)
    for pool in deployment.pools:
        connector, path = pool.connector
        if not connector:
            continue
        version, version_path = pool.version
        known = support["connectors"].get(connector)
        if version and known and _outside(version, known["versions"]):
            yield Issue(
                version_path,
                f"{connector} is not in vLLM {format_version(version)}: it exists only in vLLM "
                f"{known['versions']} ({known['why']})",
                "use NixlConnector (or another current connector), or an image in that range",
            )
        policy = support["fields"]["loadFailurePolicy"]
        if (
            version
            and "loadFailurePolicy" in pool.kv_transfer
            and _outside(version, policy["versions"])
        ):
            yield Issue(
                pool.at("kvTransfer", "loadFailurePolicy"),
                f"vLLM {format_version(version)} has no kv_load_failure_policy (it needs vLLM "
                f"{policy['versions']}: {policy['why']})",
                "remove kvTransfer.loadFailurePolicy, or use a newer image",
            )
        v1 = pool.vllm.get("v1")
        if connector in V1_ONLY and str(v1) == "0":
            yield Issue(
                pool.at("vllmConfig", "v1"),
                f"{connector} needs the vLLM V1 engine but vllmConfig.v1 is 0",
                "drop vllmConfig.v1 or set it to 1",
            )
        if connector in V0_ONLY and str(v1) == "1":
            yield Issue(
                pool.at("vllmConfig", "v1"),
                f"{connector} works only with the V0 engine but vllmConfig.v1 is 1",
                "set vllmConfig.v1: 0 (vLLM <= 0.10.0), or use NixlConnector",
            )


@rule("PD013", "tensor parallelism of prefill and decode fits the connector")
def connector_tp(deployment: Deployment) -> Iterator[Issue]:
    for prefill, decode in deployment.pairs():
        connector = prefill.connector[0] or decode.connector[0]
        if connector in SAME_TP and prefill.tp != decode.tp:
            yield Issue(
                decode.at("vllmConfig", "tensorParallelSize"),
                f"{connector} needs the same tensorParallelSize on prefill and decode "
                f"({prefill.name!r}: {prefill.tp}, {decode.name!r}: {decode.tp})",
                "use NixlConnector for heterogeneous TP",
            )
        p_connector, d_connector = prefill.connector[0], decode.connector[0]
        if p_connector and d_connector and p_connector != d_connector:
            yield Issue(
                decode.connector[1],
                f"prefill {prefill.name!r} uses {prefill.connector[0]} but decode "
                f"{decode.name!r} uses {decode.connector[0]}",
                "both sides of a PD pair use the same connector",
            )
