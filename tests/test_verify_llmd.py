"""pdctl verify through the llm-d router's request path, with TEST DOUBLES on every hop: a router
double (Envoy + EPP: picks decode and prefill, sets x-prefiller-host-port), a decode sidecar double
started with the arguments the chart renders for the tutorial's decode pool (prefill call, then
decode call with the transfer parameters, as llm-d-router v0.10.0's nixlv2 flow), and vLLM engine
doubles behind them (tests/doubles/llmd_router.py, tests/doubles/vllm_engine.py; none of them is
llm-d or vLLM). Everything binds to 127.0.0.1 on free ports.

The engine URLs verify reads are the ones cluster mode port-forwards to (engine port 8000): the
prefill pods' vLLM, and on decode pods the sidecar, which passes /metrics through to vLLM.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from pdctl.naming import Release
from pdctl.verify.checks import Settings, run
from pdctl.verify.probe import PROBE_TAG
from pdctl.verify.report import Targets
from pdctl.verify.targets import from_urls
from tests.doubles.llmd_router import RouterDouble, SidecarDouble, hostport
from tests.doubles.vllm_engine import (
    PREFILL_REQUEST_PARAMS,
    Behaviour,
    KvRegistry,
    VllmEngineDouble,
)
from tests.helpers import ASSETS, render_file

VALUES = ASSETS / "values-25-llm-d-router.yaml"
QUICK = Settings(max_tokens=8, prompt_words=200, settle=0.0, timeout=20.0)


@dataclass
class Path_:
    router: RouterDouble
    sidecar: SidecarDouble
    prefill: list[VllmEngineDouble]
    decode: VllmEngineDouble

    def targets(self) -> Targets:
        return from_urls(self.router.url, [p.url for p in self.prefill], [self.sidecar.url])

    def reset(self) -> None:
        self.router.skip_prefill = False
        for engine in (*self.prefill, self.decode):
            engine.behaviour = Behaviour()
            engine.requests.clear()
        self.sidecar.requests.clear()
        self.router.requests.clear()


def rendered_sidecar_args(helm: Helm) -> list[str]:
    objects = render_file(helm, VALUES)
    decode = manifests.find(objects, "Deployment", Release("pd").pool_deployment("qwen-decode"))
    (sidecar,) = decode["spec"]["template"]["spec"]["initContainers"]
    return [str(arg) for arg in sidecar["args"]]


@pytest.fixture(scope="module")
def shared(helm4: Helm) -> Iterator[Path_]:
    registry = KvRegistry()
    prefill = [VllmEngineDouble(f"prefill-{i}", registry).up() for i in range(2)]
    decode = VllmEngineDouble("decode", registry).up()
    sidecar = SidecarDouble(rendered_sidecar_args(helm4), hostport(decode.url))
    sidecar.up()
    router = RouterDouble([hostport(p.url) for p in prefill], [hostport(sidecar.url)])
    router.up()
    try:
        yield Path_(router, sidecar, prefill, decode)
    finally:
        for server in (router, sidecar):
            server.down()
        for engine in (*prefill, decode):
            engine.down()


@pytest.fixture
def path(shared: Path_) -> Iterator[Path_]:
    shared.reset()
    yield shared
    shared.reset()


def statuses(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {check.id: check.status.value for check in report.checks}


def test_the_double_runs_the_sidecar_as_rendered(helm4: Helm) -> None:
    args = rendered_sidecar_args(helm4)
    assert args[:4] == [
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]


def test_healthy_path_proves_pd(path: Path_) -> None:
    report = run(path.targets(), QUICK)
    assert report.passed and report.pd_proven, [(c.id, c.summary) for c in report.checks]
    assert set(statuses(report).values()) == {"pass"}
    kv = next(c for c in report.checks if c.id == "pd-kv-transfer")
    assert kv.evidence["external"] == QUICK.prompt_words
    assert kv.evidence["local_compute"] == 0


def test_the_sidecar_sends_prefill_then_decode_with_the_transfer_parameters(path: Path_) -> None:
    run(path.targets(), QUICK)
    probe = next(
        r
        for r in path.sidecar.requests
        if r.method == "POST" and str(r.body.get("prompt", "")).startswith(f"{PROBE_TAG} ")
    )
    prefill_legs = [
        r
        for p in path.prefill
        for r in p.generation_requests()
        if str(r.body.get("prompt")) == probe.body["prompt"]
    ]
    (prefill,) = prefill_legs
    assert prefill.body["kv_transfer_params"] == PREFILL_REQUEST_PARAMS
    assert prefill.body["stream"] is False and "stream_options" not in prefill.body
    assert prefill.body["max_tokens"] == prefill.body["min_tokens"] == 1
    (decode,) = [
        r for r in path.decode.generation_requests() if r.body.get("prompt") == probe.body["prompt"]
    ]
    assert decode.body["kv_transfer_params"]["do_remote_prefill"] is True
    assert decode.body["max_tokens"] == probe.body["max_tokens"]
    assert prefill.headers["x-request-id"] == decode.headers["x-request-id"]
    assert "x-prefiller-host-port" in probe.headers


def test_decode_recomputing_fails_the_kv_transfer_check(path: Path_) -> None:
    path.decode.behaviour.recompute = True
    report = run(path.targets(), QUICK)
    assert statuses(report)["pd-kv-transfer"] == "fail"
    assert not report.passed


def test_the_picker_skipping_prefill_fails_the_pd_proof(path: Path_) -> None:
    """What verify shows when the EPP decides against disaggregation (prefix-based decider on a
    cached or short prompt, or no prefill pod): decode computes the prompt itself."""
    path.router.skip_prefill = True
    report = run(path.targets(), QUICK)
    found = statuses(report)
    assert (found["pd-prefill"], found["pd-kv-transfer"]) == ("fail", "fail")
    assert found["completion"] == found["chat-stream"] == "pass"
