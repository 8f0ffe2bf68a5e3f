"""bench's files (--report DIR): per run a CSV (one row per step) and the JSON of `-o json`, then
PNG plots of every run saved in the folder against load, one line per run, with the CSV behind
them (pdctl.bench.plots; the plots need the optional extra `plot`). Every file is written whole
through pdctl.files, never through a symbolic link already in the folder: the link is replaced."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pdctl import files, plotting
from pdctl.bench import plots, runs
from pdctl.bench.run import Result

PERCENTILES = ("mean", "p50", "p90", "p99")
PLOTS_NEED = plotting.NEED


def plots_available() -> bool:
    return plotting.available()


def row(step: dict[str, Any]) -> dict[str, Any]:
    """One step as a flat CSV row (column names: the JSON's, joined by _)."""
    flat: dict[str, Any] = {"concurrency": step["concurrency"]}
    if "rate" in step:  # open loop: requests/s (None for a closed-loop step)
        flat["rate"] = step["rate"]
    flat |= {
        key: step[key]
        for key in (
            "requests",
            "succeeded",
            "errors",
            "duration_s",
            "request_throughput",
            "output_token_throughput",
            "goodput",
            "good_requests",
            "slo_met",
        )
    }
    for name in runs.STATS:
        for p in PERCENTILES:
            flat[f"{name}_{p}"] = (step.get(name) or {}).get(p)
    for role, counted in sorted(step.get("engines", {}).items()):
        flat[f"{role}_prompt_tokens"] = counted["prompt_tokens"]
        for source, tokens in sorted(counted.get("prompt_tokens_by_source", {}).items()):
            flat[f"{role}_prompt_tokens_{source}"] = tokens
        for key in ("kv_bytes", "kv_transfer_s", "kv_gbps"):
            if key in counted:
                flat[f"{role}_{key}"] = counted[key]
        for phase, seconds in sorted(counted.get("phase_mean_s", {}).items()):
            flat[f"{role}_phase_mean_s_{phase}"] = seconds
        for gauge, seen in sorted(counted.get("gauges", {}).items()):
            flat[f"{role}_{gauge}_mean"] = seen["mean"]
            flat[f"{role}_{gauge}_max"] = seen["max"]
    return flat


def write(result: Result, directory: Path) -> list[Path]:
    """This run's bench-<time>.csv and bench-<time>.json in `directory`, then the plots of every
    run saved there (pdctl.bench.plots: one line per run, and plot-data.csv)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = _free_stem(directory, f"bench-{time.strftime('%Y%m%d-%H%M%S')}")
    table = plots.write_csv([row(step) for step in result.steps], directory / f"{stem}.csv")
    saved = directory / f"{stem}.json"
    files.write_text(saved, json.dumps(result.as_dict(), indent=2) + "\n")
    return [table, saved, *plots.write(runs.in_folder(directory), directory)]


def _free_stem(directory: Path, stem: str) -> str:
    """`stem`, or stem-2, -3, ... when a run in the same second took it."""
    taken = {p.stem for p in directory.glob(f"{stem}*")}
    n = 1
    while (found := stem if n == 1 else f"{stem}-{n}") in taken:
        n += 1
    return found
