"""What bench sends: fixed-length prompts of random words (no two share a prefix, so a prefix
cache cannot hide prefill work), a fixed output length, and a sweep of concurrency steps, each
a number of requests or a duration."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

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
class Workload:
    """One bench run: every step sends `requests` requests (or sends for `duration` seconds) with
    `concurrency` in flight, each a prompt of `input_len` words asking for `output_len` tokens."""

    input_len: int = 512
    output_len: int = 128
    concurrency: tuple[int, ...] = (1,)
    requests: int | None = 32  # per step; None when duration is set
    duration: float | None = None  # seconds per step
    model: str | None = None
    timeout: float = 600.0  # seconds for one request
    seed: int | None = None  # None: fresh prompts every run
    slo_ttft_ms: float | None = None
    slo_itl_ms: float | None = None
    slo_attainment: float = 0.9  # share of a step's requests that must meet the SLOs
    connector: str | None = None  # None: detect from the engines' metrics

    def __post_init__(self) -> None:
        if (self.requests is None) == (self.duration is None):
            raise UsageError("give either --requests or --duration per step, not both")
        if not self.concurrency or min(self.concurrency) < 1:
            raise UsageError("--concurrency: each step needs at least 1 request in flight")

    @property
    def slo(self) -> bool:
        return self.slo_ttft_ms is not None or self.slo_itl_ms is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_len": self.input_len,
            "output_len": self.output_len,
            "concurrency": list(self.concurrency),
            "requests": self.requests,
            "duration_s": self.duration,
            "model": self.model,
            "seed": self.seed,
        }

    def body(self, model: str, prompt: str) -> dict[str, Any]:
        """A streamed completion that generates exactly output_len tokens (vLLM's ignore_eos)."""
        return {
            "model": model,
            "prompt": prompt,
            "max_tokens": self.output_len,
            "min_tokens": self.output_len,
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
    if not steps or min(steps) < 1:
        raise UsageError(f"--concurrency {text!r}: each step needs at least 1")
    return steps


class Prompts:
    """Prompts of `words` random words from one seeded generator (thread-safe enough: each call
    draws a whole prompt under the GIL from a generator only this object uses)."""

    def __init__(self, words: int, seed: int | None) -> None:
        self.words = words
        self._rng = random.Random(seed)

    def next(self) -> str:
        return " ".join(self._rng.choices(_WORDS, k=self.words))
