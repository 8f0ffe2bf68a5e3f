"""The chart's workload table (helm/files/workloads.yaml): how a pool is rendered (Deployment,
LeaderWorkerSet or a DisaggregatedSet role), which command form a multi-node engine gets for its
vLLM version, and the LeaderWorkerSet and DisaggregatedSet facts the rules check.

The chart's templates read the same file (templates/_workloads.tpl); nothing here repeats a fact.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.chart import bundled_chart_dir, read_yaml

TABLE = Path("files") / "workloads.yaml"
DEPLOYMENT = "Deployment"
LEADER_WORKER_SET = "LeaderWorkerSet"
DISAGGREGATED_SET = "DisaggregatedSet"

Version = tuple[int, int, int]


def satisfies(version: Version, constraint: str) -> bool:
    """Whether a version meets a range of the table (">=0.9.0", ">=0.8.5, <0.11.0"; "," = and),
    as the chart's semverCompare reads it."""
    from packaging.specifiers import SpecifierSet

    return ".".join(map(str, version)) in SpecifierSet(constraint.replace(" ", ""))


@dataclass(frozen=True)
class EngineForm:
    """One way to run an engine over a LeaderWorkerSet group (engineForms)."""

    name: str
    data_parallel: str  # single (DP 1) or spanning (DP ranks over the pods)
    vllm_versions: str
    why: str
    leader: dict[str, Any]
    worker: dict[str, Any]


@dataclass(frozen=True)
class WorkloadTable:
    raw: dict[str, Any]

    @property
    def lws(self) -> dict[str, Any]:
        return dict(self.raw["lws"])

    @property
    def disaggregated_set(self) -> dict[str, Any]:
        return dict(self.raw["disaggregatedSet"])

    @property
    def forms(self) -> list[EngineForm]:
        return [
            EngineForm(
                name=form["name"],
                data_parallel=form["dataParallel"],
                vllm_versions=form["vllmVersions"],
                why=" ".join(str(form.get("why", "")).split()),
                leader=dict(form.get("leader") or {}),
                worker=dict(form.get("worker") or {}),
            )
            for form in self.raw["engineForms"]
        ]


def parse(data: dict[str, Any]) -> WorkloadTable:
    return WorkloadTable(raw=data)


@functools.cache
def load(chart_dir: Path | None = None) -> WorkloadTable:
    """The table of a chart directory, else the bundled chart's."""
    own = chart_dir / TABLE if chart_dir else None
    path = own if own and own.is_file() else bundled_chart_dir() / TABLE
    return parse(read_yaml(path))


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key path, pod template) of every pod template inside a rendered LeaderWorkerSet or
    DisaggregatedSet, so that they can be checked as Kubernetes PodTemplates."""
    kind = obj.get("kind")
    specs: list[tuple[str, dict[str, Any]]] = []
    if kind == LEADER_WORKER_SET:
        specs = [("spec", obj.get("spec") or {})]
    elif kind == DISAGGREGATED_SET:
        roles = (obj.get("spec") or {}).get("roles") or []
        specs = [(f"spec.roles[{i}].spec", role.get("spec") or {}) for i, role in enumerate(roles)]
    for where, spec in specs:
        template = spec.get("leaderWorkerTemplate") or {}
        for part in ("leaderTemplate", "workerTemplate"):
            if isinstance(template.get(part), dict):
                yield f"{where}.leaderWorkerTemplate.{part}", template[part]
