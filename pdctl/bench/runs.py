"""Saved bench runs (the JSON of `pdctl bench -o json`, or the bench-<time>.json that --report
writes) read back for plots and `pdctl bench compare`: each checked for the fields those read, a
label per run, the load axis they share, and the metrics as named in the CSV."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import files, limits
from pdctl.errors import InputError, UsageError
from pdctl.values.paths import format_path

# A bench result holds one entry per load step: kilobytes. Refuse more than this unread.
MAX_BYTES = 16 * 1024 * 1024

# Each a dict of percentiles, or null; first_gap_ms is absent from results older than it.
STATS = ("ttft_ms", "itl_ms", "first_gap_ms", "tpot_ms", "e2e_ms")
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
FIRST_GAP_P50 = _latency("first_gap_ms", "p50", "first gap")
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


def _number(maximum: float, above_zero: bool = False) -> dict[str, Any]:
    low = {"exclusiveMinimum": 0} if above_zero else {"minimum": 0}
    return {"type": "number", **low, "maximum": maximum}


def _count(maximum: int, least: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": least, "maximum": maximum}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [{"type": "null"}, schema]}


_MS = _number(limits.MS_MAX)
_STAT = {
    "type": "object",
    "required": ["p50", "p90", "p99"],
    "properties": dict.fromkeys(("mean", "p50", "p90", "p99", "min", "max"), _MS),
}
_TOKENS = _number(limits.REQUESTS_MAX * limits.TOKENS_MAX)
_ROLE = {
    "type": "object",
    "properties": {
        "engines": _count(limits.GPUS_MAX, 1),
        "prompt_tokens": _TOKENS,
        "kv_gbps": _number(limits.NETWORK_GBPS_MAX),
        "phase_mean_s": {"type": "object", "additionalProperties": _number(limits.SECONDS_MAX)},
    },
}
_STEP = {
    "type": "object",
    "required": ["request_throughput", "output_token_throughput"],
    "properties": {
        "concurrency": _or_null(_count(limits.CONCURRENCY_MAX, 1)),
        "rate": _or_null(_number(limits.RATE_MAX, above_zero=True)),
        **{name: _count(limits.REQUESTS_MAX) for name in ("requests", "succeeded", "errors")},
        "prompt_tokens": _TOKENS,
        "completion_tokens": _TOKENS,
        "request_throughput": _number(limits.RATE_MAX),
        "output_token_throughput": _number(limits.RATE_MAX * limits.TOKENS_MAX),
        "goodput": _or_null(_number(limits.RATE_MAX)),
        **{name: _or_null(_STAT) for name in STATS},
        "engines": {"type": "object", "additionalProperties": _ROLE},
    },
    # a closed-loop step (no rate) has its concurrency
    "if": {"properties": {"rate": {"type": "null"}}},
    "then": {"required": ["concurrency"], "properties": {"concurrency": {"type": "integer"}}},
}
# The bench result (`pdctl bench -o json`, --report's bench-*.json) as plots, `bench compare` and
# `plan --calibrate` read it: each number within its bound (pdctl.limits).
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["steps"],
    "properties": {
        "model": {"type": ["string", "null"]},
        "steps": {"type": "array", "minItems": 1, "maxItems": limits.STEPS_MAX, "items": _STEP},
    },
}
# What `plan --calibrate` reads besides: each step's requests answered and tokens sent.
CALIBRATION: dict[str, Any] = {
    "allOf": [
        SCHEMA,
        {
            "properties": {
                "steps": {
                    "items": {"required": ["succeeded", "prompt_tokens", "completion_tokens"]}
                }
            }
        },
    ]
}


def shape_problem(data: Any, schema: dict[str, Any] = SCHEMA) -> str | None:
    """What keeps `data` from being a bench result that `schema` accepts (the first problem,
    with its key path), or None."""
    from jsonschema import Draft7Validator  # lazy: start-up

    errors = sorted(
        Draft7Validator(schema).iter_errors(data),
        # by key path, a missing key after the keys present beside it
        key=lambda e: [*map(str, e.absolute_path), *(["~"] if e.validator == "required" else [])],
    )
    if not errors:
        return None
    error = errors[0]
    while error.context:  # anyOf (a value or null): the branch that got furthest says why
        error = max(error.context, key=lambda e: (len(e.absolute_path), e.validator != "type"))
    if not error.absolute_path and error.validator in ("type", "required"):
        return "expected the JSON object that `pdctl bench -o json` writes (with a steps list)"
    where = format_path(error.absolute_path)
    if where == "steps" and error.validator == "minItems":
        return "no steps"
    return f"{where}: {error.message}"


def read(path: Path, label: str | None = None, schema: dict[str, Any] = SCHEMA) -> Run:
    """A saved bench result; InputError naming the file when it is missing, not JSON or not one
    (`schema`: SCHEMA, or CALIBRATION for what --calibrate reads)."""
    hint = "give files written by pdctl bench -o json"
    data = files.parse_json(files.read_text(path, MAX_BYTES), str(path), hint)
    problem = shape_problem(data, schema)
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
