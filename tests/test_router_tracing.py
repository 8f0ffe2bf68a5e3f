"""W3C trace context through the REAL vllm-router 0.1.17 (PyPI) in PD mode, in front of engine
TEST DOUBLES (tests/doubles/vllm_engine.py, not vLLM) that record the headers they receive: what
docs/operations.md "Tracing" says about the router."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from pdctl import manifests, pipeline
from pdctl.helm import Helm
from tests.doubles.router_stack import pd_stack
from tests.helpers import ASSETS, load_values, render_file, write_values

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


def test_engine_tracing_is_opt_in_and_renders_vllms_flags_and_otel_env(
    helm: Helm, tmp_path: Path
) -> None:
    """servingEngineSpec.tracing: --otlp-traces-endpoint (and --collect-detailed-traces) on every
    pool, OTEL_SERVICE_NAME <release>-<pool>, the exporter protocol; nothing when off."""
    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    for deployment in _engines(render_file(helm, write_values(tmp_path, values))):
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert "--otlp-traces-endpoint" not in container["args"]
        assert not [e for e in container.get("env", []) if e["name"].startswith("OTEL_")]
    values["servingEngineSpec"]["tracing"] = {
        "enabled": True,
        "endpoint": "http://otel-collector.observability:4318/v1/traces",
        "protocol": "http/protobuf",
        "detailed": ["model", "worker"],
    }
    engines = _engines(render_file(helm, write_values(tmp_path, values)))
    assert len(engines) == 2
    for deployment in engines:
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        assert (
            args[args.index("--otlp-traces-endpoint") + 1]
            == values["servingEngineSpec"]["tracing"]["endpoint"]
        )
        assert args[args.index("--collect-detailed-traces") + 1] == "model,worker"
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
        assert env["OTEL_SERVICE_NAME"] in {
            f"pd-{p['name']}" for p in values["servingEngineSpec"]["modelSpec"]
        }


def test_tracing_without_an_endpoint_is_refused(helm4: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    values["servingEngineSpec"]["tracing"] = {"enabled": True}
    findings = pipeline.errors(
        pipeline.check(pipeline.load_values([str(write_values(tmp_path, values))]))
    )
    assert any(
        "tracing" in finding.key and "endpoint" in finding.message + finding.key
        for finding in findings
    ), findings


def _engines(objects: list[manifests.Manifest]) -> list[manifests.Manifest]:
    return [
        o
        for o in objects
        if o["kind"] == "Deployment" and "deployment-vllm" in o["metadata"]["name"]
    ]
