"""Rules on single pools: names, GPUs, memory, and legal but risky choices (warnings)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pdctl import ucx, workloads
from pdctl.findings import Severity
from pdctl.naming import NAME_LIMIT
from pdctl.rules.deployment import POOLS_PATH, Deployment, Pool, as_dict, as_int, as_number
from pdctl.rules.registry import Issue, rule
from pdctl.secrets import is_placeholder
from pdctl.values.paths import KeyPath


@rule(
    "PD007",
    "object names stay within 63 characters after the release prefix",
    explain=(
        "`<release>-<pool>-deployment-vllm`, `-engine-service`, `-storage-claim` fit in 63 "
        "characters (validate only: Kubernetes refuses a long name at install)"
    ),
)
def name_lengths(deployment: Deployment) -> Iterator[Issue]:
    """Validate only: Kubernetes refuses the object at install with its own message (not a silent
    failure), and helm template has no length limit, so the chart does not repeat this check."""
    for pool in deployment.pools:
        for name in [
            *deployment.release.pool_objects(pool.name, pool.spec, pool.kind),
            *_group_pod_names(deployment, pool),
        ]:
            if len(name) > NAME_LIMIT:
                yield Issue(
                    pool.at("name"),
                    f"{name!r} is {len(name)} characters; Kubernetes allows {NAME_LIMIT}",
                    f"shorten the pool name or the release name ({deployment.release.name!r})",
                )
                break


def _group_pod_names(deployment: Deployment, pool: Pool) -> list[str]:
    """The longest pod name of a LeaderWorkerSet group (<lws>-<group>-<worker>; a pod's name is
    its hostname, at most 63 characters): the pool's own LeaderWorkerSet, or the one the
    DisaggregatedSet controller names <set>-<slice>-<revision>-<pool>."""

    kind = pool.kind
    if kind == "Deployment":
        return []
    if kind == "LeaderWorkerSet":
        lws = deployment.release.pool_leader_worker_set(pool.name)
    else:
        table = workloads.load(deployment.chart_dir).disaggregated_set
        slices = as_int(deployment.disaggregated_set.get("slices"), 1)
        revision = "x" * int(table["revisionLength"])
        lws = f"{deployment.release.disaggregated_set}-{max(slices - 1, 0)}-{revision}-{pool.name}"
    worker = f"-{pool.nodes - 1}" if pool.nodes > 1 else ""
    return [f"{lws}-{max(pool.replicas - 1, 0)}{worker}"]


@rule(
    "PD011",
    "gpuMemoryUtilization between 0.5 and 0.95 (the schema bounds it to (0, 1])",
    Severity.warning,
    explain="gpuMemoryUtilization above 0.95 or below 0.5 (the schema bounds it to (0, 1])",
)
def memory_utilization(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        value = as_number(pool.vllm.get("gpuMemoryUtilization"))
        if value is None or not 0 < value <= 1:
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


def _is_pd(deployment: Deployment) -> bool:
    return bool(deployment.pairs())


@rule(
    "PD101",
    "PD on a small workload rarely helps",
    Severity.warning,
    explain="PD where it rarely helps: prefill maxModelLen < 2048, or a single GPU in total",
)
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


@rule("PD102", "hostIPC weakens pod isolation", Severity.warning, explain="`hostIPC: true`")
def host_ipc(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        if pool.spec.get("hostIPC") is True:
            yield Issue(
                pool.at("hostIPC"),
                f"pool {pool.name!r} shares the node's IPC namespace",
                "only UCX cuda_ipc between pods on one node needs it; prefer UCX_TLS without "
                "cuda_ipc",
            )


@rule(
    "PD103",
    "hf_token is a placeholder",
    Severity.warning,
    explain="a placeholder `hf_token` such as `<your-hf-token>`",
)
def placeholder_token(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        token = pool.spec.get("hf_token")
        if isinstance(token, str) and is_placeholder(token):
            yield Issue(
                pool.at("hf_token"),
                f"hf_token of pool {pool.name!r} is a placeholder (such as <your-hf-token> or "
                "hf_xxx), not a token",
                "set a real token with --set, or reference a Secret: "
                "hf_token: {secretName: ..., secretKey: ...}",
            )


_PLACEHOLDER_IMAGE = re.compile(r"example\.(com|org|net)|[<>]|your-|changeme|placeholder", re.I)


def _images(deployment: Deployment) -> Iterator[tuple[KeyPath, str]]:
    for pool in deployment.pools:
        yield pool.at("repository"), f"{pool.spec.get('repository')}:{pool.spec.get('tag')}"
    if deployment.router_enabled:
        router = deployment.router
        yield ("routerSpec", "repository"), f"{router.get('repository')}:{router.get('tag')}"


@rule(
    "PD105",
    "an image is a placeholder",
    Severity.warning,
    explain=(
        "a placeholder image (`example.com`, `<...>`, `your-...`) for an engine pool or the router"
    ),
)
def placeholder_image(deployment: Deployment) -> Iterator[Issue]:
    for path, image in _images(deployment):
        if _PLACEHOLDER_IMAGE.search(image):
            yield Issue(
                path,
                f"image {image!r} looks like a placeholder; pods will not pull it",
                "set repository and tag to an image your cluster can pull",
            )


@rule(
    "PD106",
    "replicas of a pool share a ReadWriteOnce claim",
    Severity.warning,
    explain=(
        "several replicas of a pool sharing one ReadWriteOnce cache claim (only pods on one "
        "node can mount it)"
    ),
)
def shared_rwo_claim(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        modes = pool.spec.get("pvcAccessMode")
        modes = modes if isinstance(modes, list) and modes else ["ReadWriteOnce"]
        pods = pool.replicas * pool.nodes
        if pool.spec.get("pvcStorage") and pods > 1 and "ReadWriteOnce" in modes:
            yield Issue(
                pool.at("pvcAccessMode" if "pvcAccessMode" in pool.spec else "pvcStorage"),
                f"pool {pool.name!r} has {pods} pods ({pool.replicas} replica(s) of "
                f"{pool.nodes} pod(s)) sharing one ReadWriteOnce claim: only pods on the node "
                "that mounted it can start",
                "set pvcAccessMode: [ReadWriteMany] with a StorageClass that offers it, or drop "
                "pvcStorage (each pod then downloads the model into an emptyDir)",
            )


def _ucx_tls(deployment: Deployment, pool: Pool) -> tuple[str, KeyPath] | None:
    """The pool's UCX_TLS and where it is set: its env, the shared env, or network.ucxTls."""
    engine = as_dict(deployment.values.get("servingEngineSpec"))
    for env, path in (
        (pool.spec.get("env"), pool.at("env")),
        (engine.get("env"), ("servingEngineSpec", "env")),
    ):
        for index, entry in enumerate(env if isinstance(env, list) else []):
            if isinstance(entry, dict) and entry.get("name") == ucx.TLS_ENV:
                return str(entry.get("value", "")), (*path, index)
    network = as_dict(pool.spec.get("network"))
    if network.get("ucxTls"):
        return str(network["ucxTls"]), pool.at("network", "ucxTls")
    return None


@rule(
    "PD107",
    "UCX cuda_ipc between pods needs hostIPC",
    Severity.warning,
    explain=(
        "`cuda_ipc` in `UCX_TLS` (`network.ucxTls` or env) without `hostIPC: true` (CUDA IPC "
        "needs one IPC namespace)"
    ),
)
def cuda_ipc_without_host_ipc(deployment: Deployment) -> Iterator[Issue]:
    """CUDA IPC hands GPU memory handles between processes, which needs them in one IPC
    namespace: containers get it with hostIPC (docker's --ipc=host)."""
    for pool in deployment.pools:
        found = _ucx_tls(deployment, pool)
        if (
            found
            and ucx.CUDA_IPC in ucx.transports(found[0])
            and pool.spec.get("hostIPC") is not True
        ):
            yield Issue(
                found[1],
                f"pool {pool.name!r} lists cuda_ipc in UCX_TLS ({found[0]}) without hostIPC: "
                "UCX cannot use it between pods, and transfers fall back to the other transports",
                "set hostIPC: true on the pools that use cuda_ipc (pods on one node), or drop "
                "cuda_ipc from UCX_TLS",
            )


# Hugging Face organisations whose model repositories are gated (the user must accept a
# license before downloading): Meta's Llama models and Google's Gemma models.
_GATED = ("meta-llama/", "google/gemma")


@rule(
    "PD108",
    "a gated model without a Hugging Face token",
    Severity.warning,
    explain="a gated Hugging Face model family (`meta-llama/`, `google/gemma`) without `hf_token`",
)
def gated_model_without_token(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        model = str(pool.spec.get("modelURL", ""))
        if model.startswith(_GATED) and not pool.spec.get("hf_token"):
            yield Issue(
                pool.at("modelURL"),
                f"{model} is a gated Hugging Face repository and pool {pool.name!r} has no "
                "hf_token: the download will be refused",
                "accept the model's license on huggingface.co, then set hf_token: "
                "{secretName: ..., secretKey: ...} (a Secret holding your token)",
            )
