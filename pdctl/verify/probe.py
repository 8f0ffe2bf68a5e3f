"""The PD probe's procedure, one for `pdctl verify` (pdctl/verify/proof.py) and the chart's canary
(scripts/build_canary.py writes this module into helm/files/canary/pd_canary.py, so it imports
nothing but Python's standard library): a fresh prompt, the engines' counters read before it is
sent and again, every SETTLE_POLL seconds, until the verdicts hold or the settle time is over.

vLLM updates its counters as its engine steps, possibly just after a response ends: hence the
settle loop, which lasts at least one period of a connector that updates its own metrics on a
timer (LMCache: every 10 s, `settle_seconds`). The prompt starts with a random nonce, so no
engine has any of it in its prefix cache; the filler after it is any text.

The probe's answer is read by `read_answer`: one JSON object, or the server-sent events of a
router that streams every completion, asked for or not. LMCache's PD proxy does (LMCache 0.5.6
examples/disagg_prefill/disagg_proxy_server.py, handle_completions: a StreamingResponse of
`data:` lines whatever `stream` said, its media type application/json); its first event carries
the prefill's token with usage null, and the rest is the decode's stream, with usage only when
the client asked for stream_options.include_usage, and then the decode's own count (the prompt
plus the prefill's token, the output less that token). So the token counts of a streamed answer
come from elsewhere (`streamed_counts`): the prompt's from an engine's POST /tokenize (vLLM's
count of the same prompt, which that proxy itself tokenizes with), the output's from its
finish_reason: with ignore_eos, "length" means all max_tokens were generated.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

PROBE_TAG = "pd-probe"  # the prompt's first word, before its nonce
# Words of the probe's prompt after its nonce (any text will do; it is never cached).
FILLER = (
    "prefill computes the prompt once and decode reads its key value cache over the network "
    "so that the decode pool only generates tokens the probe reads the counters of both pools"
).split()
SETTLE_POLL = 0.25  # seconds between /metrics reads while waiting for the counters
# Seconds past one period of a connector that updates its metrics on a timer (the connector
# table's metricsEvery: LMCache's every 10 s), for the read itself and the probe's last step.
SETTLE_MARGIN = 2.0

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


def settle_seconds(seconds: float, every: float) -> float:
    """How long to read the counters again: `seconds`, and for a connector that updates its
    metrics every `every` seconds, at least one period and SETTLE_MARGIN more (a shorter wait
    sees its counters still, though it moved the KV)."""
    return max(seconds, every + SETTLE_MARGIN) if every > 0 else seconds


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


@dataclass(frozen=True)
class Answer:
    """A completion's answer: the JSON object, or one assembled from a stream's events (the
    choices' texts joined, the last finish_reason and usage given); `events` counts those
    (0: one JSON answer)."""

    body: dict[str, Any]
    events: int = 0

    @property
    def streamed(self) -> bool:
        return self.events > 0

    def usage(self, key: str) -> Any:
        usage = self.body.get("usage")
        return usage.get(key) if isinstance(usage, dict) else None

    @property
    def choice(self) -> dict[str, Any]:
        choices = self.body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        return first if isinstance(first, dict) else {}


def read_answer(text: str) -> Answer | None:
    """The answer in a completion's body: JSON, or `data:` lines (None: neither)."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return _assembled(text)
    return Answer(body) if isinstance(body, dict) else None


def _assembled(text: str) -> Answer | None:
    events = []
    for line in text.splitlines():
        data = line[5:].strip() if line.startswith("data:") else ""
        if not data or data == "[DONE]":
            continue
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if isinstance(event, dict):
            events.append(event)
    if not events:
        return None
    texts, finish, usage = [], None, None
    for event in events:
        for choice in event.get("choices") or []:
            if isinstance(choice, dict):
                texts.append(str(choice.get("text") or ""))
                finish = choice.get("finish_reason") or finish
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else usage
    choice = {"index": 0, "text": "".join(texts), "finish_reason": finish}
    return Answer({"choices": [choice], "usage": usage}, len(events))


def tokenize_request(model: str, prompt: str) -> dict[str, Any]:
    """vLLM's POST /tokenize body for the probe's prompt (special tokens added, as a completion
    adds them)."""
    return {"model": model, "prompt": prompt}


def streamed_counts(
    answer: Answer, tokenized: Any, max_tokens: int
) -> tuple[int | None, int | None, str | None]:
    """The prompt and output token counts of a streamed answer, and what is missing: the prompt's
    from the engine's /tokenize answer (`count`), the output's max_tokens when the stream ended
    by length (the probe asks for ignore_eos)."""
    count = tokenized.get("count") if isinstance(tokenized, dict) else None
    prompt = count if isinstance(count, int) and count > 0 else None
    finish = answer.choice.get("finish_reason")
    output = max_tokens if finish == "length" else None
    if prompt is None:
        return None, output, "the engine's /tokenize gave no token count of the prompt"
    if output is None:
        return prompt, None, f"the stream ended with finish_reason {finish!r}, not 'length'"
    return prompt, output, None
