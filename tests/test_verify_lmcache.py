"""verify on LMCache PD: the connector is known from LMCache's own metrics (their names from the
connector table's lmcacheMetrics, as the simulator exports them), and pd-decode passes when the
router answered with the prefill's first token (LMCache's PD proxy) but not when the decode
generated less than the rest. LMCache's PD proxy answers every completion as a stream: verify and
the canary read it whole and count the probe's tokens by the prefill's /tokenize and the stream's
finish, not by the usage the proxy passes on (the decode's). pd-ttft sends no prompt to an LMCache
sender, and LMCache's counters, updated on a timer, are read again for one period."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pdctl import connectors, defaults
from pdctl.simulator import lmcache
from pdctl.simulator.engine import Shape, SimulatedEngine
from pdctl.verify import judge, probe
from pdctl.verify.checks import _pd_ttft
from pdctl.verify.judge import Evidence, Moves
from pdctl.verify.proof import resolve_connector
from pdctl.verify.report import PROOF, Check, Endpoint, Settings, Status, Targets
from tests.helpers import canary_script

EVIDENCE = Evidence(
    "vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer", "decode"
)
RECEIVER = lmcache.Settings(lmcache.TUTORIAL, lmcache.RECEIVER)


def _lmcache_page() -> judge.Scrape:
    engine = SimulatedEngine("d", shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=RECEIVER))
    return judge.parse(engine.metrics())


def test_the_lmcache_connector_is_detected_from_lmcaches_metrics() -> None:
    """Not "connector not known": the table names LMCache's counter, the engine exports it; and
    no NIXL metrics come from an LMCache engine (two candidates would leave it unknown)."""
    scrape = _lmcache_page()
    found = resolve_connector(None, [scrape])
    assert found.name == "LMCacheConnectorV1" and found.source == "detected"
    assert found.transfer == tuple(
        connectors.load().connectors["LMCacheConnectorV1"].metrics["transfer"]
    )
    names = [entry["name"] for entry in connectors.load().lmcache_metrics]
    assert all(scrape.family(name) is not None for name in names)
    assert scrape.family("vllm:nixl_xfer_time_seconds") is None


def test_the_tutorial_form_reads_the_same_metrics() -> None:
    table = connectors.load()
    assert table.tutorial_lmcache.metrics == table.connectors["LMCacheConnectorV1"].metrics


def _moves(prefill_generated: float, decode_generated: float) -> list[Moves]:
    sources = {"external_kv_transfer": 99.0, "local_compute": 1.0, "local_cache_hit": 0.0}
    hit = {"lmcache:num_lookup_hits": {"count": 99.0}}
    return [
        Moves("p", "prefill", 100.0, prefill_generated, None, {}, {}),
        Moves("d", "decode", 101.0, decode_generated, sources, hit, {}),
    ]


def _decode_verdict(prefill_generated: float, decode_generated: float) -> judge.Verdict:
    connector = resolve_connector("LMCacheConnectorV1", [])
    verdicts = judge.proof(
        _moves(prefill_generated, decode_generated), 100, 16, EVIDENCE, connector
    )
    return {v.id: v for v in verdicts}["pd-decode"]


def test_pd_decode_passes_when_the_prefill_generated_the_first_token() -> None:
    verdict = _decode_verdict(1, 15)
    assert verdict.status == judge.PASS and verdict.facts["first_token_by"] == "prefill"
    assert "prefill the first" in verdict.summary


def test_pd_decode_fails_when_the_decode_generated_less_than_the_rest() -> None:
    assert _decode_verdict(1, 14).status == judge.FAIL
    assert _decode_verdict(0, 15).status == judge.FAIL  # no first token from the prefill
    assert _decode_verdict(1, 16).status == judge.PASS  # production-stack: all by the decode


# ---- answers of LMCache's PD proxy: a stream, whatever was asked ---------------------------------


def _proxy_stream(texts: list[str], usage: dict[str, int] | None = None) -> str:
    """What LMCache 0.5.6's disagg_proxy_server.py handle_completions sends: its own head chunk
    (the prefill's token, usage null), then the decode's stream passed on, then [DONE]."""
    head = {
        "id": "cmpl-p",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "text": texts[0], "logprobs": None, "finish_reason": None},
        ],
        "usage": None,
    }
    events = [head]
    for i, text in enumerate(texts[1:], 2):
        finish = "length" if i == len(texts) else None
        events.append(
            {"id": "cmpl-d", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
        )
    if usage is not None:
        events.append({"id": "cmpl-d", "choices": [], "usage": usage})
    lines = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events]
    return "".join(lines) + "data: [DONE]\n\n"


def test_a_streamed_answer_is_read_whole() -> None:
    answer = probe.read_answer(_proxy_stream([" a", " b", " c"]))
    assert answer is not None and answer.streamed and answer.events == 3
    assert answer.choice["text"] == " a b c" and answer.choice["finish_reason"] == "length"
    assert answer.usage("completion_tokens") is None  # no stream_options asked: no usage
    plain = probe.read_answer(
        json.dumps({"choices": [{"text": "x"}], "usage": {"prompt_tokens": 3}})
    )
    assert plain is not None and not plain.streamed and plain.usage("prompt_tokens") == 3
    assert probe.read_answer("Internal Server Error") is None
    assert probe.read_answer("data: {not json}\n\n") is None


def test_a_streamed_answers_tokens_come_from_tokenize_and_its_finish() -> None:
    """Not from the stream's usage: LMCache's proxy passes on the decode's, which counts the
    prefill's token as prompt (601 of a 600-token prompt) and one output token fewer (15 of 16)."""
    streamed = probe.read_answer(
        _proxy_stream([" t"] * 16, {"prompt_tokens": 601, "completion_tokens": 15})
    )
    assert streamed is not None
    assert probe.streamed_counts(streamed, {"count": 600, "tokens": []}, 16) == (600, 16, None)
    prompt, output, missing = probe.streamed_counts(streamed, {"detail": "no"}, 16)
    assert (prompt, output) == (None, 16) and "no token count" in str(missing)
    stopped = probe.read_answer(_proxy_stream([" t", " u"]).replace('"length"', '"stop"'))
    assert stopped is not None
    assert probe.streamed_counts(stopped, {"count": 9}, 2) == (
        9,
        None,
        "the stream ended with finish_reason 'stop', not 'length'",
    )


def test_the_canary_counts_a_streamed_probe_by_the_prefills_tokenize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chart's canary script, as verify: a streamed answer's tokens by the first prefill
    engine's /tokenize and the finish; a JSON answer's by its usage; neither: a Problem."""
    canary = canary_script()
    asked: list[tuple[str, Any]] = []

    def answer(url: str, body: Any = None, headers: Any = None, **_: Any) -> str:
        asked.append((url, body))
        return json.dumps({"count": 600, "max_model_len": 32000, "tokens": []})

    monkeypatch.setattr(canary, "http", answer)
    targets = [("d-0", "decode", "http://d:1"), ("p-0", "prefill", "http://p:1")]
    body = probe.probe_request("m", 600, 16)
    streamed = canary.read_answer(_proxy_stream([" t"] * 16))
    counts = canary._counts(streamed, targets, body, {}, "http://r/v1/completions")
    assert counts == {"prompt_tokens": 600, "completion_tokens": 16, "streamed_events": 16}
    assert asked == [("http://p:1/tokenize", {"model": "m", "prompt": body["prompt"]})]
    plain = canary.read_answer(json.dumps({"usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
    assert canary._counts(plain, targets, body, {}, "u") == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
    }
    with pytest.raises(canary.Problem, match="neither JSON nor server-sent events"):
        canary._counts(None, targets, body, {}, "u")


def test_pd_ttft_sends_no_prompt_to_an_lmcache_sender() -> None:
    """An LMCache sender takes requests from the PD proxy only (on one H200 verify's 'prefill
    alone' prompt killed its engine: benchmarks/records/lmcache-h200-1gpu-leak.json): pd-ttft is
    skipped, saying why, and sends nothing; NixlConnector's prefill is still timed alone."""
    prefill = Endpoint("p", "prefill", "http://127.0.0.1:9")
    targets = Targets(Endpoint("r", "router", "http://127.0.0.1:9"), (prefill,))
    proven = {i: Check(i, Status.passed, "") for i in PROOF}

    class NoRequests:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"pd-ttft used the network ({name})")

    lmcache_pd = resolve_connector("LMCacheConnectorV1", [])
    settings = Settings(model="m")
    check = _pd_ttft(NoRequests(), "http://r", targets, "m", settings, proven, lmcache_pd)  # type: ignore[arg-type]
    assert check.status is Status.skipped
    assert "prefill engine alone" in check.summary and "disagg_spec" in check.summary
    nixl = resolve_connector("NixlConnector", [])
    with pytest.raises(AssertionError, match="used the network"):
        _pd_ttft(NoRequests(), "http://r", targets, "m", settings, proven, nixl)  # type: ignore[arg-type]


def test_lmcache_counters_are_read_again_for_one_export_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LMCache updates its counters every 10 s (the table's metricsEvery): the default 3 s settle
    read them +0 on one H200 although the KV had moved. verify's settle time for it covers one
    period; here the counters show the probe 10 s after it, on a clock the test moves."""
    now = [0.0]
    monkeypatch.setattr("pdctl.verify.probe.time.monotonic", lambda: now[0])
    monkeypatch.setattr("pdctl.verify.probe.time.sleep", lambda s: now.__setitem__(0, now[0] + s))
    connector = resolve_connector("LMCacheConnectorV1", [])
    assert connector.every == 10
    seconds = probe.settle_seconds(defaults.VERIFY_SETTLE_S, connector.every)
    moved = probe.settle(lambda: 17005 if now[0] >= 10 else 0, lambda found: found > 0, seconds)
    assert moved == 17005
    assert probe.settle_seconds(30.0, connector.every) == 30.0  # a longer --settle stands
    nixl = resolve_connector("NixlConnector", [])
    assert probe.settle_seconds(defaults.VERIFY_SETTLE_S, nixl.every) == defaults.VERIFY_SETTLE_S
