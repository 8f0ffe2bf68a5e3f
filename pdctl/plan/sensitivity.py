"""How far a plan's choice holds: the load at which the other mode wins (`flip`), and, where no
layout meets the targets, the fewest GPUs whose choice would (`gpus_to_meet`). Both are bounded
searches that plan again with one figure changed (sizing.plan, some 40 ms each)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pdctl.models.catalog import Gpu
from pdctl.plan import sizing
from pdctl.plan.layout import DoesNotFit, Plan, Request

# --concurrency searched from 1 to 2**10 in powers of two, then each edge of the span where the
# other mode wins bisected to the request; --rate from 1/64 to 16 times the rate asked.
MAX_CONCURRENCY_POWER = 10
RATE_POWERS = range(-6, 5)
RATE_BISECTIONS = 6
# GPU counts searched up to this many times those given (doubling, then bisection).
MAX_GPU_FACTOR = 16


@dataclass(frozen=True)
class Flip:
    """Where the other mode wins: from `low` to `high` of `flag` (the nearest such span to the
    load asked), within the loads searched (`searched`)."""

    flag: str  # --concurrency | --rate
    mode: str  # the mode that wins there: pd | aggregated
    low: float
    high: float
    searched: tuple[float, float]

    def describe(self) -> str:
        mode = "PD" if self.mode == "pd" else "aggregated"
        span = _load(self.flag, self.low)
        if self.high != self.low:
            span = f"from {span} to {_load(self.flag, self.high).split(' ', 1)[1]}"
        else:
            span = f"at {span}"
        return f"{mode} wins {span}"

    def as_dict(self) -> dict[str, object]:
        return {
            "flag": self.flag,
            "mode": self.mode,
            "low": self.low,
            "high": self.high,
            "searched": list(self.searched),
        }


def _load(flag: str, value: float) -> str:
    return f"{flag} {value:g}" + ("/s" if flag == "--rate" else "")


def _mode(req: Request, value: float, others: list[Gpu]) -> str | None:
    w = req.workload
    workload = (
        replace(w, rate=value) if w.rate is not None else replace(w, concurrency=round(value))
    )
    try:
        found = sizing.plan(replace(req, workload=workload, mode="auto"), others)
    except DoesNotFit:
        return None
    return found.choice.mode if found.choice else None


def _edge(req: Request, same: float, other: float, mode: str, others: list[Gpu]) -> float:
    """Bisect between a load where `mode` loses (`same`) and one where it wins (`other`): the
    load nearest `same` where it still wins (integers for --concurrency)."""
    concurrency = req.workload.rate is None
    for _ in range(MAX_CONCURRENCY_POWER if concurrency else RATE_BISECTIONS):
        middle = round((same + other) / 2) if concurrency else (same * other) ** 0.5
        if middle in (same, other):
            break
        if _mode(req, middle, others) == mode:
            other = middle
        else:
            same = middle
    return other


def loads(req: Request) -> list[float]:
    """The loads the flip search plans at: the load asked among them."""
    w = req.workload
    if w.rate is not None:
        return sorted({w.rate * 2.0**k for k in RATE_POWERS})
    return sorted({float(2**k) for k in range(MAX_CONCURRENCY_POWER + 1)} | {w.concurrency})


def flip(plan: Plan, others: list[Gpu]) -> Flip | None:
    """The nearest span of loads where auto's pick is the other mode; None when the choice holds
    at every load searched (or PD does not fit the GPUs given)."""
    req, choice = plan.request, plan.choice
    if choice is None or not plan.pd_within_gpus:
        return None
    w = req.workload
    asked = w.rate if w.rate is not None else float(w.concurrency)
    grid = loads(req)
    modes = {load: _mode(req, load, others) for load in grid}
    mine = choice.mode
    other = "aggregated" if mine == "pd" else "pd"
    winning = [load for load in grid if modes[load] == other]
    if not winning:
        return None
    nearest = min(winning, key=lambda load: abs(math.log(load / asked)))
    at = grid.index(nearest)
    low_at, high_at = at, at
    while low_at > 0 and modes[grid[low_at - 1]] == other:
        low_at -= 1
    while high_at < len(grid) - 1 and modes[grid[high_at + 1]] == other:
        high_at += 1
    low, high = grid[low_at], grid[high_at]
    if low_at > 0:
        low = _edge(req, grid[low_at - 1], low, other, others)
    if high_at < len(grid) - 1:
        high = _edge(req, grid[high_at + 1], high, other, others)
    flag = "--rate" if w.rate is not None else "--concurrency"
    return Flip(flag, other, low, high, (grid[0], grid[-1]))


def _meets(req: Request, gpus: int, others: list[Gpu]) -> bool:
    try:
        found = sizing.plan(replace(req, gpus=gpus), others)
    except DoesNotFit:
        return False
    return found.choice is not None and all(found.choice.meets)


def gpus_to_meet(plan: Plan, others: list[Gpu]) -> int | None:
    """Where the choice misses the targets: the fewest GPUs (of the same type, up to
    MAX_GPU_FACTOR times those given) whose choice meets them; None when it meets them or when
    none searched does."""
    req, choice = plan.request, plan.choice
    if choice is None or all(choice.meets):
        return None
    fails, meets = req.gpus, None
    while fails < req.gpus * MAX_GPU_FACTOR:
        more = min(fails * 2, req.gpus * MAX_GPU_FACTOR)
        if _meets(req, more, others):
            meets = more
            break
        fails = more
    if meets is None:
        return None
    while meets - fails > 1:  # bisect: fewer GPUs that still meet them
        middle = (fails + meets) // 2
        if _meets(req, middle, others):
            meets = middle
        else:
            fails = middle
    return meets
