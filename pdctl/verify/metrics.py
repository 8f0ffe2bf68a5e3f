"""Prometheus text exposition (what vLLM's /metrics serves), parsed into samples, and the
arithmetic verify needs: sums over label selections and differences between two scrapes.

The format (prometheus.io/docs/instrumenting/exposition_formats): one sample per line,
`name{label="value",...} value [timestamp]`; `# HELP` and `# TYPE` comments; label values
escape backslash, double quote and newline. prometheus_client (which vLLM uses) writes a
counter `x` as the sample `x_total` (plus `x_created`), a histogram `h` as `h_bucket`, `h_count`,
`h_sum` (plus `h_created`). The OpenMetrics variant adds `# EOF`, also a comment here.

The names of vLLM's own engine metrics live here (they are vLLM's, whatever the connector); the
metrics that show a connector's transfers come from the connector table (pdctl.connectors).
"""

from __future__ import annotations

import math
import re
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

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


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


def _unescape(value: str) -> str:
    return re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], value)


def _labels(text: str, line_no: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _LABEL.match(text, position)
        if not match:
            raise ExpositionError(f"line {line_no}: bad labels {{{text}}}")
        labels[match.group(1)] = _unescape(match.group(2))
        position = match.end()
    return labels


def _value(text: str, line_no: int) -> float:
    try:
        return float(text)  # also NaN, +Inf, -Inf
    except ValueError:
        raise ExpositionError(f"line {line_no}: bad value {text!r}") from None


def parse(text: str) -> Scrape:
    """Parse a /metrics page. Raises ExpositionError on a line that is not a sample."""
    scrape = Scrape()
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                scrape.types[parts[2]] = parts[3].strip()
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ExpositionError(f"line {line_no}: not a sample: {line[:120]}")
        name, labels, value = match.groups()
        scrape.samples.append(
            Sample(name, _labels(labels, line_no) if labels else {}, _value(value, line_no))
        )
    return scrape


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
