"""One streamed completion, timed: time to the first chunk that carries generated text, the
gaps between such chunks, and what the usage chunk reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.verify.client import Stream


def _delta_text(choice: dict[str, Any]) -> str:
    """The generated text of a streamed chunk's choice: a chat delta's, or a completion's text."""
    delta = choice.get("delta") or {}
    parts = [delta.get(key) for key in ("content", "reasoning_content", "reasoning")]
    parts.append(choice.get("text"))
    return "".join(p for p in parts if isinstance(p, str))


@dataclass
class Timed:
    """One streaming request, measured."""

    problem: str | None
    ttft_ms: float | None = None
    e2e_ms: float = 0.0
    gaps_ms: list[float] = field(default_factory=list)  # between chunks that carry text
    chunks: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    tpot_ms: float | None = None


def measure(stream: Stream) -> Timed:
    if stream.status != 200 or stream.error and not stream.events:
        return Timed(stream.problem())
    times: list[float] = []
    usage: dict[str, Any] | None = None
    for event in stream.events:
        choices = event.data.get("choices") or []
        if any(isinstance(c, dict) and _delta_text(c) for c in choices):
            times.append(event.at)
        if isinstance(event.data.get("usage"), dict):
            usage = event.data["usage"]
    timed = Timed(None, e2e_ms=stream.ended_at * 1000, chunks=len(times))
    if times:
        timed.ttft_ms = times[0] * 1000
        timed.gaps_ms = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    if usage:
        timed.completion_tokens = usage.get("completion_tokens")
        timed.prompt_tokens = usage.get("prompt_tokens")
        n = timed.completion_tokens
        if isinstance(n, int) and n > 1 and len(times) > 1:
            timed.tpot_ms = (times[-1] - times[0]) * 1000 / (n - 1)
    problems = []
    if stream.error:
        problems.append(stream.error)
    if not times:
        problems.append("no chunk carried generated text")
    if usage is None:
        problems.append("no usage in the stream (stream_options.include_usage was not honoured)")
    elif not isinstance(timed.completion_tokens, int) or timed.completion_tokens < 1:
        problems.append("usage reports no completion tokens")
    if not stream.done:
        problems.append("the stream did not end with data: [DONE]")
    timed.problem = "; ".join(problems) or None
    return timed
