"""verify, bench and the canary against hostile servers: loopback TEST DOUBLES (stdlib http.server
on 127.0.0.1, each reply bounded in time) that drip a stream or a body a byte at a time, send
bodies past the size limits, export +Inf and NaN counters, want an API key, or never answer.

Nothing here times pdctl: each test asserts the message that the deadline or the limit produced,
or (hung engines) how many requests the server held at once."""

from __future__ import annotations

import base64
import http.server
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import InputError
from pdctl.verify import apikey, judge
from pdctl.verify.checks import _engines_health, run
from pdctl.verify.client import MAX_BODY, Http
from pdctl.verify.proof import scrape_all
from pdctl.verify.report import Endpoint, Settings, Status, Targets
from tests.doubles import http_server
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import canary_script

runner = CliRunner()
KEY = "s3cret-key-0123456789"
DRIP_S = 0.25  # between the drips of a dripping server
DRIPS = 80  # a dripping server stops after this many (20 s: far past the deadlines used here)
Route = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def serving(routes: dict[str, Route]) -> Iterator[str]:
    """A loopback server answering each path of `routes` (others: 404); yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _route(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            route = routes.get(self.path)
            try:
                if route is None:
                    reply(self, 404, b"not found")
                else:
                    route(self)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up: what the deadline is for

        do_GET = do_POST = _route

    server = http_server.start(Handler)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def reply(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def answer(status: int, body: Any) -> Route:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda handler: reply(handler, status, data)


def drip(piece: bytes, content_type: str) -> Route:
    """A 200 that sends `piece` every DRIP_S seconds, DRIPS times (no length: read to close)."""

    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Connection", "close")
        handler.end_headers()
        for _ in range(DRIPS):
            handler.wfile.write(piece)
            handler.wfile.flush()
            time.sleep(DRIP_S)
        handler.close_connection = True

    return route


def huge(size: int) -> Route:
    """A 200 of `size` bytes of Prometheus-looking text, sent as fast as the client reads."""
    line = b"vllm:x_total 1\n"

    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        block = line * (1024 * 1024 // len(line))
        sent = 0
        while sent < size:
            piece = block[: size - sent]
            handler.wfile.write(piece)
            sent += len(piece)

    return route


# ---- one deadline per request, from sending to the last byte --------------------------------


def test_a_stream_of_sse_comments_ends_at_the_deadline() -> None:
    with serving({"/v1/completions": drip(b": keep-alive\n\n", "text/event-stream")}) as url:
        with Http(timeout=1.5) as http:
            stream = http.stream(f"{url}/v1/completions", {"prompt": "x"})
    assert stream.status == 200 and not stream.done
    assert stream.problem() == ("no complete answer within 1.5 s (--timeout, sending to last byte)")


def test_a_body_sent_a_byte_at_a_time_ends_at_the_deadline() -> None:
    with serving({"/v1/models": drip(b"{", "application/json")}) as url:
        with Http(timeout=1.5) as http:
            models = http.get(f"{url}/v1/models")
    assert not models.ok
    assert models.problem().startswith("no complete answer within 1.5 s")


# ---- body size limits ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/metrics", "/v1/models"])
def test_a_body_past_the_limit_is_cut_and_reported(path: str) -> None:
    with serving({path: huge(MAX_BODY + 1024 * 1024)}) as url, Http(timeout=60) as http:
        got = http.get(url + path)
    assert got.status == 200 and not got.ok and got.text == ""
    assert got.problem() == (
        f"GET {url}{path}: the body is larger than {MAX_BODY} bytes: not read further"
    )


def test_verify_fails_the_models_check_on_a_huge_models_list() -> None:
    routes = {"/health": answer(200, b""), "/v1/models": huge(MAX_BODY + 1)}
    with serving(routes) as url:
        result = runner.invoke(app, ["verify", "--url", url, "-o", "json", "--timeout", "30"])
    assert result.exit_code == 1, result.output
    models = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "models")
    assert models["status"] == "fail"
    assert f"the body is larger than {MAX_BODY} bytes" in models["summary"]


# ---- hung engines: probed at once ---------------------------------------------------------


class Hung:
    """A route that never answers (until released, 30 s at most): counts the requests it holds
    at once, each for as long as its client keeps the connection open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = 0
        self.most = 0
        self.released = threading.Event()

    def __call__(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.held += 1
            self.most = max(self.most, self.held)
        connection = handler.connection
        for _ in range(600):
            if self.released.wait(0.05):
                break
            readable, _, _ = select.select([connection], [], [], 0)
            if readable and not connection.recv(1, socket.MSG_PEEK):
                break  # the client gave up
        with self.lock:
            self.held -= 1


@pytest.mark.parametrize("path", ["/health", "/metrics"])
def test_hung_engines_are_probed_at_once(path: str) -> None:
    hung = Hung()
    names = [f"/e{i}" for i in range(4)]
    with serving({f"{name}{path}": hung for name in names}) as url:
        engines = tuple(Endpoint(name, "prefill", url + name) for name in names)
        try:
            with Http(timeout=1.5) as http:
                if path == "/health":
                    check = _engines_health(http, engines)
                    problems = [check.summary]
                else:
                    pages, problems = scrape_all(http, engines)
                    assert pages == {}
        finally:
            hung.released.set()
    assert hung.most == 4  # all four held at once: the whole check costs one timeout
    text = "; ".join(problems)
    # Each fails by the timeout; whether the headers came before it ("no complete answer") or
    # not ("no answer") is the machine's pace, not the behaviour under test.
    assert text.count(" answer within 1.5 s") == 4, text


# ---- +Inf and NaN counters ----------------------------------------------------------------

INF_PAGE = """\
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{model_name="m"} +Inf 1700000000000
vllm:generation_tokens_total{model_name="m"} 3
"""
NAN_PAGE = INF_PAGE.replace("+Inf", "NaN")


@pytest.mark.parametrize(("page", "shown"), [(INF_PAGE, "+Inf"), (NAN_PAGE, "NaN")])
def test_metrics_refuses_a_count_that_is_not_one(page: str, shown: str) -> None:
    with pytest.raises(judge.ExpositionError) as raised:
        judge.parse(page)
    assert str(raised.value) == (
        f'line 2: vllm:prompt_tokens_total{{model_name="m"}} is {shown}: '
        "not a count, so no evidence"
    )
    gauge = judge.parse("vllm:kv_cache_usage_perc NaN\n# EOF\n")  # a gauge may be NaN
    assert gauge.has("vllm:kv_cache_usage_perc")


class Turning:
    """An engine whose counters are finite on the first /metrics read and `after` since."""

    def __init__(self, after: str) -> None:
        self.after = after
        self.reads = 0

    def __call__(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        self.reads += 1
        value = "10" if self.reads == 1 else self.after
        page = f'vllm:prompt_tokens_total{{model_name="m"}} {value}\n'
        page += 'vllm:generation_tokens_total{model_name="m"} 10\n'
        reply(handler, 200, page.encode())


@pytest.mark.parametrize("after", ["+Inf", "NaN"])
def test_verify_judges_counters_that_turn_infinite_or_nan(after: str) -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 16}
    routes: dict[str, Route] = {
        "/health": answer(200, b""),
        "/v1/models": answer(200, {"data": [{"id": "m"}]}),
        "/v1/completions": answer(200, {"choices": [{"text": "x"}], "usage": usage}),
        "/p/health": answer(200, b""),
        "/p/metrics": Turning(after),
        "/d/health": answer(200, b""),
        "/d/metrics": Turning("10"),
    }
    with serving(routes) as url:
        engines = (Endpoint("p", "prefill", f"{url}/p"), Endpoint("d", "decode", f"{url}/d"))
        targets = Targets(Endpoint(url, "router", url), engines)
        report = run(targets, Settings(model="m", timeout=10, settle=0, requests=1))
    prefill = next(c for c in report.checks if c.id == "pd-prefill")
    assert prefill.status is Status.failed
    assert prefill.summary == (
        "cannot read the engines' metrics after the probe: prefill p: /metrics: line 1: "
        f'vllm:prompt_tokens_total{{model_name="m"}} is {after}: not a count, so no evidence'
    )


# The canary parses and judges with the same code (tests/test_canary.py feeds both the same pages).


def test_the_canary_has_a_deadline_and_a_body_limit() -> None:
    canary = canary_script()
    routes = {"/drip": drip(b"x", "text/plain"), "/huge": huge(canary.MAX_BODY + 1)}
    with serving(routes) as url:
        with pytest.raises(canary.Problem) as late:
            canary.http(f"{url}/drip", timeout=1.5)
        with pytest.raises(canary.Problem) as large:
            canary.http(f"{url}/huge", timeout=60)
    assert str(late.value) == f"{url}/drip: no complete answer within 1.5 s"
    assert str(large.value) == f"{url}/huge: the body is larger than {canary.MAX_BODY} bytes"


# ---- the API key --------------------------------------------------------------------------


def keyed(route: Route) -> Route:
    """`route` for a request with the key; 401 as vLLM's --api-key answers, without it."""

    def guarded(handler: http.server.BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Authorization") != f"Bearer {KEY}":
            reply(handler, 401, b'{"error": "Unauthorized"}')
        else:
            route(handler)

    return guarded


@pytest.mark.parametrize("how", ["none", "file", "env"])
def test_verify_sends_the_api_key_from_a_file_or_the_environment(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    args = ["verify", "-o", "json", "--timeout", "10", "--show-curl"]
    if how == "file":
        (tmp_path / "key").write_text(KEY + "\n")
        args += ["--api-key-file", str(tmp_path / "key")]
    if how == "env":
        monkeypatch.setenv("VLLM_API_KEY", KEY)
    routes = {
        "/health": answer(200, b""),
        "/v1/models": keyed(answer(200, {"data": [{"id": "m"}]})),
    }
    with serving(routes) as url:
        result = runner.invoke(app, [*args, "--url", url])
    assert KEY not in result.output
    models = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "models")
    if how == "none":
        assert models["status"] == "fail"
        assert "HTTP 401" in models["summary"] and "--api-key-file" in models["summary"]
    else:
        assert models["status"] == "pass", models
        assert models["curl"] == [
            f"curl -sS -H \"Authorization: Bearer $VLLM_API_KEY\" -w '\\n%{{http_code}}\\n' "
            f"{url}/v1/models"
        ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the API key is empty"),
        (b"two\nlines", "the API key holds a space, a line break or a character outside ASCII"),
    ],
)
def test_a_bad_api_key_file_is_refused_without_showing_it(
    content: bytes, message: str, tmp_path: Path
) -> None:
    (tmp_path / "key").write_bytes(content)
    result = runner.invoke(
        app, ["verify", "--url", "http://127.0.0.1:9", "--api-key-file", str(tmp_path / "key")]
    )
    assert result.exit_code == 1
    assert f"--api-key-file {tmp_path / 'key'}: {message}" in result.output
    assert "lines" not in result.output.replace(message, "")


def test_a_fifo_as_api_key_file_is_refused(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="not a regular file"):
        apikey.from_file(tmp_path / "fifo")


def test_the_key_of_a_release_comes_from_its_routers_secret(kube: KubeAPIDouble) -> None:
    """The chart's wiring: the router Deployment's env VLLM_API_KEY from <release>-secrets."""
    ref = {"secretKeyRef": {"name": "pd-secrets", "key": "routerVllmApiKey"}}
    labels = {"app": "router"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "pd-deployment-router", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "router",
                            "image": "x",
                            "env": [{"name": "VLLM_API_KEY", "valueFrom": ref}],
                        }
                    ]
                },
            },
        },
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pd-secrets", "namespace": "default"},
        "data": {"routerVllmApiKey": base64.b64encode(KEY.encode()).decode()},
    }
    assert apikey.from_release("pd", "default") is None  # no router yet
    with kube.state.lock:
        kube.state.create("deployments", "default", deployment, reconcile=False)
    assert apikey.from_release("pd", "default") is None  # its Secret not there (or not readable)
    with kube.state.lock:
        kube.state.create("secrets", "default", secret, reconcile=False)
    assert apikey.from_release("pd", "default") == KEY


# ---- bench --------------------------------------------------------------------------------


def test_bench_exits_1_when_no_request_succeeded() -> None:
    routes = {
        "/v1/models": answer(200, {"data": [{"id": "m"}]}),
        "/v1/completions": answer(500, b"engine exploded"),
    }
    with serving(routes) as url:
        result = runner.invoke(
            app, ["bench", "--url", url, "--requests", "3", "--output-len", "4", "--timeout", "10"]
        )
    assert result.exit_code == 1, result.output
    assert (
        "no request succeeded: 3 sent over 1 step(s), all failed; most common error: "
        "3 x HTTP 500: engine exploded" in result.output
    )


def test_bench_says_the_deployment_is_bad_when_no_model_can_be_read() -> None:
    """A models list past the body limit lists no model: exit 1 (the deployment or the URL is
    bad), not 3 (something missing on this machine)."""
    with serving({"/v1/models": huge(MAX_BODY + 1)}) as url:
        result = runner.invoke(app, ["bench", "--url", url, "--requests", "1", "--timeout", "30"])
    assert result.exit_code == 1, result.output
    assert f"no model listed at {url}/v1/models (nor by an engine)" in result.output
    assert "larger than pdctl reads" in result.output
