"""Check pd-ttft: the time to first token of a fresh prompt through the router (prefill, KV
transfer, decode's first step) against the same-length fresh prompt sent to a prefill engine alone
(computed there, no transfer). What PD adds is the KV transfer, the router's hops and one decode
step; on a fast link that is a few milliseconds, at TCP speed it can be most of the TTFT (on one
H200 at 0.45 GB/s: 0.76 s through PD against 0.06 s alone for 2,048 tokens)."""

from __future__ import annotations

from typing import Any

from pdctl.verify import timing
from pdctl.verify.client import Http, curl
from pdctl.verify.probe import probe_request
from pdctl.verify.report import Check, Endpoint, Settings, Status, adds_or_saves, join

# PD may add this much on top of doubling the prefill engine's own TTFT before the check warns
# (a router hop, one decode step and a fast transfer fit well inside it).
ALLOWANCE_MS = 100.0


def _timed(http: Http, url: str, model: str, words: int) -> tuple[timing.Timed, str]:
    body = {
        **probe_request(model, words, 2),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return timing.measure(http.stream(url, body)), curl(url, body, stream=True)


def compare(
    http: Http, router: str, prefill: list[Endpoint], model: str, settings: Settings
) -> Check:
    engine = next((e for e in prefill if e.url), None)
    if engine is None or engine.url is None:
        return Check("pd-ttft", Status.skipped, "no prefill engine URL to time a prompt alone")
    words = settings.prompt_words
    alone, alone_curl = _timed(http, join(engine.url, "/v1/completions"), model, words)
    pd, pd_curl = _timed(http, join(router, "/v1/completions"), model, words)
    commands = [alone_curl, pd_curl]
    runs = {"prefill alone": alone, "through the router": pd}
    failed = [f"{what}: {r.problem}" for what, r in runs.items() if r.problem]
    if failed or alone.ttft_ms is None or pd.ttft_ms is None:
        why = "a timed request failed: " + "; ".join(failed or ["no token"])
        return Check("pd-ttft", Status.failed, why, curl=commands)
    added = pd.ttft_ms - alone.ttft_ms
    evidence: dict[str, Any] = {
        "prompt_words": settings.prompt_words,
        "prefill_engine": engine.name,
        "ttft_prefill_alone_ms": round(alone.ttft_ms, 2),
        "ttft_pd_ms": round(pd.ttft_ms, 2),
        "added_ms": round(added, 2),
    }
    summary = (
        f"TTFT {pd.ttft_ms:.0f} ms through PD, {alone.ttft_ms:.0f} ms on {engine.name} alone "
        f"({settings.prompt_words}-word prompts): PD {adds_or_saves(added)}"
    )
    if added <= alone.ttft_ms + ALLOWANCE_MS:
        return Check("pd-ttft", Status.passed, summary, evidence, curl=commands)
    summary += " (more than doubles it: the KV transfer is slow or queued; see pd-kv-bandwidth)"
    return Check("pd-ttft", Status.warned, summary, evidence, curl=commands)
