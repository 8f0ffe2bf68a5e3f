"""Rules on a pool's KV connector, from the connector table (helm/files/connectors.yaml): it exists
in the image's vLLM and engine, its kv role is one it has, and the settings each side needs are set.

Each error here has a twin in the chart (templates/_checks-connectors.tpl, same rule id
in its message).
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.connectors import setting
from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment, Pool, Version, format_version
from pdctl.rules.registry import Issue, rule
from pdctl.workloads import satisfies


def _outside(version: Version, versions: str) -> bool:
    """True when a version is outside a chart-style range (">=0.9.2, <0.23.0")."""
    from packaging.specifiers import SpecifierSet

    return format_version(version) not in SpecifierSet(versions.replace(" ", ""))


@rule(
    "PD012",
    "the KV connector (and its settings) exist in the image's vLLM version and engine",
    explain=(
        "the connector exists in the image's vLLM (`vllmVersion`, or a `vX.Y.Z` tag of "
        "`vllm/vllm-openai`), with the ranges of the connector table (NIXL from 0.9.0; PyNccl"
        " up to 0.10.0; P2pNccl from 0.9.2 to before 0.23.0; `loadFailurePolicy` from "
        "0.11.1); the connector's engine (V0 for PyNccl, V1 for the others) agrees with "
        "`vllmConfig.v1`"
    ),
)
def connector_available(deployment: Deployment) -> Iterator[Issue]:
    policy = deployment.table.kv_transfer_fields["loadFailurePolicy"]
    v0 = deployment.table.v0_engine
    for pool in deployment.pools:
        v0_key = _v0_key(pool)
        version, version_path = pool.version
        v0_gone = bool(v0_key and version and _outside(version, v0["vllmVersions"]))
        if v0_key and version and v0_gone:
            yield Issue(
                pool.at("vllmConfig", v0_key),
                f"vllmConfig.{v0_key} asks for the V0 engine, which vLLM "
                f"{format_version(version)} does not have ({v0['why']})",
                f"remove vllmConfig.{v0_key}: vLLM runs its V1 engine",
            )
        connector = pool.connector
        if not connector:
            continue
        if version and connector.vllm_versions and _outside(version, connector.vllm_versions):
            yield Issue(
                version_path,
                f"{connector.name} is not in vLLM {format_version(version)}: it exists only in "
                f"vLLM {connector.vllm_versions} ({connector.versions_why})",
                "use NixlConnector (or another current connector), or an image in that range",
            )
        if version and "loadFailurePolicy" in pool.kv_transfer:
            if _outside(version, policy["vllmVersions"]):
                yield Issue(
                    pool.at("kvTransfer", "loadFailurePolicy"),
                    f"vLLM {format_version(version)} has no kv_load_failure_policy (it needs "
                    f"vLLM {policy['vllmVersions']}: {policy['why']})",
                    "remove kvTransfer.loadFailurePolicy, or use a newer image",
                )
        v1 = str(pool.vllm.get("v1", ""))
        if connector.engine == "v1" and v0_key and not v0_gone:
            yield Issue(
                pool.at("vllmConfig", v0_key),
                f"vllmConfig.{v0_key} asks for the V0 engine but {connector.name} needs the vLLM "
                "V1 engine",
                f"drop vllmConfig.{v0_key}",
            )
        if connector.engine == "v0" and v1 == "1":
            yield Issue(
                pool.at("vllmConfig", "v1"),
                f"{connector.name} works only with the V0 engine but vllmConfig.v1 is 1",
                "remove vllmConfig.v1 (vLLM <= 0.10.0 runs V0 for it), or use NixlConnector",
            )


def _v0_key(pool: Pool) -> str | None:
    """The vllmConfig key that asks for vLLM's V0 engine (VLLM_USE_V1=0), if any."""
    if str(pool.vllm.get("v0", "")) == "1":
        return "v0"
    return "v1" if str(pool.vllm.get("v1", "")) == "0" else None


def _requirements(deployment: Deployment, pool: Pool) -> Iterator[Issue]:
    connector = pool.connector
    assert connector is not None
    for requirement in connector.requires:
        supplied = deployment.router_enabled and requirement.unless_router == deployment.router_type
        if supplied:
            continue
        if pool.kv_role in requirement.kv_roles and setting(pool.settings, requirement.key) in (
            None,
            "",
        ):
            yield Issue(
                pool.at(connector.settings_key, *requirement.key),
                f"{'.'.join(requirement.key)} is required on a {pool.kv_role} {connector.name} "
                f"pool: {requirement.why}",
            )


@rule(
    "PD018",
    "a pool's KV transfer is complete: one form, a role it has, the settings it needs",
    explain=(
        "a pool's KV transfer is complete: `lmcacheConfig` and `kvTransfer` are not both set;"
        " a prefill or decode pool has a connector; `kv_both` only where the connector has it"
        " (NIXL); the settings a side needs (LMCache sender `lmcache.proxyHost` unless the "
        "chart deploys the proxy, PyNccl decode `peerPool`)"
    ),
)
def connector_complete(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        connector = pool.connector
        if pool.kv_transfer and pool.lmcache.get("enabled"):
            yield Issue(
                pool.at("kvTransfer"),
                f"pool {pool.name!r} sets both lmcacheConfig (the tutorial's LMCache form) and "
                "kvTransfer",
                "use one of them: kvTransfer for current images, lmcacheConfig for the tutorial's",
            )
        if connector is None:
            if pool.role != "both":
                yield Issue(
                    pool.path,
                    f"pool {pool.name!r} is a {pool.role} pool but transfers no KV",
                    "set kvTransfer.connector (NixlConnector for current vLLM)",
                )
            continue
        if pool.kv_role == "kv_both" and not connector.kv_both:
            yield Issue(
                pool.connector_path,
                f"{connector.name} needs a prefill or a decode pool (kv_producer or kv_consumer)",
                "set the pool's role: prefill or decode",
            )
        yield from _requirements(deployment, pool)


@rule(
    "PD113",
    "a prefill or decode pool does not declare a kv_role its vLLM deprecates",
    Severity.warning,
    explain=(
        "a prefill or decode pool's `kvTransfer.kvRole: kv_both` where the connector table says "
        "the image's vLLM deprecates it (NixlConnector from vLLM 0.23.0, PR #43874: vLLM warns "
        "at every start and will use the roles); without kvRole the chart renders kv_producer "
        "and kv_consumer"
    ),
)
def deprecated_kv_both(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        connector = pool.connector
        declared = pool.kv_transfer.get("kvRole")
        if not connector or not connector.kv_both_deprecated or pool.role == "both":
            continue
        version, _ = pool.version
        if declared != "kv_both" or (
            version is not None and not satisfies(version, connector.kv_both_deprecated)
        ):
            continue
        which = f"vLLM {format_version(version)}" if version is not None else "current vLLM"
        yield Issue(
            pool.at("kvTransfer", "kvRole"),
            f"{connector.name} pool {pool.name!r} ({pool.role}) declares kv_role kv_both, which "
            f"{which} deprecates for {connector.name} (it warns at every start)",
            f"drop kvTransfer.kvRole: the chart renders {connector.kv_roles.get(pool.role)} for a "
            f"{pool.role} pool",
        )
