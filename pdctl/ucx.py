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


def same_host_hint(where: str = "prefill and decode run on one host") -> str:
    """fix() where the two sides are known to share a host (`where` says so)."""
    return f"{where}: {fix()}"


def cluster_hint() -> str:
    """fix() as a conditional, for a cluster, where the pods run is not known."""
    return f"if prefill and decode run on one node without NVLink, {fix()}"
