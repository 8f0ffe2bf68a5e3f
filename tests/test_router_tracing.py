"""W3C trace context through the REAL vllm-router 0.1.17 (PyPI) in PD mode, in front of engine
TEST DOUBLES (tests/doubles/vllm_engine.py, not vLLM) that record the headers they receive: what
docs/operations.md "Tracing" says about the router."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.doubles.router_stack import pd_stack

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_router_forwards_the_clients_trace_context_unchanged_to_both_legs(
    tmp_path: Path,
) -> None:
    """vllm-router has no tracing of its own (no OTLP flags): it passes `traceparent` and
    `tracestate` through as received, so prefill's and decode's vLLM spans share the client's
    trace id and parent span, and no router span sits between them."""
    with pd_stack(tmp_path) as stack:
        body = {"model": "double-model", "prompt": "one two three", "max_tokens": 2}
        headers = {
            "Content-Type": "application/json",
            "traceparent": TRACEPARENT,
            "tracestate": "vendor=value",
            "x-unrelated": "dropped",
        }
        request = urllib.request.Request(
            f"{stack.router}/v1/completions", data=json.dumps(body).encode(), headers=headers
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        for engine in (stack.prefill, stack.decode):
            (sent,) = engine.generation_requests()
            assert sent.headers["traceparent"] == TRACEPARENT, engine.name
            assert sent.headers["tracestate"] == "vendor=value"
            assert "x-unrelated" not in sent.headers
