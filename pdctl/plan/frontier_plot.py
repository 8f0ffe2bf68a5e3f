"""`pdctl plan --pareto --plot FILE.png`: the Pareto frontier (pdctl.plan.frontier) as a PNG.
The frontier trades three things, so two panels share the y axis, output tokens/s per GPU: against
TTFT (left) and against ITL (right). Each layout is a point numbered as in the --pareto table (a
key beside the panels names its pools: P prefill, D decode, A aggregated engines), filled when it
meets the targets in force, hollow when it misses them; the plan's choice is a red star. A layout
whose queue grows without bound (TTFT unbounded) has no place on the TTFT panel and is left out of
it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl import plotting
from pdctl.plan.frontier import Point

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PANELS = (("ttft_ms", "TTFT, ms"), ("itl_ms", "ITL, ms"))


def name(point: Point) -> str:
    short = {"prefill": "P", "decode": "D", "engine": "A"}
    return " · ".join(
        f"{short[p.role]} {p.replicas}xTP{p.tp}" + (f"xPP{p.pp}" if p.pp > 1 else "")
        for p in point.pools
    )


def coordinates(points: list[Point], latency: str) -> list[tuple[float, float, Point]]:
    """(latency, tokens/s per GPU, point) of the points whose latency is finite."""
    return [
        (getattr(p, latency), p.output_tokens_per_s_per_gpu, p)
        for p in points
        if math.isfinite(getattr(p, latency))
    ]


def _panel(axes: Axes, front: list[Point], picked: Point | None, latency: str) -> None:
    number = {p: i for i, p in enumerate(front, 1)}
    for x, y, p in coordinates(front, latency):
        met = all(p.meets)
        axes.scatter([x], [y], s=40, facecolors="C0" if met else "none", edgecolors="C0")
        axes.annotate(str(number[p]), (x, y), xytext=(4, 3), textcoords="offset points", fontsize=8)
    if picked is not None:
        for x, y, _ in coordinates([picked], latency):
            axes.scatter([x], [y], s=160, marker="*", color="red", zorder=3)
    axes.grid(True, alpha=0.3)
    axes.set_ylim(bottom=0)


def draw(front: list[Point], picked: Point | None, title: str = "") -> Figure:
    figure = plotting.figure(width=13.0, height=5.5)
    left, right, key = figure.subplots(1, 3, width_ratios=[1, 1, 0.45])
    right.sharey(left)
    for axes, (latency, label) in zip((left, right), PANELS, strict=True):
        _panel(axes, front, picked, latency)
        axes.set_xlabel(label)
    left.set_ylabel("output tokens/s per GPU")
    # the legend's three entries, drawn off the data
    left.scatter(
        [], [], s=40, facecolors="C0", edgecolors="C0", label="on the frontier, meets the targets"
    )
    left.scatter([], [], s=40, facecolors="none", edgecolors="C0", label="misses them")
    if picked is not None:
        left.scatter([], [], s=160, marker="*", color="red", label=f"the plan: {name(picked)}")
    left.legend(fontsize="small", loc="lower right")
    key.axis("off")
    lines = [f"{i:>2}  {name(p)}" for i, p in enumerate(front, 1)]
    key.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=8)
    figure.suptitle(title or "PD layouts on the Pareto frontier")
    return figure


def write(front: list[Point], picked: Point | None, path: Path, title: str = "") -> Path:
    """The frontier's PNG at `path` (EnvironmentProblem, exit 3, without matplotlib)."""
    return plotting.save(draw(front, picked, title), path)
