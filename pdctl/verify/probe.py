"""The PD probe's procedure, one for `pdctl verify` (pdctl/verify/proof.py) and the chart's canary
(scripts/build_canary.py writes this module into helm/files/canary/pd_canary.py, so it imports
nothing but Python's standard library): a fresh prompt, the engines' counters read before it is
sent and again, every SETTLE_POLL seconds, until the verdicts hold or the settle time is over.

vLLM updates its counters as its engine steps, possibly just after a response ends: hence the
settle loop. The prompt starts with a random nonce, so no engine has any of it in its prefix
cache; the filler after it is any text.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

PROBE_TAG = "pd-probe"  # the prompt's first word, before its nonce
# Words of the probe's prompt after its nonce (any text will do; it is never cached).
FILLER = (
    "prefill computes the prompt once and decode reads its key value cache over the network "
    "so that the decode pool only generates tokens the probe reads the counters of both pools"
).split()
SETTLE_POLL = 0.25  # seconds between /metrics reads while waiting for the counters

Judged = TypeVar("Judged")


def probe_prompt(words: int) -> str:
    """A prompt no engine has seen: PROBE_TAG, a random nonce, then FILLER (`words` in all)."""
    filler = [FILLER[i % len(FILLER)] for i in range(max(words - 2, 1))]
    return " ".join([PROBE_TAG, uuid.uuid4().hex, *filler])


def probe_request(model: str, words: int, max_tokens: int) -> dict[str, Any]:
    """The /v1/completions body of the probe: a fresh prompt, greedy, exactly max_tokens out."""
    return {
        "model": model,
        "prompt": probe_prompt(words),
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }


def settle(
    judge_now: Callable[[], Judged], holds: Callable[[Judged], bool], seconds: float
) -> Judged:
    """judge_now() (a read of the counters after the probe, judged) repeated every SETTLE_POLL
    seconds until what it returns holds or `seconds` have passed; the last one."""
    deadline = time.monotonic() + seconds
    while True:
        judged = judge_now()
        if holds(judged) or time.monotonic() >= deadline:
            return judged
        time.sleep(SETTLE_POLL)
