"""A pool's cache volume, memory and startup budget against its model's size, for models in the
planner's catalog (pdctl/models/catalog/models.yaml): a 70B model on a 50Gi volume fails only at
download time, and one whose startup probe ends before it has loaded is restarted for ever."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from pdctl.findings import Severity
from pdctl.models import catalog, memory, pods
from pdctl.models.catalog import CatalogModel
from pdctl.rules.deployment import Deployment, Pool, as_dict, as_int
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


def _known_models(deployment: Deployment) -> Iterator[tuple[Pool, CatalogModel]]:
    """Each pool whose model the planner's catalog has, with that model."""

    for pool in deployment.pools:
        known = catalog.find_model(str(pool.spec.get("modelURL", "")))
        if known is not None:
            yield pool, known


@rule(
    "PD109",
    "a known model fits its cache volume and memory request",
    Severity.warning,
    explain=(
        "a model of the planner's catalog has a cache volume (`pvcStorage`) smaller than its "
        "checkpoint, or `requestMemory` smaller than its weights"
    ),
)
def model_fits_pod(deployment: Deployment) -> Iterator[Issue]:
    for pool, known in _known_models(deployment):
        need = pods.pod(known.arch, max(pool.gpus, 1))
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
        requested = quantity_bytes(pool.spec.get("requestMemory"))
        if requested is not None and requested < need.weights_gib * GIB:
            yield Issue(
                pool.at("requestMemory"),
                f"requestMemory {pool.spec['requestMemory']} is smaller than {name}'s weights "
                f"({need.weights_gib:.0f} GiB), which pass through host memory while loading",
                f"requestMemory: {need.memory_gib}Gi (what `pdctl plan` sizes)",
            )


# Kubernetes' defaults for a probe's periodSeconds and failureThreshold (core/v1 Probe).
_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _probe_seconds(probe: dict[str, Any]) -> int:
    """How long a startup probe lets a container start: initialDelaySeconds + periodSeconds x
    failureThreshold."""
    get = {k: as_int(probe.get(k), v) for k, v in _PROBE_DEFAULTS.items()}
    return get["initialDelaySeconds"] + get["periodSeconds"] * get["failureThreshold"]


@rule(
    "PD110",
    "a known model's engines get a startup budget long enough to download and load it",
    Severity.warning,
    explain=(
        "a model of the planner's catalog gets a startup probe (`initialDelaySeconds` + "
        "`periodSeconds` x `failureThreshold`, the pool's over the shared one) shorter than "
        "its checkpoint needs to download at 100 MiB/s and load (plus 10 minutes)"
    ),
)
def startup_budget(deployment: Deployment) -> Iterator[Issue]:
    shared = as_dict(as_dict(deployment.values.get("servingEngineSpec")).get("startupProbe"))
    for pool, known in _known_models(deployment):
        probe = {**shared, **as_dict(pool.spec.get("startupProbe"))}
        allowed = _probe_seconds(probe)
        needed = memory.startup_seconds(known.arch)
        if allowed >= needed:
            continue
        period = as_int(probe.get("periodSeconds"), _PROBE_DEFAULTS["periodSeconds"])
        delay = as_int(probe.get("initialDelaySeconds"), 0)
        threshold = math.ceil(max(needed - delay, 0) / max(period, 1))
        gib = memory.checkpoint_bytes(known.arch) / memory.GiB
        yield Issue(
            pool.at("startupProbe"),
            f"the startup probe gives {known.arch.name} {allowed // 60} minutes to start but its "
            f"checkpoint ({gib:.0f} GiB) needs about {math.ceil(needed / 60)} minutes to "
            f"download and load into an empty cache ({memory.STARTUP_DOWNLOAD_MIB_S} MiB/s, plus "
            f"{memory.STARTUP_BASE_S // 60} minutes); the kubelet would restart the engine first",
            f"startupProbe: {{failureThreshold: {threshold}}} (what `pdctl init` writes)",
        )
