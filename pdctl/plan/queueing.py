"""Queueing in front of the engines, for TTFT under load (docs/sizing.md "TTFT under load").

Two loads: open arrivals at `--rate` requests/s (Poisson, as `vllm bench serve --request-rate`),
or a closed loop of `--concurrency` clients that each send their next request when the last one
ends (as `vllm bench serve --max-concurrency` at an infinite rate). A prefill server (a prefill
engine, or the prefill share of an aggregated engine) serves one prompt after another in a fixed
time, requests spread evenly over the servers: an M/D/1 queue per server under open arrivals, a
mean-value analysis of the clients' loop under a closed one (`closed_loop`). Both are queues of
clients out of step, as output lengths that vary make them (`output_lengths`).

An aggregated engine under a closed loop of equal requests runs in waves instead
(`wave_median`): its decoding requests end in the same step, so their clients' next prompts
arrive together, and vLLM packs them into steps of its token budget. Pure functions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass


def md1_wait(rate: float, service_s: float) -> float:
    """Mean wait in queue of an M/D/1 server (Pollaczek-Khinchine with deterministic service):
    rho x S / (2 (1 - rho)); infinite at or past saturation."""
    rho = rate * service_s
    if rho >= 1:
        return math.inf
    return rho * service_s / (2 * (1 - rho))


@dataclass(frozen=True)
class Load:
    """What a layout sees under the workload's load."""

    requests_per_s: float  # the throughput at this load (--rate, or the closed loop's)
    queue_s: float  # mean TTFT spent waiting: for a prefill server, or (closed loop) any slot
    utilization: float  # of the prefill servers


def under_load(
    *,
    servers: int,
    service_s: float,
    fixed_s: float,
    decode_s: float,
    capacity: float,
    rate: float | None,
    concurrency: int,
) -> Load:
    """TTFT's queueing part and the throughput at the load.

    `servers` prefill servers of `service_s` each; `fixed_s` is the rest of TTFT without a queue
    (prefill, transfer, first step); `decode_s` the time from the first to the last token;
    `capacity` the requests/s the layout sustains.

    Open (`rate` given): M/D/1 wait at rate / servers per server; infinite at or past capacity.
    Closed (`concurrency` clients): mean-value analysis of the clients' loop (`closed_loop`),
    its throughput X at most `capacity`; the queueing part of TTFT is then N / X - fixed - decode
    (Little's law over one request's life), which also holds when X is held at `capacity` by a
    stage other than prefill (requests wait for a decode slot).
    """
    if rate is not None:
        if rate >= capacity:
            return Load(rate, math.inf, min(rate * service_s / servers, 1.0))
        return Load(rate, md1_wait(rate / servers, service_s), rate * service_s / servers)
    outside_s = fixed_s - service_s + decode_s  # a request's time away from the prefill servers
    throughput = closed_loop(servers, service_s, outside_s, concurrency, capacity)
    queue = max(concurrency / throughput - fixed_s - decode_s, 0.0)
    return Load(throughput, queue, throughput * service_s / servers)


def closed_loop(
    servers: int, service_s: float, outside_s: float, clients: int, most: float = math.inf
) -> float:
    """Requests/s of `clients` that each send a prompt to one of `servers` prefill servers
    (spread evenly, so each serves its share of the clients), wait for it to be served
    (`service_s` each, one at a time), spend `outside_s` elsewhere (transfer, decode, the
    network) and send the next one; at most `most` (what the rest of the layout sustains).

    Mean-value analysis (Reiser and Lavenberg, "Mean-Value Analysis of Closed Multichain Queuing
    Networks", J. ACM 27(2), 1980, https://doi.org/10.1145/322186.322195) of one server, client
    by client: a prompt arriving finds the queue that one client fewer leaves there, and waits
    for each prompt of it, the one in service only half done on average (a fixed service time:
    its mean residual is half of it). That residual is exact for the one in service but makes
    the queue grow by half a prompt per client once the server is always busy, so the throughput
    is held at what the server serves, 1 / `service_s`; it only grows with clients, so the
    analysis stops there. A share of clients between two whole numbers is interpolated. Unlike an
    open queue, the clients are a finite population, so the queue never holds more than they
    are: a closed loop near the prefill servers' capacity waits less than an M/D/1 queue at the
    same throughput says."""
    if service_s > 0:
        most = min(most, servers / service_s)
    share, per_server = clients / servers, most / servers
    whole = math.floor(share)
    rate = at_whole = 0.0  # one server's requests/s at n clients, and at `whole` clients
    queue = busy = 0.0  # at one client fewer
    for n in range(1, math.ceil(share) + 1):
        response = service_s * (1 + queue - busy / 2)
        rate = n / (response + outside_s)
        if rate >= per_server:  # from here on every rate is the most
            rate = per_server
            at_whole = per_server if n <= whole else at_whole
            break
        at_whole = rate if n == whole else at_whole
        queue, busy = rate * response, rate * service_s
    return servers * (at_whole + (share - whole) * (rate - at_whole))


def wave_median(
    prompts: int, input_len: int, budget: int, first_s: float, step_s: Callable[[int], float]
) -> float:
    """Median seconds from a wave's arrival to its prompts' first tokens, on one engine.

    A wave of `prompts` equal prompts reaches an idle engine together: the first to arrive runs
    alone (`first_s`, the unqueued prefill), the others arrive during that step and are packed
    `budget` tokens a step (chunked prefill: prompt i of them ends in step ceil(i x input /
    budget)); `step_s(tokens)` is one such step's seconds. The median of those times is what a
    bench's p50 reports (benchmarks/records/real-engines-h200-1gpu-bench.json, docs/sizing.md
    "TTFT under load")."""

    def ends(i: int) -> float:  # the i-th prompt to reach the engine, from 0
        if i == 0:
            return first_s
        steps = math.ceil(i * input_len / budget)
        full = min(budget, (prompts - 1) * input_len)
        return first_s + steps * step_s(full)

    return (ends((prompts - 1) // 2) + ends(prompts // 2)) / 2


def output_lengths(mean: int, spread: float, seed: int | None = None) -> Callable[[], int]:
    """Output lengths drawn uniformly within `spread` (a share) of `mean`, at least 2 (one gap
    between tokens), from a seeded generator; `mean` itself with no spread. Equal outputs make a
    closed loop's clients end together and send together (lockstep); outputs that vary, as a
    model's do where it stops at its end-of-sequence token, put them out of step: the queue
    `under_load` estimates (docs/sizing.md "TTFT under load"). `pdctl bench --output-spread` and
    the simulator's closed loop draw their lengths here."""
    draw = random.Random(seed)
    low, high = mean * (1 - spread), mean * (1 + spread)
    return lambda: max(2, round(draw.uniform(low, high))) if spread else mean
