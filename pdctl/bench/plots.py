"""The charts of one or more bench runs against load, one line per run (and per percentile: p50
solid, p99 dashed, in the run's colour), as PNGs with the CSV behind them. The series are built
first (`charts`, plain data the tests read), then drawn (`draw`, matplotlib, lazily).

Load is the request rate when every step of every run has one (open loop), else the concurrency.
The fourth chart is goodput when every run was given an SLO, else request throughput."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl import files, plotting
from pdctl.bench.runs import (
    AXIS_TITLE,
    E2E_P50,
    E2E_P99,
    GOODPUT,
    ITL_P50,
    ITL_P99,
    OUTPUT_TOKENS,
    REQUESTS,
    TTFT_P50,
    TTFT_P99,
    Metric,
    Run,
    load_axis,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DATA = "plot-data.csv"  # the numbers behind the plots, one row per run and step
SERVING_WIDTH = 100  # characters per line of what the runs measured, above each chart


@dataclass(frozen=True)
class Line:
    label: str
    x: tuple[float, ...]
    y: tuple[float | None, ...]  # None: no value at that load (no request succeeded)
    colour: str
    dashed: bool


@dataclass(frozen=True)
class Chart:
    name: str  # the file: plot-<name>.png
    title: str
    unit: str
    axis: str  # "concurrency" or "rate"
    lines: tuple[Line, ...]
    serving: str = ""  # what the runs measured (Run.serving), each once


def _panels(runs: list[Run]) -> list[tuple[str, str, tuple[Metric, ...]]]:
    """(file name, title, metrics) of each chart, in the order people read them."""
    if all(r.slo for r in runs):
        per_s = ("goodput", "goodput: requests/s that met the SLO", (GOODPUT,))
    else:
        per_s = ("requests", "request throughput (goodput needs an SLO on every run)", (REQUESTS,))
    return [
        ("ttft", "time to first token", (TTFT_P50, TTFT_P99)),
        ("itl", "inter-token latency", (ITL_P50, ITL_P99)),
        ("e2e", "end-to-end latency", (E2E_P50, E2E_P99)),
        per_s,
        ("throughput", "output token throughput", (OUTPUT_TOKENS,)),
    ]


def series(
    run: Run, metric: Metric, axis: str
) -> tuple[tuple[float, ...], tuple[float | None, ...]]:
    """The run's (load, value) points in load order (a sweep may be given in any order)."""
    points = sorted((float(s[axis]), metric.of(s)) for s in run.steps if s.get(axis) is not None)
    return tuple(x for x, _ in points), tuple(y for _, y in points)


def charts(runs: list[Run]) -> list[Chart]:
    axis = load_axis(runs)
    built = []
    for name, title, metrics in _panels(runs):
        lines = []
        for i, run in enumerate(runs):
            for metric in metrics:
                x, y = series(run, metric, axis)
                label = run.label if len(metrics) == 1 else f"{run.label} {metric.stat}"
                colour = plotting.COLOURS[i % len(plotting.COLOURS)]
                lines.append(Line(label, x, y, colour, dashed=metric is not metrics[0]))
        if len(metrics) > 1:
            title += f" ({' solid, '.join(str(m.stat) for m in metrics)} dashed)"
        served = dict.fromkeys(run.serving for run in runs)
        if len(served) > 1:  # each run's, named
            served = dict.fromkeys(f"{run.label}: {run.serving}" for run in runs)
        serving = "\n".join(served)
        built.append(Chart(name, title, metrics[0].unit, axis, tuple(lines), serving))
    return built


def draw(chart: Chart) -> Figure:
    figure = plotting.figure()
    axes = figure.add_subplot()
    for line in chart.lines:
        axes.plot(
            line.x,
            [math.nan if v is None else v for v in line.y],
            color=line.colour,
            linestyle="--" if line.dashed else "-",
            marker="o",
            label=line.label,
        )
    loads = sorted({x for line in chart.lines for x in line.x})
    if loads and loads[0] > 0 and loads[-1] / loads[0] >= 8:
        axes.set_xscale("log", base=2)
    if 0 < len(loads) <= 12:
        axes.set_xticks(loads, [f"{x:g}" for x in loads])
        axes.minorticks_off()
    axes.set_xlabel(AXIS_TITLE[chart.axis])
    axes.set_ylabel(chart.unit)
    axes.set_ylim(bottom=0)
    axes.set_title(chart.title)
    if chart.serving:  # what was measured, above the chart's own title
        lines = (textwrap.fill(line, SERVING_WIDTH) for line in chart.serving.splitlines())
        figure.suptitle("\n".join(lines), fontsize="small")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return figure


def data_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per run and step: the run's label, its load and every plotted number."""
    metrics = [m for _, _, group in _panels(runs) for m in group]
    has_rate = any(s.get("rate") is not None for r in runs for s in r.steps)
    rows = []
    for run in runs:
        for step in run.steps:
            row: dict[str, Any] = {"run": run.label, "concurrency": step.get("concurrency")}
            if has_rate:
                row["rate"] = step.get("rate")
            row.update({m.key: m.of(step) for m in metrics})
            rows.append(row)
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path) -> Path:
    """`rows` as a CSV, the columns in the order they first appear (files.write_text: whole, and
    never through a link already at `path`)."""
    columns: list[str] = []
    for r in rows:
        columns += [c for c in r if c not in columns]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    files.write_text(path, text.getvalue())
    return path


def write(runs: list[Run], directory: Path) -> list[Path]:
    """plot-data.csv and, when matplotlib is installed, plot-<chart>.png in `directory`."""
    if not runs:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    written = [write_csv(data_rows(runs), directory / DATA)]
    if not plotting.available():
        return written
    drawn = charts(runs)
    for chart in drawn:
        written.append(plotting.save(draw(chart), directory / f"plot-{chart.name}.png"))
    # goodput and request throughput share the fourth place: drop the one this set did not draw
    other = "requests" if any(c.name == "goodput" for c in drawn) else "goodput"
    (directory / f"plot-{other}.png").unlink(missing_ok=True)
    return written
