"""Timed completions against one OpenAI-compatible URL (an engine or the router): time to first
token, the gaps between streamed tokens, throughput. A fixed number of requests at a fixed
concurrency; prompts from model_dir.prompt so that each is a known number of tokens.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.real_engines import model_dir
from pdctl.plan.queueing import output_lengths

WARM_GAPS = 4  # gaps left out of the steady inter-token figure (the batch is still filling)


@dataclass
class Timing:
    ttft: float = 0.0  # seconds to the first streamed token
    gaps: list[float] = field(default_factory=list)  # seconds between later tokens
    error: str | None = None
    sent: float = 0.0  # perf_counter seconds when it was sent, and when its stream ended
    ended: float = 0.0


@dataclass(frozen=True)
class Load:
    prompt_len: int
    output_len: int
    concurrency: int
    requests: int


async def _one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Timing:
    timing = Timing()
    start = last = time.perf_counter()
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                return Timing(error=f"HTTP {response.status_code}: {response.text[:200]}")
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                if not json.loads(line[6:]).get("choices"):
                    continue
                now = time.perf_counter()
                if timing.ttft == 0.0:
                    timing.ttft = now - start
                else:
                    timing.gaps.append(now - last)
                last = now
    except httpx.HTTPError as error:
        return Timing(error=f"{type(error).__name__}: {error}")
    timing.sent, timing.ended = start, time.perf_counter()
    return timing


async def timed(
    url: str, model: str, load: Load, vocab_size: int, seed: int, output_spread: float = 0.0
) -> list[Timing]:
    """Every request of the load, timed, in the order they were sent. Each asks for exactly
    `load.output_len` tokens (ignore_eos, no min_tokens, as pdctl bench asks), or with
    `output_spread` a length drawn within that share of it (as `pdctl bench --output-spread` and
    the simulator's closed loop draw them)."""
    rng = random.Random(seed)
    prompts = [model_dir.prompt(rng, load.prompt_len, vocab_size) for _ in range(load.requests)]
    draw = output_lengths(load.output_len, output_spread, seed)
    outputs = [draw() for _ in prompts]
    gate = asyncio.Semaphore(load.concurrency)
    limits = httpx.Limits(max_connections=load.concurrency + 4)

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def send(text: str, output_len: int) -> Timing:
            body = {
                "model": model,
                "prompt": text,
                "max_tokens": output_len,
                "ignore_eos": True,
                "temperature": 0,
                "stream": True,
            }
            async with gate:
                return await _one(client, url, body)

        return list(await asyncio.gather(*map(send, prompts, outputs)))


async def _run(url: str, model: str, load: Load, vocab_size: int, seed: int) -> dict[str, Any]:
    start = time.perf_counter()
    timings = await timed(url, model, load, vocab_size, seed)
    return summarize(timings, time.perf_counter() - start, load)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    return {
        "p50_ms": at(0.5) * 1e3,
        "p90_ms": at(0.9) * 1e3,
        "mean_ms": statistics.fmean(values) * 1e3,
    }


def summarize(timings: list[Timing], wall: float, load: Load) -> dict[str, Any]:
    served = [t for t in timings if t.error is None]
    steady = [gap for t in served for gap in t.gaps[WARM_GAPS:]]
    return {
        "load": load.__dict__,
        "wall_s": round(wall, 3),
        "errors": [t.error for t in timings if t.error is not None][:5],
        "served": len(served),
        "prompt_tokens_per_s": round(len(served) * load.prompt_len / wall, 1),
        "output_tokens_per_s": round(len(served) * load.output_len / wall, 1),
        "ttft": {k: round(v, 2) for k, v in percentiles([t.ttft for t in served]).items()},
        "itl": {k: round(v, 3) for k, v in percentiles(steady).items()},
    }


def seed(series: str, load: Load) -> int:
    """The prompts' seed: one series sends the same prompts for the same load (to one engine
    alone and to the pair, say); different series and loads never share a prompt, so that prefix
    caching (on the prefill and on the decode engine) cannot hide work."""
    return zlib.crc32(f"{series}:{load}".encode())


def run(url: str, model: str, load: Load, vocab_size: int, series: str) -> dict[str, Any]:
    return asyncio.run(_run(url, model, load, vocab_size, seed(series, load)))
