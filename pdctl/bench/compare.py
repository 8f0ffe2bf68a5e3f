"""`pdctl bench compare`: saved bench runs side by side. Steps are matched by load (the request
rate when every step of every run has one, else the concurrency); per metric and load, each run's
value and its ratio to the first run's (the baseline): above 1 is worse for a latency and better
for a throughput."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.bench import plots
from pdctl.bench.runs import (
    FIRST_GAP_P50,
    GOODPUT,
    ITL_P50,
    ITL_P90,
    OUTPUT_TOKENS,
    REQUESTS,
    TTFT_P50,
    TTFT_P90,
    TTFT_P99,
    Metric,
    Run,
    load_axis,
)

METRICS = (
    TTFT_P50,
    TTFT_P90,
    TTFT_P99,
    ITL_P50,
    ITL_P90,
    FIRST_GAP_P50,
    OUTPUT_TOKENS,
    REQUESTS,
)
CSV = "compare.csv"


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, to 3 decimals; None when either is missing or the baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return round(value / baseline, 3)


@dataclass(frozen=True)
class Row:
    metric: Metric
    load: float  # the step's concurrency or rate
    values: tuple[float | None, ...]  # one per run, in the order given; None: no such step

    @property
    def ratios(self) -> tuple[float | None, ...]:
        """Each run after the baseline against the baseline."""
        return tuple(ratio(v, self.values[0]) for v in self.values[1:])


@dataclass(frozen=True)
class RunComparison:
    runs: list[Run]
    axis: str  # "concurrency" or "rate"
    metrics: tuple[Metric, ...]
    rows: list[Row]

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.runs]

    def of(self, metric: Metric) -> list[Row]:
        return [r for r in self.rows if r.metric is metric]

    def as_dict(self) -> dict[str, Any]:
        labels = self.labels
        return {
            "baseline": labels[0],
            "load": self.axis,
            "runs": [
                {
                    "label": run.label,
                    "file": None if run.path is None else str(run.path),
                    **{k: run.data.get(k) for k in ("router", "model", "connector")},
                    **{k: run.data.get(k) for k in ("workload", "slo")},
                }
                for run in self.runs
            ],
            "metrics": [
                {"name": m.key, "title": m.title, "unit": m.unit, "better": m.better}
                for m in self.metrics
            ],
            "rows": [
                {
                    "metric": row.metric.key,
                    self.axis: row.load,
                    "values": dict(zip(labels, row.values, strict=True)),
                    "ratios": dict(zip(labels[1:], row.ratios, strict=True)),
                }
                for row in self.rows
            ],
        }

    def csv_rows(self) -> list[dict[str, Any]]:
        """The joined rows: metric, load, each run's value, then each ratio (`B/A`)."""
        labels = self.labels
        out = []
        for row in self.rows:
            flat: dict[str, Any] = {"metric": row.metric.key, self.axis: row.load}
            flat |= dict(zip(labels, row.values, strict=True))
            flat |= {f"{b}/{labels[0]}": r for b, r in zip(labels[1:], row.ratios, strict=True)}
            out.append(flat)
        return out


def _at(run: Run, axis: str) -> dict[float, dict[str, Any]]:
    """The run's steps by load (the first, when a sweep repeats a load)."""
    steps: dict[float, dict[str, Any]] = {}
    for step in run.steps:
        if step.get(axis) is not None:
            steps.setdefault(step[axis], step)
    return steps


def compare(runs: list[Run]) -> RunComparison:
    """The runs' metrics at each load any of them measured, the first run the baseline."""
    axis = load_axis(runs)
    metrics = METRICS + ((GOODPUT,) if any(r.slo for r in runs) else ())
    by_load = [_at(run, axis) for run in runs]
    loads = sorted({load for steps in by_load for load in steps})
    rows = [
        Row(
            metric,
            load,
            tuple(None if load not in steps else metric.of(steps[load]) for steps in by_load),
        )
        for metric in metrics
        for load in loads
    ]
    return RunComparison(runs, axis, metrics, rows)


def write(comparison: RunComparison, directory: Path) -> list[Path]:
    """compare.csv (the joined rows) and the runs' plots (pdctl.bench.plots) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    table = plots.write_csv(comparison.csv_rows(), directory / CSV)
    return [table, *plots.write(comparison.runs, directory)]
