"""pd-stack's router stand-in (pdctl.standin) against simulated engines in this process: what it
sends each engine is what the router it plays sends (production-stack's disaggregated_prefill,
roundrobin and session; LMCache's PD proxy with the simulator's LMCache PD), and the headers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from pdctl.errors import UsageError
from pdctl.simulator import lmcache
from pdctl.simulator.engine import Shape, SimulatedEngine
from pdctl.standin import routes, server
from tests.helpers import free_port

MODEL = "m"
PROMPT = " ".join(f"w{i}" for i in range(40))


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data, {"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read().decode()


def _standin(routing: str, engines: routes.Engines, **more: Any) -> Iterator[str]:
    options = server.Options("127.0.0.1", 0, routing, engines, more.get("session_key"), None)
    if more.get("notify"):
        options = server.Options("127.0.0.1", 0, routing, engines, None, more["notify"])
    _, servers = server.start(options)
    try:
        yield f"http://127.0.0.1:{servers[0].server_address[1]}"
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


@pytest.fixture
def plain() -> Iterator[list[SimulatedEngine]]:
    engines = [SimulatedEngine(n, model=MODEL, shape=Shape(nixl=False)).up() for n in "abc"]
    yield engines
    for e in engines:
        e.down()


def test_disaggregated_prefill_is_production_stacks(
    plain: list[SimulatedEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prefill gets a copy with max_tokens 1, no max_completion_tokens, min_tokens or
    stream_options, stream false; the decode the original; both the same X-Request-Id and no
    Authorization when OPENAI_API_KEY is not set (never `Bearer None`)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    prefill, decode, _ = plain
    engines = routes.Engines((prefill.url,), (routes.Decoder(decode.url),))
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 7,
        "max_completion_tokens": 7,
        "min_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    for url in _standin("disaggregated_prefill", engines):
        streamed = _post(url + "/v1/chat/completions", body)
    assert streamed.rstrip().endswith("data: [DONE]")
    (first,) = prefill.generation_requests()
    (second,) = decode.generation_requests()
    expected = {k: v for k, v in body.items() if k not in ("max_completion_tokens", "min_tokens")}
    del expected["stream_options"]
    assert first.body == {**expected, "max_tokens": 1, "stream": False}
    assert second.body == body
    assert first.headers["x-request-id"] == second.headers["x-request-id"]
    assert "authorization" not in first.headers and "authorization" not in second.headers


def test_the_api_key_is_sent_as_production_stack_sends_it(
    plain: list[SimulatedEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    prefill, decode, _ = plain
    engines = routes.Engines((prefill.url,), (routes.Decoder(decode.url),))
    for url in _standin("disaggregated_prefill", engines):
        _post(url + "/v1/completions", {"model": MODEL, "prompt": PROMPT, "max_tokens": 3})
    for engine in (prefill, decode):
        assert engine.generation_requests()[0].headers["authorization"] == "Bearer sk-local"


def test_roundrobin_takes_the_engines_in_turn_and_session_sticks(
    plain: list[SimulatedEngine],
) -> None:
    engines = routes.Engines(both=tuple(e.url for e in plain))
    ask = {"model": MODEL, "prompt": PROMPT, "max_tokens": 2}
    for url in _standin("roundrobin", engines):
        for _ in range(6):
            _post(url + "/v1/completions", ask)
    assert [len(e.generation_requests()) for e in plain] == [2, 2, 2]
    for url in _standin("session", engines, session_key="x-user-id"):
        for _ in range(4):
            _post(url + "/v1/completions", ask, {"x-user-id": "alice"})
    assert sorted(len(e.generation_requests()) for e in plain) == [2, 2, 6]


def test_health_names_the_stand_in_and_models_come_from_an_engine(
    plain: list[SimulatedEngine],
) -> None:
    engines = routes.Engines(both=(plain[0].url,))
    for url in _standin("roundrobin", engines):
        with urllib.request.urlopen(url + "/health", timeout=10) as answer:
            assert "pd-stack router stand-in" in answer.headers["Server"]
            assert "stand-in" in json.loads(answer.read())["router"]
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as answer:
            assert json.loads(answer.read())["data"][0]["id"] == MODEL


@pytest.fixture
def lmcache_pair() -> Iterator[tuple[SimulatedEngine, SimulatedEngine, routes.Decoder, int]]:
    init, alloc, notify = free_port(), free_port(), free_port()
    receiver = lmcache.Settings(
        lmcache.CURRENT,
        lmcache.RECEIVER,
        peer_host="127.0.0.1",
        init_ports=(init,),
        alloc_ports=(alloc,),
    )
    sender = lmcache.Settings(
        lmcache.CURRENT, lmcache.SENDER, proxy_host="127.0.0.1", proxy_port=notify
    )
    prefill = SimulatedEngine(
        "p", model=MODEL, shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=sender)
    ).up()
    decode = SimulatedEngine(
        "d", model=MODEL, shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=receiver)
    ).up()
    yield prefill, decode, routes.Decoder(decode.url, (init,), (alloc,)), notify
    prefill.down()
    decode.down()


def _events(streamed: str) -> list[Any]:
    return [
        json.loads(line[6:])
        for line in streamed.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_lmcache_proxy_sends_the_disagg_spec_and_the_first_token(
    lmcache_pair: tuple[SimulatedEngine, SimulatedEngine, routes.Decoder, int],
) -> None:
    """LMCache's proxy protocol: the prefill gets the token ids, max_tokens 1 and the decode's
    receiver in disagg_spec; its sender pushes and reports; the decode gets the ids and the
    prefill's first token with one token less, and loads the prompt from the KV it received. The
    client asked for no stream and gets one (the proxy streams every answer): the prefill's token
    with usage null, then the decode's tokens, and no usage (no stream_options asked)."""
    prefill, decode, decoder, notify = lmcache_pair
    engines = routes.Engines((prefill.url,), (decoder,))
    ask = {"model": MODEL, "prompt": PROMPT, "max_tokens": 5}
    for url in _standin("lmcache-proxy", engines, notify=notify):
        streamed = _post(url + "/v1/completions", ask)
    (tokenize,) = [r for r in [*prefill.requests, *decode.requests] if r.path == "/tokenize"]
    assert tokenize.body == {"prompt": PROMPT}
    (first,) = [r for r in prefill.generation_requests() if r.path == "/v1/completions"]
    (second,) = [r for r in decode.generation_requests() if r.path == "/v1/completions"]
    spec = first.body["kv_transfer_params"]["disagg_spec"]
    assert first.body["max_tokens"] == 1 and first.body["stream"] is False
    assert first.body["kv_transfer_params"]["ret_first_tok"] is True
    assert spec["receiver_init_port"] == list(decoder.init_ports)
    assert spec["receiver_alloc_port"] == list(decoder.alloc_ports)
    assert first.body["prompt"] == second.body["prompt"][:-1] and len(first.body["prompt"]) == 40
    assert second.body["max_tokens"] == 4 and "kv_transfer_params" not in second.body
    assert second.body["stream"] is True and "stream_options" not in second.body
    events = _events(streamed)
    assert streamed.rstrip().endswith("data: [DONE]")
    assert events[0]["usage"] is None and events[0]["choices"][0]["text"]
    assert sum(1 for e in events if e["choices"] and e["choices"][0]["text"]) == 5
    assert not any(e.get("usage") for e in events)
    page = decode.metrics()
    assert 'source="external_kv_transfer"} 40.0' in page  # the 40 prompt tokens, loaded
    assert "lmcache:num_lookup_hits_total" in page


def test_lmcache_proxy_passes_the_decodes_usage_on(
    lmcache_pair: tuple[SimulatedEngine, SimulatedEngine, routes.Decoder, int],
) -> None:
    """With stream_options.include_usage the usage chunk is the decode's own: the prompt and the
    prefill's token (41), its 4 tokens, not the answer's 5 (a chat's passed on unconverted)."""
    prefill, decode, decoder, notify = lmcache_pair
    engines = routes.Engines((prefill.url,), (decoder,))
    ask = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    for url in _standin("lmcache-proxy", engines, notify=notify):
        events = _events(_post(url + "/v1/chat/completions", ask))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events if e["choices"])
    (usage,) = [e["usage"] for e in events if e.get("usage")]
    assert usage["completion_tokens"] == 4
    (second,) = [r for r in decode.generation_requests() if r.path == "/v1/completions"]
    assert usage["prompt_tokens"] == len(second.body["prompt"])


def test_lmcache_proxy_keeps_min_tokens_and_answers_500(
    lmcache_pair: tuple[SimulatedEngine, SimulatedEngine, routes.Decoder, int],
) -> None:
    """bench's old min_tokens = max_tokens: the prefill gets max_tokens 1 with min_tokens 5,
    refuses it (vLLM's 400), and the proxy answers 500."""
    prefill, _, decoder, notify = lmcache_pair
    engines = routes.Engines((prefill.url,), (decoder,))
    ask = {"model": MODEL, "prompt": PROMPT, "max_tokens": 5, "min_tokens": 5}
    for url in _standin("lmcache-proxy", engines, notify=notify):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(url + "/v1/completions", ask)
    assert refused.value.code == 500
    assert "min_tokens must be less than or equal to max_tokens=1" in refused.value.read().decode()
    (first,) = [r for r in prefill.generation_requests() if r.path == "/v1/completions"]
    assert first.body["min_tokens"] == 5 and first.body["max_tokens"] == 1


def test_a_bad_command_line_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="give the engines"):
        server.parse(["--port", "1", "--routing", "disaggregated_prefill", "--prefill", "u"])
