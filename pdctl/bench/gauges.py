"""What the engines hold while a step runs: their /metrics gauges sampled every second on a thread
of their own (queue depth, requests running, KV cache usage), summarized per role as the mean and
the largest value seen. Counters are read before and after a step (pdctl.bench.engines); gauges
only mean something while it runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pdctl.verify import judge
from pdctl.verify.client import Http
from pdctl.verify.proof import scrape_all
from pdctl.verify.report import Endpoint

INTERVAL_S = 1.0
# vLLM's gauges of what an engine holds now (v1 engine): requests queued and running, and the
# share of its KV cache blocks in use (0 to 1).
GAUGES = {
    "waiting": "vllm:num_requests_waiting",
    "running": "vllm:num_requests_running",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
}


class Sampler:
    """`with Sampler(engines, model):` samples until the block ends; then `by_role()`."""

    def __init__(
        self,
        engines: Sequence[Endpoint],
        model: str,
        interval: float = INTERVAL_S,
        api_key: str | None = None,
    ) -> None:
        self._engines = [e for e in engines if e.url is not None]
        self._model = model
        self._interval = interval
        self._api_key = api_key
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        # per role, per gauge: one value per sample (summed over the role's engines, except KV
        # usage: their mean)
        self.samples: dict[str, dict[str, list[float]]] = {}

    def __enter__(self) -> Sampler:
        if self._engines:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        with Http(max(self._interval, 2.0), self._api_key) as http:
            while True:
                pages, _ = scrape_all(http, self._engines)
                self.add(pages)
                if self._stop.wait(self._interval):
                    return

    def add(self, pages: dict[str, judge.Scrape]) -> None:
        """One sample of every engine's page (engine name -> its scrape)."""
        by_role: dict[str, dict[str, list[float]]] = {}
        for engine in self._engines:
            page = pages.get(engine.name)
            if page is None:
                continue
            for gauge, name in GAUGES.items():
                if page.has(name):
                    value = page.total(name, judge.model_labels(page, name, self._model))
                    by_role.setdefault(engine.role, {}).setdefault(gauge, []).append(value)
        for role, gauges in by_role.items():
            kept = self.samples.setdefault(role, {})
            for gauge, values in gauges.items():
                one = sum(values) / len(values) if gauge == "kv_cache_usage" else sum(values)
                kept.setdefault(gauge, []).append(one)

    def by_role(self) -> dict[str, dict[str, Any]]:
        """Per role and gauge: `mean` and `max` over the samples, and their count."""
        return {
            role: {
                gauge: {
                    "mean": round(sum(values) / len(values), 4),
                    "max": round(max(values), 4),
                    "samples": len(values),
                }
                for gauge, values in gauges.items()
            }
            for role, gauges in self.samples.items()
        }
