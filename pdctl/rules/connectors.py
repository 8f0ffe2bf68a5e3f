"""Rules on KV connectors: available in the image's vLLM, and their TP constraints.

Facts (see the project's reference notes on connectors): PyNcclConnector is V0 only and was
removed after vLLM 0.10.0; P2pNcclConnector arrived in about 0.9.2 and was removed in June 2026
(treated here as absent from 0.23.0 on); LMCacheConnectorV1 needs the V1 engine; PyNccl and
P2pNccl need the same tensor parallelism on both sides; NIXL, Mooncake and LMCache allow
heterogeneous TP.
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.rules.model import Deployment, format_version
from pdctl.rules.registry import Issue, rule

# connector -> (first version with it or None, first version without it or None)
AVAILABILITY: dict[str, tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]] = {
    "PyNcclConnector": (None, (0, 10, 1)),
    "P2pNcclConnector": ((0, 9, 2), (0, 23, 0)),
}
V0_ONLY = {"PyNcclConnector"}
V1_ONLY = {"LMCacheConnectorV1", "NixlConnector", "MooncakeConnector", "P2pNcclConnector"}
SAME_TP = {"PyNcclConnector", "P2pNcclConnector"}


@rule("PD012", "the KV connector exists in the image's vLLM version and engine")
def connector_available(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        connector, path = pool.connector
        if not connector:
            continue
        version, version_path = pool.version
        since, until = AVAILABILITY.get(connector, (None, None))
        if version and until and version >= until:
            yield Issue(
                version_path,
                f"{connector} was removed before vLLM {format_version(version)} (last in the "
                f"release before {format_version(until)})",
                "use NixlConnector (or another current connector), or an older image",
            )
        elif version and since and version < since:
            yield Issue(
                version_path,
                f"{connector} is not in vLLM {format_version(version)} (added in "
                f"{format_version(since)})",
                "use a newer image",
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
