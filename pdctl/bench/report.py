"""bench's files: a CSV per run (one row per step) and, when matplotlib is importable, PNG plots
of latency and throughput against concurrency. matplotlib is not a dependency of pdctl."""

from __future__ import annotations

import csv
import importlib
import time
from pathlib import Path
from typing import Any

from pdctl.bench.run import Result

STATS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
PERCENTILES = ("mean", "p50", "p90", "p99")
PLOTS_NEED = "plots need matplotlib (pip install matplotlib); the CSV has every number"


def row(step: dict[str, Any]) -> dict[str, Any]:
    """One step as a flat CSV row (column names: the JSON's, joined by _)."""
    flat: dict[str, Any] = {
        key: step[key]
        for key in (
            "concurrency",
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
    for name in STATS:
        for p in PERCENTILES:
            flat[f"{name}_{p}"] = (step[name] or {}).get(p)
    for role, counted in sorted(step.get("engines", {}).items()):
        flat[f"{role}_prompt_tokens"] = counted["prompt_tokens"]
        for source, tokens in sorted(counted.get("prompt_tokens_by_source", {}).items()):
            flat[f"{role}_prompt_tokens_{source}"] = tokens
        for key in ("kv_bytes", "kv_transfer_s", "kv_gbps"):
            if key in counted:
                flat[f"{role}_{key}"] = counted[key]
    return flat


def write(result: Result, directory: Path) -> list[Path]:
    """bench-<time>.csv in `directory`, and its plots when matplotlib is there."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    rows = [row(step) for step in result.steps]
    columns: list[str] = []
    for r in rows:
        columns += [c for c in r if c not in columns]
    path = directory / f"{stem}.csv"
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return [path, *plot(rows, directory / stem)]


def plots_available() -> bool:
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


def plot(rows: list[dict[str, Any]], stem: Path) -> list[Path]:
    if not rows or not plots_available():
        return []
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    pyplot = importlib.import_module("matplotlib.pyplot")
    x = [r["concurrency"] for r in rows]
    written = []
    for name in ("ttft_ms", "itl_ms", "e2e_ms"):
        figure, axes = pyplot.subplots()
        for p in ("p50", "p90", "p99"):
            axes.plot(x, [r[f"{name}_{p}"] for r in rows], marker="o", label=p)
        axes.set(xlabel="concurrency", ylabel=name, xscale="log", title=name)
        axes.legend()
        path = stem.with_name(f"{stem.name}-{name}.png")
        figure.savefig(path)
        pyplot.close(figure)
        written.append(path)
    figure, axes = pyplot.subplots()
    axes.plot(x, [r["output_token_throughput"] for r in rows], marker="o")
    axes.set(xlabel="concurrency", ylabel="output tokens/s", xscale="log", title="throughput")
    path = stem.with_name(f"{stem.name}-throughput.png")
    figure.savefig(path)
    pyplot.close(figure)
    return [*written, path]
