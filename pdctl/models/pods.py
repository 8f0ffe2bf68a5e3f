"""Resources of an engine pod: CPU, memory, the model cache volume and /dev/shm, from the model
and the GPU workers the pod runs (docs/sizing.md: "Pods")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdctl.models.config import ModelArch
from pdctl.models.memory import GiB, checkpoint_bytes, weight_bytes

# ---- pod sizing heuristics (docs/sizing.md: "Pods") -------------------------------------------
CPU_PER_WORKER = 2  # vLLM's Kubernetes guide requests 2 CPUs for a one-GPU pod
HOST_GIB_PER_WORKER = 4  # Python runtime, CUDA context, tokenizer per GPU worker (heuristic)
SHM_GIB_PER_WORKER = 2  # vLLM's Kubernetes guide mounts a 2Gi /dev/shm for a one-GPU pod
CACHE_HEADROOM = 1.1  # the cache volume: checkpoint x 1.1 + 2 GiB (tokenizer, config, revisions)
CACHE_EXTRA_GIB = 2


@dataclass(frozen=True)
class PodResources:
    cpu: int
    memory_gib: int
    cache_gib: int
    shm_gib: int
    checkpoint_gib: float
    weights_gib: float


def _round_up(value: float, step: int) -> int:
    return int(math.ceil(value / step) * step)


def pod(arch: ModelArch, workers: int) -> PodResources:
    """Resources of one engine pod with `workers` GPU workers (docs/sizing.md: "Pods")."""
    weights = weight_bytes(arch) / GiB
    checkpoint = checkpoint_bytes(arch) / GiB
    return PodResources(
        cpu=CPU_PER_WORKER * workers,
        memory_gib=_round_up(weights + HOST_GIB_PER_WORKER * workers, 4),
        cache_gib=_round_up(checkpoint * CACHE_HEADROOM + CACHE_EXTRA_GIB, 10),
        shm_gib=SHM_GIB_PER_WORKER * workers,
        checkpoint_gib=checkpoint,
        weights_gib=weights,
    )
