"""Rules on single pools: names, GPUs, memory, and legal but risky choices (warnings)."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.naming import NAME_LIMIT
from pdctl.rules.model import POOLS_PATH, Deployment
from pdctl.rules.registry import Issue, rule

_PLACEHOLDERS = ("<", "your-hf-token", "changeme", "xxx", "hf_xxx", "token-here")


@rule("PD016", "engines enabled need at least one pool")
def pools_exist(deployment: Deployment) -> Iterator[Issue]:
    if deployment.engines_enabled and not deployment.pools:
        yield Issue(
            POOLS_PATH,
            "servingEngineSpec.modelSpec has no engine pool but servingEngineSpec.enableEngine "
            "is true",
            "add a pool, or set servingEngineSpec.enableEngine: false to render only the router",
        )


@rule("PD006", "pool names are unique")
def unique_names(deployment: Deployment) -> Iterator[Issue]:
    seen: dict[str, int] = {}
    for pool in deployment.pools:
        if pool.name in seen:
            yield Issue(
                pool.at("name"),
                f"pool name {pool.name!r} is used twice (also modelSpec[{seen[pool.name]}])",
                "every pool needs its own name: it names the pool's Deployment and Service",
            )
        seen.setdefault(pool.name, pool.index)


@rule("PD007", "object names stay within 63 characters after the release prefix")
def name_lengths(deployment: Deployment) -> Iterator[Issue]:
    """Validate only: Kubernetes refuses the object at install with its own message (not a silent
    failure), and helm template has no length limit, so the chart does not repeat this check."""
    for pool in deployment.pools:
        for name in deployment.release.pool_objects(pool.name, bool(pool.spec.get("pvcStorage"))):
            if len(name) > NAME_LIMIT:
                yield Issue(
                    pool.at("name"),
                    f"{name!r} is {len(name)} characters; Kubernetes allows {NAME_LIMIT}",
                    f"shorten the pool name or the release name ({deployment.release.name!r})",
                )
                break


@rule("PD010", "GPUs per pod equal tensor x pipeline x data parallel size")
def gpus_match_parallelism(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        needed = pool.tp * pool.pp * pool.dp
        if "requestGPU" not in pool.spec and needed == 1:
            continue
        if pool.gpus != needed:
            yield Issue(
                pool.at("requestGPU"),
                f"pool {pool.name!r} requests {pool.gpus} GPU(s) per pod but tensor x pipeline x "
                f"data parallelism is {pool.tp} x {pool.pp} x {pool.dp} = {needed}",
                f"set requestGPU: {needed}",
            )


@rule(
    "PD011",
    "gpuMemoryUtilization between 0.5 and 0.95 (the schema bounds it to (0, 1])",
    Severity.warning,
)
def memory_utilization(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        value = pool.vllm.get("gpuMemoryUtilization")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
            continue  # the schema refuses it
        path = pool.at("vllmConfig", "gpuMemoryUtilization")
        if value > 0.95:
            yield Issue(
                path,
                f"gpuMemoryUtilization {value} leaves little room for CUDA graphs and transfer "
                "buffers; pods may run out of memory",
                "0.85-0.92 is usual; PD transfer buffers need headroom",
            )
        elif value < 0.5:
            yield Issue(
                path, f"gpuMemoryUtilization {value} leaves most of the GPU unused for KV cache"
            )


@rule("PD015", "a pool's label model equals its name (the router tells pools apart by it)")
def model_label(deployment: Deployment) -> Iterator[Issue]:
    engine = deployment.values.get("servingEngineSpec")
    common = engine.get("labels") if isinstance(engine, dict) else None
    for pool in deployment.pools:
        for labels, path in (
            (pool.spec.get("labels"), pool.at("labels", "model")),
            (common, ("servingEngineSpec", "labels", "model")),
        ):
            if isinstance(labels, dict) and "model" in labels and str(labels["model"]) != pool.name:
                yield Issue(
                    path,
                    f"label model is {labels['model']!r} but pool is named {pool.name!r}; the "
                    "chart refuses this",
                    f"set labels.model: {pool.name} or drop it",
                )


def _is_pd(deployment: Deployment) -> bool:
    return bool(deployment.pairs())


@rule("PD101", "PD on a small workload rarely helps", Severity.warning)
def small_pd(deployment: Deployment) -> Iterator[Issue]:
    if not _is_pd(deployment):
        return
    for pool in deployment.by_role("prefill"):
        length = pool.vllm.get("maxModelLen")
        if isinstance(length, int) and not isinstance(length, bool) and length < 2048:
            yield Issue(
                pool.at("vllmConfig", "maxModelLen"),
                f"maxModelLen {length} is short: prefill of short prompts is cheap, and PD "
                "adds a KV transfer per request",
                "PD pays off for long prompts; consider one aggregated pool",
            )
    gpus = sum(pool.gpus * pool.replicas for pool in deployment.pools)
    if 0 < gpus < 2:
        yield Issue(
            POOLS_PATH,
            f"PD with {gpus} GPU in total: prefill and decode compete for one GPU",
            None,
        )


@rule("PD102", "hostIPC weakens pod isolation", Severity.warning)
def host_ipc(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        if pool.spec.get("hostIPC") is True:
            yield Issue(
                pool.at("hostIPC"),
                f"pool {pool.name!r} shares the node's IPC namespace",
                "only UCX cuda_ipc between pods on one node needs it; prefer UCX_TLS without "
                "cuda_ipc",
            )


@rule("PD103", "hf_token is a placeholder", Severity.warning)
def placeholder_token(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        token = pool.spec.get("hf_token")
        if isinstance(token, str) and any(mark in token.lower() for mark in _PLACEHOLDERS):
            yield Issue(
                pool.at("hf_token"),
                f"hf_token of pool {pool.name!r} looks like a placeholder ({token!r})",
                "set a real token with --set, or reference a Secret: "
                "hf_token: {secretName: ..., secretKey: ...}",
            )
