"""Warnings on a pool's KV connector, from the connector table (helm/files/connectors.yaml). The
connector errors (it exists in the image's vLLM and engine, its kv role is one it has, the
settings each side needs are set) are the chart's: helm/templates/_checks-connectors.tpl.
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment, format_version
from pdctl.rules.registry import Issue, rule
from pdctl.workloads import satisfies


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
        if not connector or not connector.kv_both_deprecated or pool.role == "both":
            continue
        # kv_both on a prefill or decode pool is declared: the table's kvRoles give the roles.
        version, _ = pool.version
        if pool.kv_role != "kv_both" or (
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


@rule(
    "PD118",
    "a pool's connector has not failed on a real run with the image's vLLM",
    Severity.warning,
    explain=(
        "the connector table's failsWith: what a run on a real GPU found broken for a connector "
        "with the image's vLLM version (LMCacheConnectorV1 on vLLM 0.26: 16 requests in flight "
        "failed on one H200; benchmarks/records/lmcache-h200-1gpu-equal-buffers.json, tutorial "
        "19); "
        "silent where the image states no vLLM version"
    ),
)
def failed_on_a_real_run(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        version, _ = pool.version
        if pool.connector is None or version is None:
            continue
        for failure in pool.connector.fails_with:
            if satisfies(version, failure.vllm):
                yield Issue(
                    pool.at("kvTransfer", "connector"),
                    f"{pool.connector.name} pool {pool.name!r} runs vLLM "
                    f"{format_version(version)}: {failure.what} ({failure.record})",
                    "use kvTransfer.connector: NixlConnector, which ran PD on that vLLM "
                    "(tutorial 17), or an image whose vLLM the run did not cover",
                )


@rule(
    "PD119",
    "an LMCache sender's PD buffer holds what LMCache's proxy admits",
    Severity.warning,
    explain=(
        "with LMCache's PD proxy (`routerSpec.type: lmcache-proxy`), a prefill pool's "
        "`kvTransfer.kvBufferSize` (LMCACHE_PD_BUFFER_SIZE, 1 GiB unless set) is at least the "
        "smallest decode pool's: the proxy admits prompts while their KV fits that buffer "
        "(--pd-buffer-size), so a smaller sender's fills under load (on one H200 at 16 in flight "
        "the sender logged 'store only 0 total chunks' and the pair stalled; "
        "benchmarks/records/lmcache-h200-1gpu-v1runner.json, tutorial 19)"
    ),
)
def lmcache_sender_buffer(deployment: Deployment) -> Iterator[Issue]:
    lmcache = [p for p in deployment.pools if p.summary.lmcache_buffer and p.summary.lmcache_proxy]
    receivers = [p.summary.lmcache_buffer for p in lmcache if p.summary.kv_role == "kv_consumer"]
    if not receivers:
        return
    admitted = min(receivers)
    for pool in lmcache:
        held = pool.summary.lmcache_buffer
        if pool.summary.kv_role == "kv_producer" and held < admitted:
            yield Issue(
                pool.at("kvTransfer", "kvBufferSize"),
                f"LMCache sender pool {pool.name!r} has a PD buffer of {held:,} bytes, and "
                f"LMCache's proxy admits prompts up to the decode pools' {admitted:,}: under "
                "load the sender is asked to hold more KV than fits (on one H200 at 16 in "
                "flight it stored nothing more and the pair stalled)",
                f"set kvTransfer.kvBufferSize: {admitted} on {pool.name!r}",
            )
