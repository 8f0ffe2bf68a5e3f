"""The simulator's LMCache PD (pdctl/simulator/lmcache.py), the PD tutorial's form, engines in this
process: the sender pushes the prompt's KV to its receiver before it answers, the receiver's engine
loads all of the prompt but its last token; the faults as for NIXL (a decode that recomputes, lost
transfers, slow KV); the settings read from the env as LMCache reads them. A current-form sender
dies of a completion that did not come from LMCache's PD proxy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from pdctl.simulator import lmcache
from pdctl.simulator.engine import Behaviour, Shape, SimulatedEngine
from tests.helpers import free_port

TOKENS = [f"w{i}" for i in range(50)]


@pytest.fixture
def pair() -> Iterator[tuple[SimulatedEngine, SimulatedEngine]]:
    port = free_port()
    receive = lmcache.Settings(lmcache.TUTORIAL, lmcache.RECEIVER, "127.0.0.1", port)
    send = lmcache.Settings(lmcache.TUTORIAL, lmcache.SENDER, "127.0.0.1", port)
    decode = SimulatedEngine(
        "d", shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=receive, prefix_caching=False)
    )
    prefill = SimulatedEngine("p", shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=send))
    decode.up()
    yield prefill, decode
    decode.down()


def test_the_decode_loads_what_the_sender_pushed(
    pair: tuple[SimulatedEngine, SimulatedEngine],
) -> None:
    prefill, decode = pair
    assert prefill.admit(TOKENS, None).cached == 0
    assert decode.admit(TOKENS, None).cached == len(TOKENS) - 1  # vLLM computes the last token
    assert decode.admit(TOKENS, None).cached == 0  # handed over once (no prefix cache here)
    page = decode.metrics()
    assert 'source="external_kv_transfer"} 49.0' in page
    assert 'lmcache:num_lookup_hits_total{model_name="double-model",worker_id="0"} 49.0' in page
    assert 'lmcache:num_stored_tokens_total{model_name="double-model",worker_id="0"} 50.0' in (
        prefill.metrics()
    )


@pytest.mark.parametrize("fault", ["recompute", "lose_transfers"])
def test_faults_make_the_decode_compute_the_prompt(
    pair: tuple[SimulatedEngine, SimulatedEngine], fault: str
) -> None:
    prefill, decode = pair
    engine = decode if fault == "recompute" else prefill
    setattr(engine.behaviour, fault, True)
    prefill.admit(TOKENS, None)
    assert decode.admit(TOKENS, None).cached == 0
    assert 'source="local_compute"} 50.0' in decode.metrics()


def test_slow_kv_delays_the_senders_answer(pair: tuple[SimulatedEngine, SimulatedEngine]) -> None:
    prefill, _ = pair
    prefill.behaviour = Behaviour(slow_kv_s=2.5)
    assert prefill.admit(TOKENS, None).transfer_s >= 2.5


def test_settings_come_from_lmcaches_env() -> None:
    tutorial = lmcache.settings(
        {"LMCACHE_ENABLE_NIXL": "True", "LMCACHE_NIXL_ROLE": "receiver",
         "LMCACHE_NIXL_RECEIVER_HOST": "127.0.0.1", "LMCACHE_NIXL_RECEIVER_PORT": "55555"}
    )  # fmt: skip
    assert tutorial is not None and tutorial.listens == [("127.0.0.1", 55555)]
    current = lmcache.settings(
        {"LMCACHE_ENABLE_PD": "True", "LMCACHE_PD_ROLE": "receiver", "LMCACHE_PD_PEER_HOST": "h",
         "LMCACHE_PD_PEER_INIT_PORT": "7300,7301", "LMCACHE_PD_PEER_ALLOC_PORT": "7400,7401"}
    )  # fmt: skip
    assert current is not None and current.listens == [
        ("h", 7300),
        ("h", 7301),
        ("h", 7400),
        ("h", 7401),
    ]
    assert lmcache.settings({"LMCACHE_LOCAL_CPU": "True"}) is None  # LMCache without PD


@pytest.mark.parametrize(("folder", "exported"), [("", False), ("/tmp/prometheus", True)])
def test_lmcaches_metrics_need_prometheus_multiproc_dir(
    monkeypatch: pytest.MonkeyPatch, folder: str, exported: bool
) -> None:
    """As on vLLM: LMCache counts in the engine core, and /metrics shows it only in
    prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR set)."""
    from pdctl.simulator import options, serve

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", folder)
    config = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer"}'
    argv = ["serve", "meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", config]
    engine = serve.build(options.parse(argv)).engine
    assert ("lmcache:num_lookup_hits_total" in engine.metrics()) is exported


def test_a_current_sender_dies_of_a_completion_without_the_proxys_disagg_spec() -> None:
    """LMCache 0.5.6's sender (pd_backend_mode async, its default) reads its receiver from the
    request's disagg_spec unchecked: a completion sent to it without one, as verify's pd-ttft sent
    on one H200, kills the engine core (vLLM then answers 500 and /health 503)."""
    sender = lmcache.Settings(lmcache.CURRENT, lmcache.SENDER, proxy_host="127.0.0.1")
    engine = SimulatedEngine(
        "p", shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=sender)
    ).up()
    try:
        body = json.dumps({"model": engine.model, "prompt": "w1 w2 w3", "max_tokens": 2}).encode()
        request = urllib.request.Request(
            engine.url + "/v1/completions", body, {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as died:
            urllib.request.urlopen(request, timeout=10)
        assert died.value.code == 500 and b"EngineDeadError" in died.value.read()
        with pytest.raises(urllib.error.HTTPError) as health:
            urllib.request.urlopen(engine.url + "/health", timeout=10)
        assert health.value.code == 503
    finally:
        engine.down()
