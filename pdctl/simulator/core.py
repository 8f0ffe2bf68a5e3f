"""The engine core of one simulated engine: a thread that runs the scheduler step after step on
a clock, and the requests that wait for their tokens.

Clocks: `real` waits each step's seconds (the engine answers at the modelled speed); `virtual`
waits nothing and counts the steps' seconds (answers come as fast as the CPU allows, and the
times the engine reports, its metrics' phases, are the modelled ones).

A request ends early, as vLLM aborts one whose client disconnected: when its generator is closed
(its reader stopped reading), or when the `cancelled` check its thread set with `cancellable`
(the HTTP layer's: has the client gone?) says so, looked at every CANCEL_POLL seconds while it
waits for a token. Either way it leaves the scheduler and frees its blocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pdctl.simulator.scheduler import Scheduler, Sequence

CANCEL_POLL = 0.25  # seconds between looks at a waiting request's `cancelled` check
_request = threading.local()  # the `cancelled` check of the request this thread serves


@contextmanager
def cancellable(cancelled: Callable[[], bool]) -> Iterator[None]:
    """Within the block, requests this thread submits end once `cancelled()` is true."""
    _request.cancelled = cancelled
    try:
        yield
    finally:
        del _request.cancelled


class RealClock:
    name = "real"

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock:
    name = "virtual"

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self._now += max(seconds, 0.0)


Clock = RealClock | VirtualClock


@dataclass(frozen=True)
class Delays:
    """Seconds a step takes beyond its cost: injected by a test or --sim-fault."""

    first_token: float = 0.0  # a step in which some request gets its first token
    inter_token: float = 0.0  # a step in which some request gets a later token


class Core:
    """`delays` is read before every step (a test may change them while requests run)."""

    def __init__(
        self, scheduler: Scheduler, clock: Clock, delays: Callable[[], Delays] = Delays
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.delays = delays
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stopped = False
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def counts(self) -> tuple[int, int, float]:
        """(running, waiting, KV usage) as vLLM's gauges say them."""
        with self._cv:
            s = self.scheduler
            return len(s.running), len(s.waiting), s.usage

    def wait(self, seconds: float) -> None:
        """A request waits (for its KV transfer): on the real clock only."""
        if isinstance(self.clock, RealClock):
            self.clock.sleep(seconds)

    def _extra(self, batch_first: bool, batch_later: bool) -> float:
        d = self.delays()
        return (d.first_token if batch_first else 0.0) + (d.inter_token if batch_later else 0.0)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped:
                    batch = self.scheduler.schedule(self.clock.now())
                    if batch:
                        break
                    self._cv.wait()
                if self._stopped:
                    return
            firsts = [s for s, n in batch.chunks if s.computed + n >= s.target]
            firsts += [s for s in batch.decodes if not s.generated]
            later = any(s.generated for s in batch.decodes)
            self.clock.sleep(batch.seconds + self._extra(bool(firsts), later))
            with self._cv:
                self.scheduler.complete(batch, self.clock.now())
                self._cv.notify_all()

    def generate(self, prompt: int, cached: int, max_tokens: int) -> Iterator[Sequence]:
        """Submit a request; yields its sequence each time it gets a token (its token_times
        grow), the last time once it is done."""
        cancelled: Callable[[], bool] | None = getattr(_request, "cancelled", None)
        seq = Sequence(prompt, max_tokens, cached=cached, arrival=self.clock.now())
        with self._cv:
            self.scheduler.add(seq)
            self._cv.notify_all()
        seen = 0
        try:
            while seen < max_tokens:
                with self._cv:
                    while seq.generated <= seen and not self._stopped:
                        if cancelled is not None and cancelled():
                            return
                        self._cv.wait(CANCEL_POLL if cancelled is not None else None)
                    if self._stopped:
                        return
                    seen = seq.generated
                yield seq
        finally:  # done, or ended early (cancelled, closed, the engine stopped)
            if not seq.done:
                with self._cv:
                    self.scheduler.abort(seq)
                    self._cv.notify_all()
