"""A PD deployment simulated in virtual time, in one process: prefill engines and decode engines
(each the simulator's scheduler, pdctl.simulator.scheduler), the KV transfer between them, and a
closed loop of clients (each sends its next request when the last one ends, as `vllm bench serve
--max-concurrency`). A discrete-event loop: no sleeping, no threads, no HTTP. It is how the
simulator's queueing is compared with the planner's (tests/test_plan_simulator.py).

Every client starts at once. With equal output lengths the prompts that one prefill step packs
decode together and come back together, so the loop moves in groups (lockstep) until they thin
out; with output lengths that vary (`spread`, drawn as `pdctl bench --output-spread` draws them),
as they do where generation ends at an end-of-sequence token, the clients fall out of step within
a wave (docs/simulator.md)."""

from __future__ import annotations

import heapq
import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.plan import sizing
from pdctl.plan.layout import Estimates, Request, Workload
from pdctl.plan.queueing import output_lengths
from pdctl.plan.roofline import request_overhead_seconds
from pdctl.simulator import model
from pdctl.simulator.engine import Timing
from pdctl.simulator.scheduler import Batch, Scheduler, Sequence


@dataclass(frozen=True)
class Pd:
    """x prefill and y decode engines, the KV transfer's seconds per request, and a request's
    time outside the GPUs before it reaches prefill (the planner's request overhead). With y 0,
    aggregated serving: x engines that each prefill and decode their own requests."""

    prefill: Timing
    decode: Timing
    transfer_s: float
    overhead_s: float = 0.0
    x: int = 1
    y: int = 1


def planned_pair(arch: ModelArch, gpu: Gpu, workload: Workload) -> tuple[Estimates, Pd]:
    """One TP1 prefill and one TP1 decode engine of `arch` on `gpu`: `pdctl plan`'s estimates
    for the workload, and the pair to simulate, its KV transfer and request overhead timed as the
    planner times them."""
    req = Request(arch, gpu, gpus=2, workload=workload)
    (engine,) = [e for e in sizing.engines(req) if e.tp == 1]
    planned = sizing.evaluate_layout(req, engine, 1, engine, 1)
    timing = model.timing(arch, gpu, 1)
    transfer_s = planned.kv_transfer_ms / 1000
    return planned, Pd(timing, timing, transfer_s, request_overhead_seconds(gpu))


@dataclass(frozen=True)
class Served:
    sent: float
    token_times: tuple[float, ...]

    @property
    def ttft_s(self) -> float:
        return self.token_times[0] - self.sent

    @property
    def gaps_s(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in itertools.pairwise(t)]


@dataclass(frozen=True)
class _Asked:
    sent: float  # when its client sent it
    output_len: int


@dataclass(eq=False)
class _Engine:
    scheduler: Scheduler
    busy: bool = False
    asked: dict[int, _Asked] = field(default_factory=dict)  # by sequence id


@dataclass
class _Loop:
    pd: Pd
    input_len: int
    output_len: Callable[[], int]  # the next request's output tokens
    prefill: list[_Engine]
    decode: list[_Engine]
    events: list[tuple[float, int, Callable[[float], None]]] = field(default_factory=list)
    order: itertools.count[int] = field(default_factory=itertools.count)
    served: list[Served] = field(default_factory=list)
    turn: itertools.count[int] = field(default_factory=itertools.count)

    def at(self, time: float, action: Callable[[float], None]) -> None:
        heapq.heappush(self.events, (time, next(self.order), action))

    def send(self, sent: float) -> None:
        """A client sends a request: it reaches a prefill engine after the overhead."""
        asked = _Asked(sent, self.output_len())
        output = 1 if self.decode else asked.output_len  # PD: the prefill makes one token
        seq = Sequence(self.input_len, output, arrival=sent + self.pd.overhead_s)
        self.at(seq.arrival, lambda now: self._arrive(self.prefill, seq, now, asked))

    def _arrive(self, engines: list[_Engine], seq: Sequence, now: float, asked: _Asked) -> None:
        engine = engines[next(self.turn) % len(engines)]  # round robin, as the router's policy
        engine.scheduler.add(seq)
        engine.asked[seq.ident] = asked
        self._run(engine, now)

    def _run(self, engine: _Engine, now: float) -> None:
        if engine.busy:
            return
        batch = engine.scheduler.schedule(now)
        if batch:
            engine.busy = True
            self.at(now + batch.seconds, lambda end: self._step_ended(engine, batch, end))

    def _step_ended(self, engine: _Engine, batch: Batch, now: float) -> None:
        engine.busy = False
        for seq in engine.scheduler.complete(batch, now):
            if engine in self.prefill and self.decode:
                self._transfer(engine.asked.pop(seq.ident), now)
            elif seq.done:
                sent = engine.asked.pop(seq.ident).sent
                self.served.append(Served(sent, tuple(seq.token_times)))
                self.send(now)
        self._run(engine, now)

    def _transfer(self, asked: _Asked, now: float) -> None:
        """The prompt's KV moves to a decode engine, which generates the output."""
        seq = Sequence(self.input_len, asked.output_len, cached=self.input_len)
        self.at(now + self.pd.transfer_s, lambda then: self._arrive(self.decode, seq, then, asked))


def run(
    pd: Pd, workload: Workload, requests: int, *, spread: float = 0.0, seed: int = 0
) -> list[Served]:
    """Serve `requests` requests of the workload's prompt length with its `concurrency` clients,
    each asking for the workload's output length, or a length within `spread` of it
    (`output_lengths` with `seed`); the requests in the order they ended."""
    loop = _Loop(
        pd,
        workload.input_len,
        output_lengths(workload.output_len, spread, seed),
        [_Engine(pd.prefill.scheduler()) for _ in range(pd.x)],
        [_Engine(pd.decode.scheduler()) for _ in range(pd.y)],  # none: aggregated
    )
    for _ in range(workload.concurrency):
        loop.send(0.0)
    while loop.events and len(loop.served) < requests:
        now, _, action = heapq.heappop(loop.events)
        action(now)
    return loop.served


@dataclass(frozen=True)
class Summary:
    ttft_p50_s: float
    itl_p50_s: float
    requests: int


def steady(served: list[Served], concurrency: int) -> Summary:
    """TTFT and ITL medians with the first wave (the first `concurrency` requests to end)
    dropped: what a steady closed loop sees."""
    kept = served[concurrency:]
    gaps = [g for s in kept for g in s.gaps_s]
    return Summary(statistics.median(s.ttft_s for s in kept), statistics.median(gaps), len(kept))


def against_plan(
    arch: ModelArch, gpu: Gpu, workload: Workload, *, spread: float = 0.0, seed: int = 0
) -> tuple[Estimates, Summary]:
    """`pdctl plan`'s estimates for the planned pair (`planned_pair`) and the simulator's steady
    closed loop of the same workload: 11 x concurrency requests, the first wave dropped."""
    planned, pd = planned_pair(arch, gpu, workload)
    served = run(pd, workload, 11 * workload.concurrency, spread=spread, seed=seed)
    return planned, steady(served, workload.concurrency)
