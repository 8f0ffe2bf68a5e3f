"""What bench sends: fixed-length prompts of random words (no two share a prefix, so a prefix
cache cannot hide prefill work, unless --prefix-share asks for a shared one) or a dataset file's
requests, and a sweep of load steps: closed loop (a number in flight) or open loop (a rate of
arrivals), each a number of requests or a duration."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pdctl import defaults, limits
from pdctl.bench.dataset import Entry
from pdctl.errors import UsageError

# Common English words: each is one token for most tokenizers, so a prompt of N words is about
# N tokens (the engines' usage reports the exact count).
_WORDS = """
time year people way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye
job word business issue side kind head house service friend father power hour game line end
member law car city community name president team minute idea body information back parent
face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy music market sense
nation plan college interest death experience effect use class control care field development
role effort rate heart drug show leader light voice wife police mind price report decision son
view relationship town road arm difference value building action model season society tax
director position player record paper space ground form event official matter center couple site
project activity star table need court oil situation cost industry figure street image phone
data picture practice piece land product doctor wall patient worker news test movie north love
""".split()


@dataclass(frozen=True)
class BenchSettings:
    """One bench run: every step sends `requests` requests (or sends for `duration` seconds) with
    `concurrency` in flight (closed loop) or arriving at `rate` per second (open loop, Poisson,
    at most `max_in_flight` at once), each a prompt of `input_len` words (the first
    `prefix_share` of them the same for every request of a step) or the next request of
    `dataset`, asking for `output_len` tokens unless the dataset line says, or a length drawn
    within `output_spread` of it (`output_lengths`)."""

    input_len: int = defaults.BENCH_INPUT_LEN
    output_len: int = defaults.BENCH_OUTPUT_LEN
    output_spread: float = defaults.BENCH_OUTPUT_SPREAD
    concurrency: tuple[int, ...] = (defaults.BENCH_CONCURRENCY,)
    rate: tuple[float, ...] | None = None  # requests/s per step; None: closed loop
    max_in_flight: int = defaults.BENCH_MAX_IN_FLIGHT
    prefix_share: float = 0.0
    dataset: tuple[Entry, ...] | None = None
    dataset_name: str | None = None  # where the dataset came from, for the report
    requests: int | None = defaults.BENCH_REQUESTS  # None when duration is set
    duration: float | None = None  # seconds per step
    model: str | None = None
    timeout: float = defaults.BENCH_TIMEOUT_S
    seed: int | None = None  # None: fresh prompts every run
    slo_ttft_ms: float | None = None
    slo_itl_ms: float | None = None
    slo_attainment: float = defaults.SLO_ATTAINMENT
    connector: str | None = None  # None: detect from the engines' metrics

    def __post_init__(self) -> None:
        if (self.requests is None) == (self.duration is None):
            raise UsageError("give either --requests or --duration per step, not both")
        if not self.concurrency or min(self.concurrency) < 1:
            raise UsageError("--concurrency: each step needs at least 1 request in flight")
        if self.rate is not None and (not self.rate or min(self.rate) <= 0):
            raise UsageError("--rate: each step needs a rate above 0 requests/s")
        if not 0.0 <= self.prefix_share < 1.0:
            raise UsageError("--prefix-share: a share of the prompt from 0 up to (not) 1")
        if self.dataset is not None and self.prefix_share:
            raise UsageError("--prefix-share shapes generated prompts; a --dataset has its own")
        if not 0.0 <= self.output_spread < 1.0:
            raise UsageError("--output-spread: a share of --output-len from 0 up to (not) 1")
        if self.dataset is not None and self.output_spread:
            raise UsageError(
                "--output-spread draws generated requests' lengths; a --dataset's "
                "lines say their own"
            )

    @property
    def steps(self) -> list[tuple[int | None, float | None]]:
        """(concurrency, rate) per step: (n, None) closed loop, (None, r) open loop."""
        if self.rate is not None:
            return [(None, r) for r in self.rate]
        return [(c, None) for c in self.concurrency]

    @property
    def warnings(self) -> list[str]:
        """Steps whose concurrency their requests cannot reach: a closed loop of C clients that
        sends R < C requests never has more than R in flight."""
        if self.rate is not None or self.requests is None:
            return []
        return [
            f"--concurrency {c} with --requests {self.requests}: that step never has more than "
            f"{self.requests} in flight; give --requests {c} or more (or --duration)"
            for c in self.concurrency
            if c > self.requests
        ]

    @property
    def slo(self) -> bool:
        return self.slo_ttft_ms is not None or self.slo_itl_ms is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_len": None if self.dataset else self.input_len,
            "output_len": self.output_len,
            "output_spread": self.output_spread,
            "concurrency": None if self.rate is not None else list(self.concurrency),
            "rate": None if self.rate is None else list(self.rate),
            "max_in_flight": None if self.rate is None else self.max_in_flight,
            "prefix_share": self.prefix_share,
            "dataset": self.dataset_name,
            "requests": self.requests,
            "duration_s": self.duration,
            "model": self.model,
            "seed": self.seed,
        }

    def body(self, model: str, prompt: str, output_len: int | None = None) -> dict[str, Any]:
        """A streamed completion that generates exactly `output_len` tokens (default: the
        workload's) whatever the model would say: vLLM's ignore_eos stops only at max_tokens. No
        min_tokens: routers send the prefill a copy with max_tokens 1 and some keep min_tokens
        (LMCache's PD proxy, examples/disagg_prefill/disagg_proxy_server.py), which vLLM refuses
        (HTTP 400: min_tokens above max_tokens)."""
        tokens = output_len or self.output_len
        return {
            "model": model,
            "prompt": prompt,
            "max_tokens": tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }


def parse_concurrency(text: str) -> tuple[int, ...]:
    """`1,4,16` -> (1, 4, 16): the steps of a sweep, in the order given."""
    try:
        steps = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--concurrency {text!r}: expected numbers such as 1,4,16") from None
    if not steps or min(steps) < 1 or max(steps) > limits.CONCURRENCY_MAX:
        raise UsageError(
            f"--concurrency {text!r}: each step needs 1 to {limits.CONCURRENCY_MAX:,} in flight"
        )
    return _few(steps, "--concurrency")


def parse_rate(text: str) -> tuple[float, ...]:
    """`0.5,2,8` -> (0.5, 2.0, 8.0) requests/s: the open-loop steps, in the order given."""
    try:
        steps = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--rate {text!r}: expected requests/s such as 0.5,2,8") from None
    if not steps or not all(0 < step <= limits.RATE_MAX for step in steps):
        raise UsageError(
            f"--rate {text!r}: each step needs a rate above 0, up to {limits.RATE_MAX:,.0f}/s"
        )
    return _few(steps, "--rate")


def _few(steps: tuple[Any, ...], flag: str) -> tuple[Any, ...]:
    if len(steps) > limits.STEPS_MAX:
        raise UsageError(f"{flag}: {len(steps):,} steps; at most {limits.STEPS_MAX:,}")
    return steps


class Source(Protocol):
    """Where a step's requests come from: each call gives a prompt and its output length (None:
    the workload's)."""

    def next(self) -> tuple[str, int | None]: ...


class Prompts:
    """Prompts of `words` random words from one seeded generator, the first `shared` words the
    same for all of them, each with an output length from `outputs` (None: the workload's)
    (thread-safe enough: each call draws a whole prompt under the GIL from generators only this
    object uses)."""

    def __init__(
        self,
        words: int,
        seed: int | None,
        shared: int = 0,
        outputs: Callable[[], int] | None = None,
    ) -> None:
        self.words = words
        self._rng = random.Random(seed)
        self._prefix = self._rng.choices(_WORDS, k=shared)
        self._outputs = outputs

    def next(self) -> tuple[str, int | None]:
        rest = self._rng.choices(_WORDS, k=self.words - len(self._prefix))
        return " ".join(self._prefix + rest), self._outputs() if self._outputs else None


class DatasetRequests:
    """A dataset's requests in file order; past the last it starts again and says so."""

    def __init__(self, entries: tuple[Entry, ...]) -> None:
        self._entries = entries
        self.sent = 0
        self._lock = threading.Lock()

    @property
    def wrapped(self) -> bool:
        """Some request was sent a second time (a prefix cache may have answered it)."""
        return self.sent > len(self._entries)

    def next(self) -> tuple[str, int | None]:
        with self._lock:
            entry = self._entries[self.sent % len(self._entries)]
            self.sent += 1
        return entry.prompt, entry.output_len
