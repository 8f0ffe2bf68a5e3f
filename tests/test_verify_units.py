"""pdctl verify's parts without a router: Prometheus text parsing, statistics, SSE reading and
timing, curl commands, targets, the KV verdict's boundaries, and what `pdctl --help` imports."""

from __future__ import annotations

import http.server
import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping

import pytest
from typer.testing import CliRunner

from pdctl import connectors
from pdctl.cli.app import app
from pdctl.errors import UsageError
from pdctl.verify import judge, probe
from pdctl.verify.client import Http, Stream, StreamEvent, curl
from pdctl.verify.judge import Connector, Evidence, Moves, kv_transfer
from pdctl.verify.probe import probe_prompt
from pdctl.verify.proof import resolve_connector
from pdctl.verify.report import Endpoint, Status, percentile, stats
from pdctl.verify.targets import from_urls
from pdctl.verify.timing import measure

runner = CliRunner()

PAGE = """\
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 120.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 30
vllm:prompt_tokens_total{engine="0",model_name="other"} 7
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:nixl_num_failed_transfers counter
vllm:nixl_num_failed_transfers_total{model_name="m"} 2
# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{le="0.1",model_name="m"} 3
vllm:nixl_xfer_time_seconds_bucket{le="+Inf",model_name="m"} 4
vllm:nixl_xfer_time_seconds_count{model_name="m"} 4
vllm:nixl_xfer_time_seconds_sum{model_name="m"} 0.25
odd{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",} NaN 1700000000000
plain 5e3
inf_gauge +Inf
# EOF
"""


# ---- Prometheus text -----------------------------------------------------------------------


def test_parse_samples_labels_and_types() -> None:
    scrape = judge.parse(PAGE)
    assert scrape.total("vllm:prompt_tokens_total") == 157
    assert scrape.total("vllm:prompt_tokens_total", {"model_name": "m"}) == 150
    assert scrape.total("vllm:prompt_tokens_total", {"engine": "1"}) == 30
    assert scrape.types["vllm:nixl_xfer_time_seconds"] == "histogram"
    odd = next(s for s in scrape.samples if s.name == "odd")
    assert odd.labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb"}
    assert odd.value != odd.value  # NaN; the timestamp is dropped
    assert scrape.total("plain") == 5000 and scrape.total("inf_gauge") == float("inf")
    assert scrape.label_values("vllm:prompt_tokens_total", "model_name") == {"m", "other"}


def test_family_finds_counters_and_histograms_however_written() -> None:
    scrape = judge.parse(PAGE)
    failed = scrape.family("vllm:nixl_num_failed_transfers")  # written as ..._total
    assert failed is not None and failed.count == "vllm:nixl_num_failed_transfers_total"
    assert failed.read(scrape) == {"count": 2}
    xfer = scrape.family("vllm:nixl_xfer_time_seconds")
    assert xfer is not None and xfer.kind == "histogram"
    assert xfer.read(scrape, {"model_name": "m"}) == {"count": 4, "sum": 0.25}
    assert scrape.family("vllm:prompt_tokens_total") is not None
    assert scrape.family("vllm:not_there") is None


@pytest.mark.parametrize(
    "text",
    ["vllm:x{a=b} 1", 'vllm:x{a="b"} one', '{a="b"} 1', "not a sample at all"],
)
def test_parse_refuses_what_is_not_exposition(text: str) -> None:
    with pytest.raises(judge.ExpositionError, match="line 1"):
        judge.parse(text)


def test_delta_between_scrapes() -> None:
    before = judge.parse('c_total{s="a"} 10\nc_total{s="b"} 1\n')
    after = judge.parse('c_total{s="a"} 25\nc_total{s="b"} 1\n')
    assert judge.delta(before, after, "c_total") == 15
    assert judge.delta(before, after, "c_total", {"s": "b"}) == 0
    assert judge.delta(after, before, "c_total") == -15  # a restart shows as negative


def test_the_engine_double_exports_what_verify_reads() -> None:
    """The double's page parses, and carries the table's evidence metric and NIXL's metrics."""
    from tests.doubles.vllm_engine import KvRegistry, VllmEngineDouble

    scrape = judge.parse(VllmEngineDouble("d", KvRegistry()).metrics())
    table = connectors.load()
    evidence = table.transfer_evidence
    assert scrape.label_values(evidence["metric"], judge.SOURCE_LABEL) == {
        evidence["labels"]["source"],
        judge.LOCAL_COMPUTE,
        judge.LOCAL_CACHE_HIT,
    }
    nixl = table.connectors["NixlConnector"].metrics
    for name in (*nixl["transfer"], *nixl["failures"]):
        assert scrape.family(name) is not None, name


# ---- statistics ----------------------------------------------------------------------------


def test_percentiles_interpolate_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0
    summary = stats(values)
    assert summary == {
        "mean": 2.5,
        "p50": 2.5,
        "p90": 3.7,
        "p99": 3.97,
        "min": 1.0,
        "max": 4.0,
        "n": 4,
    }
    assert stats([]) is None


# ---- streams -------------------------------------------------------------------------------


def _chunk(text: str | None, usage: dict[str, int] | None = None) -> dict[str, object]:
    choices = [] if text is None else [{"index": 0, "delta": {"content": text}}]
    return {"choices": choices, "usage": usage}


def test_measure_times_text_chunks_and_uses_server_usage() -> None:
    stream = Stream(status=200, done=True, ended_at=0.5)
    stream.events = [
        StreamEvent(0.010, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        StreamEvent(0.100, _chunk(" a")),
        StreamEvent(0.130, _chunk(" b c")),  # one chunk, two tokens
        StreamEvent(0.190, _chunk(" d")),
        StreamEvent(0.191, _chunk(None, {"prompt_tokens": 9, "completion_tokens": 4})),
    ]
    timed = measure(stream)
    assert timed.problem is None
    assert timed.ttft_ms == pytest.approx(100.0)  # the role-only chunk carries no text
    assert timed.gaps_ms == pytest.approx([30.0, 60.0])
    assert (timed.chunks, timed.completion_tokens, timed.prompt_tokens) == (3, 4, 9)
    assert timed.tpot_ms == pytest.approx(90.0 / 3)  # (last - first) / (tokens - 1)
    assert timed.e2e_ms == pytest.approx(500.0)


def test_measure_names_what_is_missing() -> None:
    stream = Stream(status=200, done=False, ended_at=0.2, events=[StreamEvent(0.1, _chunk("x"))])
    problem = measure(stream).problem or ""
    assert "no usage in the stream" in problem and "did not end with data: [DONE]" in problem
    assert measure(Stream(status=503, text="busy")).problem == "HTTP 503: busy"


class _SseHandler(http.server.BaseHTTPRequestHandler):
    body = (
        b': ping\r\n\r\nevent: message\r\ndata: {"choices": [],\r\ndata:  "usage": '
        b'{"completion_tokens": 1}}\r\n\r\ndata: [DONE]\r\n\r\n'
    )

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def sse_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SseHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_stream_reads_events_comments_multiline_data_and_done(sse_server: str) -> None:
    with Http(timeout=5) as http:
        stream = http.stream(sse_server + "/x", {"a": 1})
        refused = http.get("http://127.0.0.1:9/health")
    assert stream.status == 200 and stream.done and stream.error is None
    assert [e.data for e in stream.events] == [{"choices": [], "usage": {"completion_tokens": 1}}]
    assert refused.status is None and (refused.error or "").startswith("cannot connect")


# ---- curl ----------------------------------------------------------------------------------


def test_curl_commands_round_trip_through_the_shell() -> None:
    body = {"model": "m", "prompt": 'it\'s "quoted" $HOME `x`'}
    words = shlex.split(curl("http://h:1/v1/completions", body, stream=True))
    assert words[:3] == ["curl", "-sS", "-N"]
    assert json.loads(words[words.index("-d") + 1]) == body
    assert shlex.split(curl("http://h:1/health")) == [
        "curl", "-sS", "-w", r"\n%{http_code}\n", "http://h:1/health",
    ]  # fmt: skip


def test_probe_prompts_are_unique_and_long() -> None:
    first, second = probe_prompt(100), probe_prompt(100)
    assert first != second and len(first.split()) == 100
    assert first.split()[2:] == second.split()[2:]  # only the nonce differs


def test_probe_request_is_a_fresh_greedy_prompt_of_exactly_max_tokens() -> None:
    body = probe.probe_request("m", 50, 16)
    assert body["prompt"].split()[0] == probe.PROBE_TAG and len(body["prompt"].split()) == 50
    assert {k: v for k, v in body.items() if k != "prompt"} == {
        "model": "m", "max_tokens": 16, "temperature": 0, "ignore_eos": True,
    }  # fmt: skip


def test_settle_reads_again_until_the_verdicts_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for the engines' counters, caught up on the third read: the settle loop reads
    three times, sleeping SETTLE_POLL between reads, and returns the third."""
    sleeps: list[float] = []
    monkeypatch.setattr("pdctl.verify.probe.time.sleep", sleeps.append)
    reads = iter([0, 0, 5, 5])
    assert probe.settle(lambda: next(reads), lambda counted: counted == 5, 60.0) == 5
    assert sleeps == [probe.SETTLE_POLL] * 2 and next(reads) == 5


def test_settle_returns_the_last_read_once_the_time_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("pdctl.verify.probe.time.sleep", lambda _: None)
    reads = iter(range(100))
    assert probe.settle(lambda: next(reads), lambda _: False, 0.0) == 0  # one read, no wait


# ---- targets and options -------------------------------------------------------------------


def test_from_urls() -> None:
    targets = from_urls("http://r:8000/", ["http://p:8000"], ["http://d1:8000", "http://d2:8000"])
    assert targets.router.url == "http://r:8000"
    assert [(e.role, e.url) for e in targets.engines] == [
        ("prefill", "http://p:8000"),
        ("decode", "http://d1:8000"),
        ("decode", "http://d2:8000"),
    ]
    with pytest.raises(UsageError, match="--decode-url without --prefill-url"):
        from_urls("http://r", [], ["http://d"])
    with pytest.raises(UsageError, match="--url 'r:8000'"):
        from_urls("r:8000", [], [])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prefill-url", "http://p", "--decode-url", "http://d"], "need --url"),
        (["--url", "http://127.0.0.1:9", "--connector", "Nope"], "--connector Nope: not in"),
        (["--url", "ftp://x"], "expected a URL"),
        (["--url", "http://x", "--requests", "0"], "--requests"),
    ],
)
def test_usage_errors_are_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["verify", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_connector_detected_from_the_tables_metrics() -> None:
    table = connectors.load()
    nixl = table.connectors["NixlConnector"]
    page = judge.parse(f"{nixl.metrics['transfer'][0]}_count 0\n")
    assert resolve_connector(None, [page]).name == "NixlConnector"
    assert resolve_connector(None, [page]).source == "detected"
    assert resolve_connector(None, [judge.parse("x 1\n")]).name is None
    named = resolve_connector("MooncakeConnector", [])
    assert (named.name, named.source) == ("MooncakeConnector", "option")
    assert named.transfer == tuple(table.connectors["MooncakeConnector"].metrics["transfer"])


# ---- the KV verdict's arithmetic -------------------------------------------------------------


def _decode(sources: Mapping[str, float], transfers: float = 1.0) -> Moves:
    return Moves(
        "decode-0",
        "decode",
        prompt=sum(sources.values()),
        generation=16,
        sources=dict(sources),
        connector={"vllm:nixl_xfer_time_seconds": {"count": transfers, "sum": 0.01}},
        failures={"vllm:nixl_num_failed_transfers": 0.0},
    )


NIXL = Connector(
    "NixlConnector",
    "detected",
    transfer=("vllm:nixl_xfer_time_seconds",),
    failures=("vllm:nixl_num_failed_transfers",),
)
EVIDENCE = Evidence(
    "vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer", "decode"
)


@pytest.mark.parametrize(
    ("external", "local", "cached", "status"),
    [
        (1000, 0, 0, Status.passed),  # vLLM >= 0.21
        (999, 1, 0, Status.passed),  # vLLM < 0.21: the last token is recomputed
        (984, 0, 16, Status.passed),  # a block from decode's own prefix cache
        (998, 2, 0, Status.failed),  # more than one token recomputed
        (0, 1000, 0, Status.failed),  # recomputed the prompt
    ],
)
def test_kv_verdict_boundaries(external: int, local: int, cached: int, status: Status) -> None:
    sources = {"external_kv_transfer": external, "local_compute": local, "local_cache_hit": cached}
    check = kv_transfer([_decode(sources)], 1000, EVIDENCE, NIXL)
    assert check.status == status.value, check.summary


def test_kv_verdict_needs_the_connector_counters_to_move() -> None:
    sources = {"external_kv_transfer": 1000.0, "local_compute": 0.0, "local_cache_hit": 0.0}
    check = kv_transfer([_decode(sources, transfers=0)], 1000, EVIDENCE, NIXL)
    assert check.status == Status.failed.value
    assert "NixlConnector's transfer counters did not move" in check.summary


# ---- start-up cost -------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["verify", "--help"]])
def test_help_imports_neither_httpx_nor_kubernetes(args: list[str]) -> None:
    code = (
        "import sys\nfrom pdctl.cli.app import app\n"
        f"try:\n    app({args!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'kubernetes'))\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout, out.stdout[-500:]


class _PostOnlyHandler(http.server.BaseHTTPRequestHandler):
    """A router without GET routes, as LMCache 0.3.7's PD proxy (only POST completions)."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_router_without_get_routes_is_skipped_not_failed() -> None:
    from pdctl.verify.checks import _models, _router_health

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PostOnlyHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Http(timeout=5) as client:
            health = _router_health(client, Endpoint("proxy", "router", url))
            models, model = _models(client, url, "m")
    finally:
        server.shutdown()
        server.server_close()
    assert health.status is Status.skipped and "GET /health -> 404" in health.summary
    assert health.evidence["status"] == 404  # reachable: the later checks run
    assert models.status is Status.skipped and model == "m"
