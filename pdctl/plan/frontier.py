"""Beyond the one best layout: the Pareto frontier of throughput per GPU against TTFT and ITL
(`pdctl plan --pareto`), and the fewest GPUs that meet the targets at a request rate
(`pdctl plan --target-rate`). docs/sizing.md "Pareto frontier and target rate"."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pdctl.models.catalog import Gpu
from pdctl.plan import sizing
from pdctl.plan.layout import DoesNotFit, Estimates, Plan, Request, RolePlan
from pdctl.plan.objective import need_tokens


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
    prefill_tp: int
    prefill_replicas: int
    decode_tp: int
    decode_replicas: int
    gpus: int
    output_tokens_per_s_per_gpu: float
    ttft_ms: float
    itl_ms: float
    meets: tuple[bool, ...]

    @classmethod
    def of(cls, layout: Layout) -> Point:
        return cls(
            layout.prefill.engine.tp,
            layout.prefill.replicas,
            layout.decode.engine.tp,
            layout.decode.replicas,
            layout.estimates.gpus,
            layout.estimates.output_tokens_per_s_per_gpu,
            layout.estimates.ttft_ms,
            layout.estimates.itl_ms,
            layout.meets,
        )

    def dominates(self, other: Point) -> bool:
        """At least as good on all three (more throughput per GPU, less TTFT, less ITL) and better
        on one."""
        mine, theirs = self._key(), other._key()
        return all(a <= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs

    def _key(self) -> tuple[float, float, float]:
        """The three at the precision the frontier is shown in (as_dict): a difference below it
        (0.04 ms of TTFT, say) separates no layouts."""
        return (
            -round(self.output_tokens_per_s_per_gpu, 1),
            round(self.ttft_ms, 1) if math.isfinite(self.ttft_ms) else math.inf,
            round(self.itl_ms, 2),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "prefill_tp": self.prefill_tp,
            "prefill_replicas": self.prefill_replicas,
            "decode_tp": self.decode_tp,
            "decode_replicas": self.decode_replicas,
            "gpus": self.gpus,
            "output_tokens_per_s_per_gpu": round(self.output_tokens_per_s_per_gpu, 1),
            "ttft_ms": round(self.ttft_ms, 1) if math.isfinite(self.ttft_ms) else None,
            "itl_ms": round(self.itl_ms, 2),
            "meets_targets": all(self.meets),
        }


def pareto(req: Request) -> list[Point]:
    """The PD layouts within req.gpus that no other layout beats on throughput per GPU, TTFT and
    ITL together, most throughput per GPU first."""
    fitting = [e for e in sizing.engines(req) if e.fits(need_tokens(req))]
    points = {Point.of(c) for c in sizing.every_layout(req, fitting)}
    front = [p for p in points if not any(q.dominates(p) for q in points)]
    return sorted(front, key=lambda p: (-p.output_tokens_per_s_per_gpu, p.ttft_ms, p.gpus))


def fewest_gpus(req: Request, rate: float, other_gpus: list[Gpu] | None = None) -> Plan:
    """The plan on the fewest GPUs, up to req.gpus, whose PD layout meets --ttft and --itl at
    `rate` requests/s (and sustains it); DoesNotFit when even req.gpus does not."""
    target = replace(req, workload=replace(req.workload, rate=rate))
    last: Plan | None = None
    for gpus in range(2, req.gpus + 1):
        try:
            found = sizing.plan(replace(target, gpus=gpus), other_gpus)
        except DoesNotFit:
            continue
        last = found
        if all(found.meets):
            return replace(found, target_rate=rate)
    if last is None:
        return sizing.plan(target, other_gpus)  # raises the refusal with its numbers
    missed = "; ".join(last.warnings[:3])
    raise DoesNotFit(
        f"no PD layout on up to {req.gpus} x {req.gpu.name} meets the targets at --target-rate "
        f"{rate:g}/s",
        hint="give more --gpus, or loosen --ttft / --itl",
        details=[f"on {req.gpus} GPUs: {missed}"] if missed else [],
    )
