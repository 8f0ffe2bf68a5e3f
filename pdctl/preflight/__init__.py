"""pdctl preflight: before a deploy, on the nodes the prefill and decode pools would land on, a
pair of Jobs with the engine image reports GPUs, RDMA devices, NIXL and UCX (and the transport UCX
selects) and times a KV-sized NIXL transfer between the two pods; the verdict refuses what cannot
work, warns about what will be slow, and sets the planner's assumption against the measurement.

`jobs` builds the objects from the chart's render, `probe` is the script the pods run (standard
library and the image's nixl), `orchestrate` runs them on the cluster, `verdict` judges."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import defaults, pipeline
from pdctl.cluster import connect
from pdctl.errors import InputError
from pdctl.preflight import jobs
from pdctl.preflight.orchestrate import ProbeRun, Runner
from pdctl.preflight.verdict import (
    CHECKS,
    Assumption,
    ProbeFinding,
    Verdict,
    assumption,
    from_render,
    judge,
)

__all__ = [
    "Assumption",
    "DryRun",
    "ProbeFinding",
    "Options",
    "Result",
    "Verdict",
    "dry_run",
    "preflight",
]


@dataclass(frozen=True)
class Options:
    values_files: tuple[str, ...]
    set_values: tuple[str, ...] = ()
    release: str = defaults.RELEASE
    namespace: str = defaults.NAMESPACE
    chart: Path | None = None
    helm_path: str | None = None
    skip_validation: bool = False
    size_bytes: int = 256 << 20
    timeout: int = defaults.WAIT_S  # seconds the probes may take once running
    prefill_pool: str | None = None
    decode_pool: str | None = None
    gpu_type: str | None = None
    network_gbps: float | None = None
    keep: bool = False
    poll: float = 2.0


@dataclass
class PreflightResult:
    plan: jobs.ProbeJobs
    run: ProbeRun
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)  # the values' own warnings

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.verdict.as_dict(),
            "namespace": self.plan.namespace,
            "run": self.plan.run,
            "size_bytes": self.plan.size_bytes,
            "pools": {
                jobs.TARGET: self.plan.target.as_dict(),
                jobs.INITIATOR: self.plan.initiator.as_dict(),
            },
            "probes": {
                jobs.TARGET: self.run.target.as_dict(),
                jobs.INITIATOR: self.run.initiator.as_dict(),
            },
            "kept": [f"{kind}/{name}" for kind, name in self.run.created] if self.run.kept else [],
            "timed_out": self.run.timed_out,
        }


@dataclass
class DryRun:
    """What a preflight would create and judge, from the render alone (no cluster)."""

    plan: jobs.ProbeJobs
    assumed: Assumption
    findings: list[ProbeFinding]  # what the render already shows
    warnings: list[str] = field(default_factory=list)  # the values' own warnings

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "namespace": self.plan.namespace,
            "run": self.plan.run,
            "size_bytes": self.plan.size_bytes,
            "timeout": self.plan.timeout,
            "pools": {
                jobs.TARGET: self.plan.target.as_dict(),
                jobs.INITIATOR: self.plan.initiator.as_dict(),
            },
            "objects": self.plan.objects(),
            "checks": [{"id": key, "level": level, "when": when} for key, level, when in CHECKS],
            "findings": [f.as_dict() for f in self.findings],
            "assumed": self.assumed.as_dict(),
        }


def prepare(options: Options) -> tuple[jobs.ProbeJobs, list[str]]:
    """The values through the pipeline and the chart's render, then the plan of the probes
    (InputError when the values render no prefill/decode pair)."""
    prepared = pipeline.prepare(
        list(options.values_files),
        options.set_values,
        options.release,
        options.namespace,
        options.chart,
        options.skip_validation,
        options.helm_path,
    )
    rendered = pipeline.render(
        prepared.values,
        options.release,
        options.namespace,
        options.chart,
        helm_path=options.helm_path,
    )
    try:
        plan = jobs.plan(
            rendered.objects,
            options.namespace,
            options.size_bytes,
            options.timeout,
            options.prefill_pool,
            options.decode_pool,
        )
    except ValueError as error:
        raise InputError(
            f"nothing to preflight: {error}",
            hint="preflight measures the KV path between a prefill and a decode pool "
            "(--prefill-pool, --decode-pool name them)",
        ) from None
    return plan, [line for finding in prepared.warnings for line in finding.lines()]


def preflight(options: Options, say: Callable[[str], None] = lambda _: None) -> PreflightResult:
    plan, warnings = prepare(options)
    assumed = assumption(plan, options.gpu_type, options.network_gbps)
    cluster = connect()
    run = Runner(cluster, plan, say=say, poll=options.poll).run(keep=options.keep)
    return PreflightResult(plan, run, judge(plan, run, assumed), warnings)


def dry_run(options: Options) -> DryRun:
    """The preflight's plan, its objects and the checks, without contacting a cluster."""
    plan, warnings = prepare(options)
    assumed = assumption(plan, options.gpu_type, options.network_gbps)
    return DryRun(plan, assumed, from_render(plan), warnings)
