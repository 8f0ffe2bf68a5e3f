"""UCX's CUDA IPC reads between engines on one host, said once for `pdctl up`, verify and preflight.

NIXL's UCX backend moves KV by a remote read of the other engine's GPU memory. UCX turns CUDA IPC
reads (get zcopy) off on a GPU without active NVLink (openucx/ucx PR #7566: concurrent reads were
slower than puts there) and then reads over TCP on loopback. Measured with vLLM 0.26 and NIXL
1.5.1, both engines of a 1P1D on one H200 (benchmarks/records/pdctl-up-h200-1gpu.json): 0.51 GB/s
as rendered (UCX chose tcp/lo, "software emulation"), 106 GB/s with
UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y (cuda_ipc zero-copy). NIXL's UCX plugin turns the reads on by
itself from its PR #2208 on; NIXL 1.5.1 did not.
"""

from __future__ import annotations

GET_ZCOPY_ENV = "UCX_CUDA_IPC_ENABLE_GET_ZCOPY"
TLS_ENV = "UCX_TLS"  # the transports UCX may use: a comma list, "all", or "^..." to exclude
CUDA_IPC = "cuda_ipc"
# LMCache 0.5.6 over NIXL on one H200 (vLLM 0.26): the first gap after prefill's token, which
# holds the KV transfer of a 2,048-token prompt, was 780 ms with the chart's UCX_TLS cuda_copy,tcp
# and 26 ms with cuda_ipc listed.
TLS_RECORD = "benchmarks/records/lmcache-h200-1gpu-v1runner.json"
GET_ZCOPY_ON = "y"
RECORD = "benchmarks/records/pdctl-up-h200-1gpu.json"
NIXL_PR = "https://github.com/ai-dynamo/nixl/pull/2208"
MEASURED = f"on one H200, 0.51 GB/s as rendered, 106 GB/s with it: {RECORD}"


def fix() -> str:
    """The setting, or the NIXL release, that lets UCX read GPU memory over CUDA IPC between two
    engines of one host instead of over TCP."""
    return (
        f"set {GET_ZCOPY_ENV}={GET_ZCOPY_ON} in the engines' env (servingEngineSpec.env), so that "
        f"UCX reads the other engine's GPU memory over CUDA IPC, not TCP ({MEASURED}), or use a "
        f"NIXL release after PR #2208 ({NIXL_PR}), whose UCX plugin turns these reads on by itself"
    )


def transports(tls: str) -> list[str]:
    """The names a UCX_TLS value lists."""
    return [name.strip() for name in tls.split(",") if name.strip()]


def with_cuda_ipc(tls: str) -> str | None:
    """`tls` (a UCX_TLS value) with cuda_ipc first, where it lists transports without it; None
    where it already allows cuda_ipc (listed, "all", or an exclusion list "^...") or is empty."""
    names = transports(tls)
    if not names or names[0].startswith("^") or "all" in names or CUDA_IPC in names:
        return None
    return ",".join([CUDA_IPC, *names])


def same_host_hint(where: str = "prefill and decode run on one host") -> str:
    """fix() where the two sides are known to share a host (`where` says so)."""
    return f"{where}: {fix()}"


def cluster_hint() -> str:
    """fix() as a conditional, for a cluster, where the pods run is not known."""
    return f"if prefill and decode run on one node without NVLink, {fix()}"
