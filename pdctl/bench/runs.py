"""Saved bench runs (the JSON of `pdctl bench -o json`, or the bench-<time>.json that --report
writes) read back for plots and `pdctl bench compare`: each checked for the fields those read, a
label per run, the load axis they share, and the metrics as named in the CSV."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import files
from pdctl.errors import InputError, UsageError

# A bench result holds one entry per load step: kilobytes. Refuse more than this unread.
MAX_BYTES = 16 * 1024 * 1024

STATS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")  # each a dict of percentiles, or null
NUMBERS = ("output_token_throughput", "request_throughput")
AXIS_TITLE = {
    "concurrency": "concurrency (requests in flight)",
    "rate": "request rate (requests/s)",
}


@dataclass(frozen=True)
class Metric:
    """One number of a step, named as its CSV column (`ttft_ms_p50`, `goodput`)."""

    key: str
    field: str
    stat: str | None  # a percentile of a latency, or None for a plain number
    title: str
    unit: str
    better: str  # "lower" or "higher"

    def of(self, step: dict[str, Any]) -> float | None:
        value = step.get(self.field)
        if self.stat is not None:
            value = value.get(self.stat) if isinstance(value, dict) else None
        return float(value) if isinstance(value, int | float) else None


def _latency(field: str, stat: str, title: str) -> Metric:
    return Metric(f"{field}_{stat}", field, stat, f"{title} {stat}", "ms", "lower")


TTFT_P50, TTFT_P90, TTFT_P99 = (_latency("ttft_ms", p, "TTFT") for p in ("p50", "p90", "p99"))
ITL_P50, ITL_P90, ITL_P99 = (_latency("itl_ms", p, "ITL") for p in ("p50", "p90", "p99"))
E2E_P50, E2E_P99 = (_latency("e2e_ms", p, "end-to-end latency") for p in ("p50", "p99"))
OUTPUT_TOKENS = Metric(
    "output_token_throughput",
    "output_token_throughput",
    None,
    "output token throughput",
    "tokens/s",
    "higher",
)
REQUESTS = Metric(
    "request_throughput", "request_throughput", None, "request throughput", "requests/s", "higher"
)
GOODPUT = Metric("goodput", "goodput", None, "goodput", "requests/s", "higher")


@dataclass(frozen=True)
class Run:
    label: str
    data: dict[str, Any]  # the whole JSON result
    path: Path | None = None

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = self.data["steps"]
        return steps

    @property
    def serving(self) -> str:
        """What the run measured: the model, the engines per role and what served them (a file
        written before bench recorded the last two says so)."""
        model = self.data.get("model") or "model not recorded"
        layout = self.data.get("layout") or "layout not recorded"
        engines = self.data.get("served_by") or "engines not recorded"
        return f"{model} · {layout} · {engines}"

    @property
    def slo(self) -> bool:
        """An SLO was given: the steps carry goodput."""
        return any(s.get("goodput") is not None for s in self.steps)


def shape_problem(data: Any) -> str | None:
    """What keeps `data` from being a bench result that plots and compare can read, or None."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return "expected the JSON object that `pdctl bench -o json` writes (with a steps list)"
    if not data["steps"]:
        return "no steps"
    for i, step in enumerate(data["steps"]):
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            return f"{where}: expected an object"
        open_loop = step.get("rate") is not None
        if open_loop and not _positive(step["rate"]):
            return f"{where}.rate: expected requests/s above 0, or null"
        if not _count(step.get("concurrency")) and not (
            open_loop and step.get("concurrency") is None
        ):
            return f"{where}.concurrency: expected a whole number of at least 1"
        for name in STATS:
            stat = step.get(name)
            if stat is not None and not (
                isinstance(stat, dict) and all(_number(stat.get(p)) for p in ("p50", "p90", "p99"))
            ):
                return f"{where}.{name}: expected an object with p50, p90 and p99, or null"
        for name in NUMBERS:
            if not _number(step.get(name)):
                return f"{where}.{name}: expected a number"
        if step.get("goodput") is not None and not _number(step["goodput"]):
            return f"{where}.goodput: expected a number or null"
    return None


def read(path: Path, label: str | None = None) -> Run:
    """A saved bench result; InputError naming the file when it is missing, not JSON or not one."""
    hint = "give files written by pdctl bench -o json"
    data = files.parse_json(files.read_text(path, MAX_BYTES), str(path), hint)
    problem = shape_problem(data)
    if problem is not None:
        raise InputError(
            f"{path}: not a pdctl bench result: {problem}",
            hint="give files written by pdctl bench -o json (or the bench-*.json of --report)",
        )
    return Run(label if label is not None else path.stem, data, path)


def read_all(paths: list[Path], labels: list[str] | None = None) -> list[Run]:
    """Each file as a run, labelled by `labels` (one per file) or by the file's stem."""
    if labels and len(labels) != len(paths):
        raise UsageError(f"--label: {len(labels)} labels for {len(paths)} files (give one each)")
    runs = [read(p, labels[i] if labels else None) for i, p in enumerate(paths)]
    seen = [r.label for r in runs]
    twice = sorted({label for label in seen if seen.count(label) > 1})
    if twice:
        raise UsageError(
            f"two runs share the label {', '.join(twice)}",
            hint="give --label once per file, each different",
        )
    return runs


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # a dangling link: read() reports it, and the run is left out
        return 0.0


def in_folder(directory: Path, pattern: str = "bench-*.json") -> list[Run]:
    """Every run saved in `directory` (bench --report's JSON), oldest first; a file there that is
    not a bench result is left out (the folder is the user's)."""
    runs = []
    for path in sorted(directory.glob(pattern), key=lambda p: (_mtime(p), p.name)):
        try:
            runs.append(read(path))
        except InputError:
            continue
    return runs


def load_axis(runs: list[Run]) -> str:
    """ "rate" when every step of every run was open loop (has a rate), else "concurrency"."""
    every = [s for r in runs for s in r.steps]
    return "rate" if every and all(s.get("rate") is not None for s in every) else "concurrency"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _number(value) and value > 0


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
