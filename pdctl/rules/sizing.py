"""A pool's cache volume and memory against its model's size, for models in the planner's catalog
(pdctl/plan/catalog/models.yaml): a 70B model on a 50Gi volume fails only at download time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pdctl.findings import Severity
from pdctl.rules.model import Deployment
from pdctl.rules.registry import Issue, rule

GIB = 2**30
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTPE]i?|[km])?$")
_FACTOR = {
    None: 1,
    "k": 10**3,
    "K": 10**3,  # Kubernetes writes k; K is accepted by the schema's quantity pattern too
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 10**-3,
}


def quantity_bytes(value: Any) -> float | None:
    """A Kubernetes quantity (50Gi, 48G, 1.5Ti) in bytes; None when it is not one."""
    match = _QUANTITY.match(str(value).strip()) if isinstance(value, (str, int)) else None
    if not match or match[2] not in _FACTOR:
        return None
    return float(match[1]) * _FACTOR[match[2]]


@rule(
    "PD109",
    "a known model fits its cache volume and memory request",
    Severity.warning,
)
def model_fits_pod(deployment: Deployment) -> Iterator[Issue]:
    from pdctl.plan import catalog, sizing  # the catalogs load only when a pool exists

    for pool in deployment.pools:
        known = catalog.find_model(str(pool.spec.get("modelURL", "")))
        if known is None:
            continue
        need = sizing.pod(known.arch, max(pool.gpus, 1))
        name = known.arch.name
        volume = pool.spec.get("pvcStorage")
        if isinstance(volume, str) and not pool.spec.get("pvcExistingClaimName"):
            size = quantity_bytes(volume)
            if size is not None and size < need.checkpoint_gib * GIB:
                yield Issue(
                    pool.at("pvcStorage"),
                    f"pvcStorage {volume} is smaller than {name}'s checkpoint "
                    f"({need.checkpoint_gib:.0f} GiB): the download will fail",
                    f"pvcStorage: {need.cache_gib}Gi (what `pdctl plan` sizes)",
                )
        memory = quantity_bytes(pool.spec.get("requestMemory"))
        if memory is not None and memory < need.weights_gib * GIB:
            yield Issue(
                pool.at("requestMemory"),
                f"requestMemory {pool.spec['requestMemory']} is smaller than {name}'s weights "
                f"({need.weights_gib:.0f} GiB), which pass through host memory while loading",
                f"requestMemory: {need.memory_gib}Gi (what `pdctl plan` sizes)",
            )
