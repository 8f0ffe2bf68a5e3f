"""Beyond the one best layout: the Pareto frontier of throughput per GPU against TTFT and ITL, PD
and aggregated layouts together (`pdctl plan --pareto`), and the fewest GPUs that meet the targets
at a request rate (`pdctl plan --target-rate`). docs/sizing.md "Pareto frontier and target rate"."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pdctl.models.catalog import Gpu
from pdctl.plan import sizing
from pdctl.plan.aggregated import every_aggregated
from pdctl.plan.layout import (
    AggregatedEstimates,
    DoesNotFit,
    Estimates,
    Plan,
    PlannedPool,
    Request,
    RolePlan,
    Workload,
)
from pdctl.plan.objective import labels, need_tokens, shown


class Layout(Protocol):
    """A PD layout with its estimates: a plan, or a candidate of the search."""

    @property
    def prefill(self) -> RolePlan: ...
    @property
    def decode(self) -> RolePlan: ...
    @property
    def estimates(self) -> Estimates: ...
    @property
    def meets(self) -> tuple[bool, ...]: ...


@dataclass(frozen=True)
class Point:
    """One layout on the frontier, PD or aggregated, with what the objective reads of it."""

    mode: str  # pd | aggregated
    pools: tuple[PlannedPool, ...]
    gpus: int
    output_tokens_per_s_per_gpu: float  # over the GPUs given (the objective's measure)
    ttft_ms: float
    itl_ms: float
    meets: tuple[bool, ...]

    @classmethod
    def of(cls, req: Request, layout: Layout) -> Point:
        e = layout.estimates
        pools = (
            sizing.pool(req, "prefill", layout.prefill.engine, layout.prefill.replicas),
            sizing.pool(req, "decode", layout.decode.engine, layout.decode.replicas),
        )
        per_gpu = e.output_tokens_per_s / req.gpus
        return cls("pd", pools, e.gpus, per_gpu, e.ttft_ms, e.itl_ms, layout.meets)

    @classmethod
    def of_aggregated(cls, req: Request, a: AggregatedEstimates) -> Point:
        pools = (sizing.pool(req, "engine", a.engine, a.replicas),)
        per_gpu = a.output_tokens_per_s / req.gpus
        return cls("aggregated", pools, a.gpus, per_gpu, a.ttft_ms, a.itl_ms, a.meets)

    @classmethod
    def chosen(cls, plan: Plan) -> Point:
        """The plan's choice as a point."""
        if plan.better == "aggregated" and plan.aggregated is not None:
            return cls.of_aggregated(plan.request, plan.aggregated)
        return cls.of(plan.request, plan)

    def dominates(self, other: Point) -> bool:
        """At least as good on all three (more throughput per GPU, less TTFT, less ITL) and better
        on one, at the precision shown (a difference below it, 0.04 ms of TTFT, say, separates no
        layouts)."""
        mine, theirs = self._key(), other._key()
        return all(a <= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs

    def _key(self) -> tuple[float, float, float]:
        return (
            -shown(self.output_tokens_per_s_per_gpu, 1),
            shown(self.ttft_ms, 1),
            shown(self.itl_ms, 2),
        )

    def describe(self) -> str:
        return " + ".join(pool.describe() for pool in self.pools)

    def as_dict(self, w: Workload, pick: bool = False) -> dict[str, Any]:
        """As `pareto` in the JSON; `meets_targets` null when no target is in force."""
        return {
            "mode": self.mode,
            "pools": [
                {"role": p.role, "tp": p.tp, "pp": p.pp, "replicas": p.replicas} for p in self.pools
            ],
            "layout": self.describe(),
            "gpus": self.gpus,
            "output_tokens_per_s_per_gpu": round(self.output_tokens_per_s_per_gpu, 1),
            "ttft_ms": round(self.ttft_ms, 1) if math.isfinite(self.ttft_ms) else None,
            "itl_ms": round(self.itl_ms, 2),
            "meets_targets": all(self.meets) if labels(w) else None,
            "pick": pick,
        }


def pareto(req: Request) -> list[Point]:
    """The PD and aggregated layouts within req.gpus that no other beats on throughput per GPU,
    TTFT and ITL together, most throughput per GPU first."""
    fitting = [e for e in sizing.engines(req) if e.fits(need_tokens(req))]
    points = {Point.of(req, c) for c in sizing.every_layout(req, fitting)}
    points |= {Point.of_aggregated(req, a) for a in every_aggregated(req, fitting)}
    front = [p for p in points if not any(q.dominates(p) for q in points)]
    return sorted(front, key=lambda p: (-p.output_tokens_per_s_per_gpu, p.ttft_ms, p.gpus))


def with_pick(front: list[Point], plan: Plan) -> list[dict[str, Any]]:
    """The frontier as JSON rows, the plan's choice marked (added when off the frontier, which
    only a layout in another class of the objective can cause: docs/sizing.md)."""
    pick = Point.chosen(plan)
    w = plan.request.workload
    rows = [p.as_dict(w, pick=p == pick) for p in front]
    if pick not in front:
        rows.append(pick.as_dict(w, pick=True))
    return rows


def fewest_gpus(req: Request, rate: float, other_gpus: list[Gpu] | None = None) -> Plan:
    """The plan on the fewest GPUs, up to req.gpus, whose choice meets the TTFT and ITL targets in
    force at `rate` requests/s (and sustains it); DoesNotFit when even req.gpus does not."""
    target = replace(req, workload=replace(req.workload, rate=rate, rate_flag="--target-rate"))
    last: Plan | None = None
    for gpus in range(2, req.gpus + 1):
        try:
            found = sizing.plan(replace(target, gpus=gpus), other_gpus)
        except DoesNotFit:
            continue
        last = found
        if found.choice is not None and all(found.choice.meets):
            return replace(found, target_rate=rate)
    if last is None:
        return sizing.plan(target, other_gpus)  # raises the refusal with its numbers
    missed = "; ".join(last.warnings[:3])
    raise DoesNotFit(
        f"no layout on up to {req.gpus} x {req.gpu.name} meets the targets at --target-rate "
        f"{rate:g}/s",
        hint="give more --gpus, or loosen --ttft / --itl",
        details=[f"on {req.gpus} GPUs: {missed}"] if missed else [],
    )
