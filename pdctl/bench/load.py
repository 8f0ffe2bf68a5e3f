"""The load generator. Closed loop (`run_step`): `concurrency` worker threads, each sending its
next streamed request as soon as its last one ended (so exactly `concurrency` are in flight), until
the step's request budget is spent or its duration is over. Open loop (`run_open_step`): requests
arrive at `rate` per second with exponential gaps (a Poisson process, as real traffic and
vLLM's benchmark_serving send), each on its own thread, whatever the ones before are doing; only
`max_in_flight` bounds them, and an arrival that finds that many waits (counted as `held`).
Each worker or request has its own pdctl.verify.client.Http (its deadline and size limits, and the
API key), and each reply is timed by pdctl.verify.timing."""

from __future__ import annotations

import random
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
    api_key: str | None = None,
) -> tuple[list[timing.Timed], float]:
    """Send the step's requests to `url`; returns each request's timing (in the order they
    ended) and the step's wall time in seconds (first sent to last ended)."""
    results: list[timing.Timed] = []
    lock = threading.Lock()
    start = time.perf_counter()
    budget = _Budget(requests, duration)

    def worker() -> None:
        with Http(timeout, api_key) as http:
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


def run_open_step(
    url: str,
    body: Body,
    rate: float,
    requests: int | None,
    duration: float | None,
    timeout: float,
    max_in_flight: int,
    seed: int | None = None,
    api_key: str | None = None,
) -> tuple[list[timing.Timed], float, int]:
    """Send the step's requests to `url` as Poisson arrivals at `rate` per second; returns each
    request's timing (in the order they ended), the step's wall time (first sent to last ended)
    and how many arrivals had to wait for one of `max_in_flight` to end."""
    results: list[timing.Timed] = []
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(max_in_flight)
    gaps = random.Random(seed)
    budget = _Budget(requests, duration)
    held = 0

    def send(payload: dict[str, Any]) -> None:
        try:
            with Http(timeout, api_key) as http:
                timed = timing.measure(http.stream(url, payload))
            with lock:
                results.append(timed)
        finally:
            slots.release()

    threads = []
    start = time.perf_counter()
    arrival = start
    while True:
        time.sleep(max(0.0, arrival - time.perf_counter()))
        if not budget.take():
            break
        if not slots.acquire(blocking=False):
            held += 1
            slots.acquire()
        thread = threading.Thread(target=send, args=(body(),), daemon=True)
        thread.start()
        threads.append(thread)
        arrival += gaps.expovariate(rate)
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - start, held
