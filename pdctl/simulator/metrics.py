"""The simulated engine's counters and their Prometheus text: vLLM's metric names with vLLM's
semantics (vllm/v1/metrics/loggers.py; NixlConnector's KV transfer stats), LMCache's own counters
where the engine runs LMCache (their names from the connector table's lmcacheMetrics, labelled
model_name and worker_id as LMCache's PrometheusLogger labels them), plus
`pdstack_simulator_info`, a gauge no vLLM exports, so a reader can tell a simulator from vLLM."""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl import connectors

SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
_BYTE_BUCKETS = (1e4, 1e5, 1e6, 1e7, 1e8, 1e9)
_DESC_BUCKETS = (1.0, 10.0, 100.0, 1000.0, 10000.0)
PHASES = ("queue", "prefill", "decode")
NIXL, LMCACHE = "NixlConnector", "LMCacheConnectorV1"


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


@dataclass
class Counters:
    prompt_tokens: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=lambda: {"length": 0, "stop": 0})
    failed_transfers: int = 0
    failed_notifications: int = 0
    xfer_time: Histogram = field(default_factory=lambda: Histogram(_BUCKETS))
    xfer_bytes: Histogram = field(default_factory=lambda: Histogram(_BYTE_BUCKETS))
    descriptors: Histogram = field(default_factory=lambda: Histogram(_DESC_BUCKETS))
    phases: dict[str, Histogram] = field(
        default_factory=lambda: {p: Histogram(_BUCKETS) for p in PHASES}
    )
    # LMCache's counters by what they count (the connector table's lmcacheMetrics `counts`)
    lmcache: dict[str, int] = field(default_factory=dict)

    def count_lmcache(self, **moved: int) -> None:
        for what, value in moved.items():
            self.lmcache[what] = self.lmcache.get(what, 0) + value


@dataclass(frozen=True)
class Gauges:
    running: int
    waiting: int
    kv_usage: float  # 0..1


@dataclass(frozen=True)
class Info:
    """What `pdstack_simulator_info` says (its labels)."""

    model: str
    gpu: str
    tp: int
    pp: int
    clock: str


def _sample(name: str, labels: str, value: float) -> str:
    return f"{name}{{{labels}}} {value}"


def _header(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def _histogram(name: str, labels: str, hist: Histogram, help_text: str) -> list[str]:
    out = _header(name, "histogram", help_text)
    for bound, count in zip(hist.buckets, hist.counts, strict=True):
        out.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
    return [
        *out,
        f'{name}_bucket{{{labels},le="+Inf"}} {float(hist.count)}',
        _sample(f"{name}_count", labels, float(hist.count)),
        _sample(f"{name}_sum", labels, hist.sum),
    ]


def _nixl(labels: str, c: Counters) -> list[str]:
    out: list[str] = []
    for name, hist, help_text in (
        ("vllm:nixl_xfer_time_seconds", c.xfer_time, "Histogram of transfer duration."),
        ("vllm:nixl_bytes_transferred", c.xfer_bytes, "Histogram of bytes transferred."),
        ("vllm:nixl_num_descriptors", c.descriptors, "Histogram of descriptors."),
    ):
        out += _histogram(name, labels, hist, help_text)
    for name, value in (
        ("vllm:nixl_num_failed_transfers", c.failed_transfers),
        ("vllm:nixl_num_failed_notifications", c.failed_notifications),
    ):
        out += _header(name, "counter", "Number of failures.")
        out.append(_sample(f"{name}_total", labels, float(value)))
    return out


def _lmcache(served: str, c: Counters) -> list[str]:
    labels = f'model_name="{served}",worker_id="0"'
    out: list[str] = []
    for entry in connectors.load().lmcache_metrics:
        out += _header(entry["name"], "counter", entry["help"])
        out.append(
            _sample(f"{entry['name']}_total", labels, float(c.lmcache.get(entry["counts"], 0)))
        )
    return out


def render(
    served: str,
    c: Counters,
    g: Gauges,
    info: Info,
    prompt_sources: bool = True,
    connector: str | None = NIXL,
) -> str:
    """The /metrics page (`prompt_sources` False: vLLM before PR #33290, no by-source counter).
    The connector's own metrics: NIXL's transfer histograms and failure counters (vLLM exports them
    with NixlConnector), or LMCache's counters; none without a connector."""
    labels = f'engine="0",model_name="{served}"'
    about = f'model="{info.model}",gpu="{info.gpu}",tp="{info.tp}",pp="{info.pp}"'
    out = [
        *_header("pdstack_simulator_info", "gauge", "pd-stack's engine simulator (not vLLM)."),
        _sample("pdstack_simulator_info", f'{about},clock="{info.clock}"', 1.0),
        *_header(
            "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."
        ),
        _sample("vllm:num_requests_running", labels, float(g.running)),
        *_header(
            "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."
        ),
        _sample("vllm:num_requests_waiting", labels, float(g.waiting)),
        *_header("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
        _sample("vllm:kv_cache_usage_perc", labels, g.kv_usage),
        *_header("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed."),
        _sample("vllm:prompt_tokens_total", labels, float(c.prompt_tokens)),
        *_header("vllm:prompt_tokens_created", "gauge", "Number of prefill tokens processed."),
        _sample("vllm:prompt_tokens_created", labels, 1.7e09),
    ]
    if prompt_sources:
        name = "vllm:prompt_tokens_by_source_total"
        out += _header(name, "counter", "Number of prompt tokens by source.")
        out += [_sample(name, f'{labels},source="{s}"', float(v)) for s, v in c.by_source.items()]
    out += [
        *_header(
            "vllm:generation_tokens_total", "counter", "Number of generation tokens processed."
        ),
        _sample("vllm:generation_tokens_total", labels, float(c.generation_tokens)),
        *_header(
            "vllm:request_success_total", "counter", "Count of successfully processed requests."
        ),
    ]
    out += [
        _sample("vllm:request_success_total", f'{labels},finished_reason="{r}"', float(v))
        for r, v in c.success.items()
    ]
    for p in PHASES:
        name = f"vllm:request_{p}_time_seconds"
        out += _histogram(name, labels, c.phases[p], f"Histogram of {p} time.")
    if connector == NIXL:
        out += _nixl(labels, c)
    elif connector == LMCACHE:
        out += _lmcache(served, c)
    return "\n".join(out) + "\n"
