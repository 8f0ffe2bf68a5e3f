"""PROMETHEUS_MULTIPROC_DIR for engines on one host (pdctl up): the chart mounts an emptyDir at the
rendered path in each pod (vllmConfig.prometheusMultiprocDir; LMCache pools by default), so every
engine's folder is its own and empty when it starts. Processes on one host would share the
rendered path, and each engine's /metrics would show every engine's counts; so each engine that
has the variable gets a folder of its own under the release's state folder, emptied before it
starts (prometheus_client's multiprocess mode reads every file in the folder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.local import state

if TYPE_CHECKING:
    from pdctl.local.layout import Process

ENV = "PROMETHEUS_MULTIPROC_DIR"


def own_folders(engines: Sequence[Process], root: Path) -> list[str]:
    """Point each engine's rendered PROMETHEUS_MULTIPROC_DIR at `root`/<engine>; the change for
    up's record (none when no engine has the variable)."""
    having = [e for e in engines if e.env.get(ENV)]
    for engine in having:
        engine.env[ENV] = str(root / engine.name)
    if not having:
        return []
    names = ", ".join(e.name for e in having)
    return [
        f"{names}: {ENV} a folder of its own under {root}, emptied before it starts "
        "(each pod has its own emptyDir)"
    ]


def fresh(engines: Sequence[Process]) -> None:
    """Each engine's PROMETHEUS_MULTIPROC_DIR made empty (state.emptied). Only after own_folders
    has pointed them under the release's state folder: never on a path the render names."""
    for engine in engines:
        if folder := engine.env.get(ENV):
            state.emptied(Path(folder))
