"""Prometheus text exposition (what vLLM's /metrics serves), parsed into samples, and the
arithmetic verify needs: sums over label selections and differences between two scrapes.

The format (prometheus.io/docs/instrumenting/exposition_formats) is parsed by prometheus_client's
own parser (prometheus_client.parser): one sample per line, `name{label="value",...} value
[timestamp]`, `# HELP` and `# TYPE` comments, escaped label values; timestamps are dropped.
prometheus_client (which vLLM uses) writes a counter `x` as the sample `x_total` (plus
`x_created`), a histogram `h` as `h_bucket`, `h_count`, `h_sum` (plus `h_created`). A count
that is +Inf, NaN or negative is refused: differences of it prove nothing.

The names of vLLM's own engine metrics live here (they are vLLM's, whatever the connector); the
metrics that show a connector's transfers come from the connector table (pdctl.connectors).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

# vLLM engine metrics (vllm/v1/metrics/loggers.py), label model_name (and engine per DP rank).
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
# Where prompt tokens came from (vLLM PR #33290, PromptTokenStats): the values of the `source`
# label of the connector table's transferEvidence metric, besides the one the table names.
# vLLM's per-request phase histograms (seconds; v1 engine, docs/design/metrics.md): waiting in
# the queue, the prefill phase (scheduled to first token) and the decode phase.
PHASE_SECONDS = {
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
}
# vLLM's gauges of what an engine holds now (v1 engine): requests queued and running, and the
# share of its KV cache blocks in use (0 to 1).
GAUGES = {
    "waiting": "vllm:num_requests_waiting",
    "running": "vllm:num_requests_running",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
}
SOURCE_LABEL = "source"
LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"
MODEL_LABEL = "model_name"

# The samples that count (a counter's, a histogram's or a summary's): finite, and not negative but
# for a sum.
_COUNTS = ("_total", "_count", "_bucket")
_SUMS = ("_sum",)


class ExpositionError(ValueError):
    """Text that is not Prometheus exposition (a line that is neither a comment nor a sample)."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float

    def matches(self, labels: dict[str, str]) -> bool:
        return all(self.labels.get(key) == value for key, value in labels.items())


@dataclass
class Scrape:
    """One /metrics page: its samples, and the declared type of each family (# TYPE)."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {sample.name for sample in self.samples}

    def has(self, name: str) -> bool:
        return any(sample.name == name for sample in self.samples)

    def total(self, name: str, labels: dict[str, str] | None = None) -> float:
        """The sum of every sample called `name` whose labels include `labels` (0 if none)."""
        wanted = labels or {}
        return sum(s.value for s in self.samples if s.name == name and s.matches(wanted))

    def label_values(self, name: str, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}

    def family(self, name: str) -> Family | None:
        """The samples that carry a metric as a counter (`name`, `name_total`) or a histogram
        (`name_count`, `name_sum`), whichever way the page writes it; None when absent."""
        base = name[: -len("_total")] if name.endswith("_total") else name
        kind = self.types.get(base) or self.types.get(name)
        histogram = kind in ("histogram", "summary") or (kind is None and self.has(f"{base}_count"))
        if histogram:
            total = f"{base}_sum" if self.has(f"{base}_sum") else None
            return Family(name, kind or "histogram", f"{base}_count", total)
        for candidate in (name, f"{base}_total", base):
            if self.has(candidate):
                return Family(name, kind or "counter", candidate, None)
        return None


@dataclass(frozen=True)
class Family:
    """Where a metric's values are on a page: `count` is the counter's value or a histogram's
    number of observations; `sum` the histogram's total (None for a counter)."""

    name: str
    kind: str
    count: str
    sum: str | None

    def read(self, scrape: Scrape, labels: dict[str, str] | None = None) -> dict[str, float]:
        values = {"count": scrape.total(self.count, labels)}
        if self.sum:
            values["sum"] = scrape.total(self.sum, labels)
        return values


class _Lines:
    """The lines of a text, counted as the parser reads them (the line of an error)."""

    def __init__(self, text: str) -> None:
        self._lines = iter(io.StringIO(text))
        self.number = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.number += 1
        return line


def _checked(name: str, labels: dict[str, str], value: float, kind: str) -> Sample:
    """A sample, refused when it is a count that is not one (+Inf, NaN, negative): its
    differences would be no evidence of anything."""
    counts = name.endswith(_COUNTS) or (kind == "counter" and not name.endswith("_created"))
    if (counts or name.endswith(_SUMS)) and not math.isfinite(value):
        shown = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        written = "NaN" if math.isnan(value) else f"{value:+}".replace("inf", "Inf")
        raise ExpositionError(f"{name}{shown} is {written}: not a count, so no evidence")
    if counts and value < 0:
        raise ExpositionError(f"{name} is {value:g}: a count is never negative")
    return Sample(name, labels, value)


def parse(text: str) -> Scrape:
    """Parse a /metrics page with prometheus_client's parser. Raises ExpositionError on text that
    is not Prometheus exposition, and on a count that is +Inf, NaN or negative."""
    from prometheus_client.parser import text_fd_to_metric_families  # lazy: verify only

    scrape = Scrape()
    lines = _Lines(text)
    try:
        for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]
            if family.type not in ("unknown", "untyped"):
                scrape.types.setdefault(family.name, family.type)
            for sample in family.samples:
                scrape.samples.append(
                    _checked(sample.name, dict(sample.labels), float(sample.value), family.type)
                )
    except ExpositionError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as error:
        why = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
        raise ExpositionError(
            f"not Prometheus text: line {lines.number}: {why}: {_shown(lines.number, text)}"
        ) from None
    return scrape


def _shown(number: int, text: str) -> str:
    lines = text.split("\n", number)
    return repr(lines[number - 1][:120]) if 0 < number <= len(lines) else "(end of text)"


def delta(before: Scrape, after: Scrape, name: str, labels: dict[str, str] | None = None) -> float:
    """How much a counter sample moved between two scrapes of one engine. A negative difference
    (the engine restarted in between) is returned as is; callers report it."""
    moved = after.total(name, labels) - before.total(name, labels)
    return 0.0 if math.isnan(moved) else moved


def model_labels(scrape: Scrape, name: str, model: str) -> dict[str, str]:
    """Select the model's samples when the engine labels them with it (vLLM: model_name)."""
    if model in scrape.label_values(name, MODEL_LABEL):
        return {MODEL_LABEL: model}
    return {}
