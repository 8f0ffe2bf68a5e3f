"""The load generator: closed loop, `concurrency` worker threads, each sending its next
streamed request as soon as its last one ended (so exactly `concurrency` are in flight), until
the step's request budget is spent or its duration is over. Each worker has its own
pdctl.verify.client.Http (one connection), and each reply is timed by pdctl.verify.timing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pdctl.verify import timing
from pdctl.verify.client import Http

Body = Callable[[], dict[str, Any]]


class _Budget:
    """Hands out the step's requests: a count, or until a deadline."""

    def __init__(self, requests: int | None, duration: float | None) -> None:
        self._left = requests
        self._deadline = None if duration is None else time.perf_counter() + duration
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._deadline is not None:
                return time.perf_counter() < self._deadline
            if self._left is None or self._left <= 0:
                return False
            self._left -= 1
            return True


def run_step(
    url: str,
    body: Body,
    concurrency: int,
    requests: int | None,
    duration: float | None,
    timeout: float,
) -> tuple[list[timing.Timed], float]:
    """Send the step's requests to `url`; returns each request's timing (in the order they
    ended) and the step's wall time in seconds (first sent to last ended)."""
    results: list[timing.Timed] = []
    lock = threading.Lock()
    start = time.perf_counter()
    budget = _Budget(requests, duration)

    def worker() -> None:
        with Http(timeout) as http:
            while budget.take():
                timed = timing.measure(http.stream(url, body()))
                with lock:
                    results.append(timed)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - start
