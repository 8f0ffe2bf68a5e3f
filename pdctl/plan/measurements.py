"""Published measurements on real GPUs, and the planner's estimate for each.

The data is pdctl/models/catalog/measurements.yaml (schema: schemas/measurements.schema.yaml).
Each entry fixes a model, a GPU, a tensor parallel size, input and output tokens and the requests
in flight; `estimate_ms` computes what the planner says for those conditions with the functions
`pdctl plan` itself uses (pdctl.plan.step's steps of prompts alone and of decode sequences alone,
which cost roofline.prefill_seconds and roofline.decode_step_seconds, at the measured TP rather
than the one the planner would pick):

- ttftMs: one request alone on an aggregated engine; its first token comes out of the prefill
  forward, so the estimate is `prefill_seconds` at the input length (the PD plan's TTFT adds the
  KV transfer and one decode step, which an aggregated measurement does not have);
- tpotMs: one decode step at `concurrency` sequences of mean context input + output / 2
  (`decode_step_seconds`, the plan's `decode_step_ms`);
- batchLatencyMs: vLLM's offline latency benchmark, one prefill forward of the whole batch, then
  output - 1 decode steps at the batch;
- prefillTokensPerS: prompt tokens per second of one engine kept busy with `concurrency` prompts
  in flight: vLLM packs as many whole prompts into a step as its token budget
  (--max-num-batched-tokens) holds, so the estimate is one forward of that many prompts;
- kvTokens: the tokens vLLM logs for a KV pool ("GPU KV cache size") at the entry's
  --max-model-len, the planner's KV layout (pdctl.models.memory.kv_layout: sliding-window and
  hybrid groups) over the same bytes (`kvCacheBytes`), or over the planner's own pool at the
  entry's `utilization`. A count, not a time: its ratio is estimated over measured tokens.

An entry with `layers` describes a run of its catalog model cut to that many layers (dummy
weights): the estimate is for the same cut model.

`python -m pdctl.plan.measurements` prints the table docs/sizing.md carries (a test keeps the page
equal to it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from pdctl.models import catalog
from pdctl.models.catalog import CATALOG_DIR, Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import GiB, kv_layout, memory
from pdctl.plan import roofline
from pdctl.plan.step import Chunk, EngineStep

MEASUREMENTS_FILE = CATALOG_DIR / "measurements.yaml"
# Metric keys of the data file, with the name the table shows.
METRICS = {
    "ttftMs": "TTFT",
    "tpotMs": "TPOT",
    "batchLatencyMs": "batch latency",
    "prefillTokensPerS": "prefill tok/s",
    "kvTokens": "KV tokens",
}
# Metrics that are rates: their ratio is taken the other way round, so that every ratio compares
# times (under 1: the planner is faster than the run).
RATES = {"prefillTokensPerS"}
TABLE_BEGIN = "<!-- measurements table: python -m pdctl.plan.measurements -->"
TABLE_END = "<!-- end of measurements table -->"


@dataclass(frozen=True)
class MeasurementSource:
    title: str
    url: str
    date: str | None
    publisher: str


@dataclass(frozen=True)
class Measurement:
    id: str
    source: MeasurementSource
    engine: str
    served_model: str
    model: str  # the catalog entry with the served model's architecture
    weight_dtype: str | None  # served precision when it differs from the catalog entry's
    gpu: str
    tp: int
    input_len: int
    output_len: int
    concurrency: int  # requests in flight, or the offline batch
    harness: str
    measured: dict[str, float]  # metric -> milliseconds (tokens per second for the rates)
    published: str
    notes: str
    use: str = "check"  # "fit": a figure the planner's factors are fitted to; "check": kept aside
    layers: int | None = None  # the served model cut to this many layers
    miss: str = ""  # why a held-out figure misses its band (shown as a miss in the table)
    kv_cache_bytes: int | None = None  # the KV pool the engine was given (kvTokens)
    utilization: float | None = None  # or the --gpu-memory-utilization vLLM sized it at
    max_model_len: int | None = None  # the engine's --max-model-len (kvTokens)
    kv_cache_dtype: str = "auto"  # the KV cache's dtype when not the model's ("fp8")

    def arch(self) -> ModelArch:
        found = catalog.find_model(self.model)
        if found is None:
            raise ValueError(f"measurement {self.id}: model {self.model} is not in the catalog")
        arch = found.arch
        if self.weight_dtype:
            arch = replace(arch, weight_dtype=self.weight_dtype)
        return cut(arch, self.layers) if self.layers else arch

    def gpu_entry(self) -> Gpu:
        found = catalog.gpus().get(self.gpu)
        if found is None:
            raise ValueError(f"measurement {self.id}: GPU {self.gpu} is not in the catalog")
        return found


@dataclass(frozen=True)
class Measurements:
    bands: dict[str, tuple[float, float]]
    entries: tuple[Measurement, ...]


def _measurement(key: str, data: dict[str, Any]) -> Measurement:
    source = data["source"]
    entry = Measurement(
        id=key,
        source=MeasurementSource(
            source["title"], source["url"], source["date"], source["publisher"]
        ),
        engine=data["engine"],
        served_model=data["servedModel"],
        model=data["model"],
        weight_dtype=data.get("weightDtype"),
        gpu=data["gpu"],
        tp=int(data["tp"]),
        input_len=int(data["inputLen"]),
        output_len=int(data["outputLen"]),
        concurrency=int(data["concurrency"]),
        harness=" ".join(str(data["harness"]).split()),
        measured={metric: float(value) for metric, value in data["measured"].items()},
        published=" ".join(str(data["published"]).split()),
        notes=" ".join(str(data.get("notes", "")).split()),
        use=data.get("use", "check"),
        layers=data.get("layers"),
        miss=" ".join(str(data.get("miss", "")).split()),
        kv_cache_bytes=data.get("kvCacheBytes"),
        utilization=data.get("utilization"),
        max_model_len=data.get("maxModelLen"),
        kv_cache_dtype=data.get("kvCacheDtype", "auto"),
    )
    unknown = set(entry.measured) - set(METRICS)
    if unknown:
        raise ValueError(f"measurement {key}: unknown metrics {sorted(unknown)}")
    if "ttftMs" in entry.measured and entry.concurrency != 1:
        raise ValueError(f"measurement {key}: ttftMs is compared for a request alone only")
    pools = (entry.kv_cache_bytes is not None) + (entry.utilization is not None)
    if "kvTokens" in entry.measured and (pools != 1 or entry.max_model_len is None):
        raise ValueError(
            f"measurement {key}: kvTokens takes maxModelLen and one of kvCacheBytes, utilization"
        )
    if "kvTokens" not in entry.measured and (pools or entry.max_model_len is not None):
        raise ValueError(
            f"measurement {key}: kvCacheBytes, utilization and maxModelLen go with kvTokens"
        )
    entry.arch(), entry.gpu_entry()  # both exist in the catalogs
    return entry


def load(path: Path = MEASUREMENTS_FILE) -> Measurements:
    """The measurements file as records; ValueError names what does not hold together."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    bands = {metric: (float(low), float(high)) for metric, (low, high) in data["bands"].items()}
    entries = tuple(_measurement(key, entry) for key, entry in data["measurements"].items())
    for entry in entries:
        missing = set(entry.measured) - set(bands)
        if missing:
            raise ValueError(f"measurement {entry.id}: no band for {sorted(missing)}")
    return Measurements(bands, entries)


@functools.cache
def measurements() -> Measurements:
    return load()


def cut(arch: ModelArch, layers: int) -> ModelArch:
    """`arch` with its first `layers` layers only, as a config.json with num_hidden_layers lowered
    loads (leading dense layers of an MoE kept first; no multi-token-prediction layer)."""
    if layers > arch.layers:
        raise ValueError(f"{arch.name} has {arch.layers} layers, not {layers}")
    moe = arch.moe and replace(arch.moe, dense_layers=min(arch.moe.dense_layers, layers))
    window = arch.sliding_window
    if window:
        window = replace(window, layers=min(window.layers, layers))
    return replace(arch, layers=layers, moe=moe, sliding_window=window, extra_layers=0)


def prompts_per_step(entry: Measurement) -> int:
    """Whole prompts of the entry's input one vLLM step takes (its default token budget)."""
    budget = roofline.default_max_num_batched_tokens(entry.gpu_entry())
    return max(1, min(entry.concurrency, budget // entry.input_len))


def kv_pool_bytes(entry: Measurement) -> float:
    """The entry's KV pool: the bytes it was given, else the planner's pool at its utilization."""
    if entry.kv_cache_bytes:
        return float(entry.kv_cache_bytes)
    assert entry.utilization is not None  # _measurement: kvTokens has one of the two
    return memory(entry.arch(), entry.gpu_entry(), entry.tp, entry.utilization).kv_pool * GiB


def estimate_ms(entry: Measurement, metric: str) -> float:
    """The planner's estimate of `metric` under the entry's conditions, in milliseconds (tokens
    per second for prefillTokensPerS, tokens for kvTokens)."""
    gpu = entry.gpu_entry()
    arch = entry.arch()
    budget = roofline.default_max_num_batched_tokens(gpu)
    layout = kv_layout(arch, entry.tp, kv_cache_dtype=entry.kv_cache_dtype, budget=budget)
    engine = EngineStep(arch, gpu, entry.tp, layout=layout)
    context = entry.input_len + entry.output_len // 2

    def step() -> float:
        return engine.cost(decode_contexts=[context] * entry.concurrency).seconds

    def prefill(prompts: int) -> float:
        return engine.cost(prefill_chunks=[Chunk(entry.input_len)] * prompts).seconds

    if metric == "ttftMs":
        return 1000 * roofline.alone_ttft_seconds(arch, gpu, entry.input_len, prefill(1))
    if metric == "tpotMs":
        return 1000 * step()
    if metric == "prefillTokensPerS":
        prompts = prompts_per_step(entry)
        return prompts * entry.input_len / prefill(prompts)
    if metric == "kvTokens" and entry.max_model_len:
        return float(engine.kv.tokens(kv_pool_bytes(entry), entry.max_model_len))
    if metric == "batchLatencyMs":
        return 1000 * (prefill(entry.concurrency) + (entry.output_len - 1) * step())
    raise ValueError(f"unknown metric {metric}")


@dataclass(frozen=True)
class EstimateComparison:
    entry: Measurement
    metric: str
    measured: float
    estimated: float

    @property
    def ratio(self) -> float:
        """Estimated time over measured time (estimate / measured, or measured / estimate for a
        rate): under 1 when the planner is faster than the real run."""
        if self.metric in RATES:
            return self.measured / self.estimated
        return self.estimated / self.measured


def compare(data: Measurements | None = None) -> list[EstimateComparison]:
    """Every measured figure with the planner's estimate for it, in file order."""
    data = data or measurements()
    return [
        EstimateComparison(entry, metric, value, estimate_ms(entry, metric))
        for entry in data.entries
        for metric, value in entry.measured.items()
    ]


def _model_label(entry: Measurement) -> str:
    name = entry.served_model.split(" (")[0].split(",")[0].split("/")[-1]
    dtype = entry.weight_dtype or entry.arch().weight_dtype
    cut_to = f", {entry.layers} layers" if entry.layers else ""
    kv = ", FP8 KV" if entry.kv_cache_dtype == "fp8" else ""
    return f"{name} {dtype.upper()}{kv}{cut_to}"


def _workload(entry: Measurement) -> str:
    if entry.kv_cache_bytes:
        return f"KV pool of {entry.kv_cache_bytes / 2**30:g} GiB"
    if entry.utilization:
        return f"KV pool at utilization {entry.utilization:g}, max-model-len {entry.max_model_len}"
    lengths = f"{entry.input_len} in / {entry.output_len} out"
    if "batchLatencyMs" in entry.measured:
        return f"batch {entry.concurrency}, {lengths}"
    return f"{entry.concurrency} in flight, {lengths}"


def _number(value: float) -> str:
    return f"{value:,.1f}" if value < 10_000 else f"{value:,.0f}"


def render_table(comparisons: list[EstimateComparison] | None = None) -> str:
    """The markdown table of docs/sizing.md's "Compared with measurements", between markers."""
    comparisons = compare() if comparisons is None else comparisons
    rows = [
        TABLE_BEGIN,
        "",
        "| id | model, GPU | engine | workload | metric | measured | estimated | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        e = c.entry
        engine = e.engine.split(" (")[0]
        # The table is in docs/; this project's own records are files of the repository.
        url = e.source.url if e.source.url.startswith("https://") else f"../{e.source.url}"
        use = " (fit)" if e.use == "fit" else " (miss)" if e.miss else ""
        rows.append(
            f"| [{e.id}]({url}){use} | {_model_label(e)}, {e.gpu} TP{e.tp} | {engine} | "
            f"{_workload(e)} | {METRICS[c.metric]} | {_number(c.measured)} | "
            f"{_number(c.estimated)} | {c.ratio:.2f} |"
        )
    bands = ", ".join(
        f"{METRICS[metric]} {low:g}-{high:g}"
        for metric, (low, high) in measurements().bands.items()
    )
    rows += ["", f"Observed bands of the ratio, per metric: {bands}."]
    misses = {c.entry.id: c.entry.miss for c in comparisons if c.entry.miss}
    rows += [f"Miss, {key}: {why}" for key, why in misses.items()] + ["", TABLE_END]
    return "\n".join(rows)


if __name__ == "__main__":
    print(render_table())
