"""The simulator (pdctl/simulator, not vLLM) bounded as a server: vLLM's 400 error JSON for every
malformed or out-of-range request and no traceback on its stderr; a body over the limit refused
unread (413); a stalled body and an idle connection dropped; a request whose client leaves
aborted (streamed or not, running or queued), also when the client is a `pdctl bench` stopped
with Ctrl-C; and nothing kept per request once it ends in the served simulator."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pdctl.simulator import options, serve
from pdctl.simulator.engine import Behaviour, SimulatedEngine, Timing
from pdctl.simulator.openai import Limits
from tests.helpers import ROOT

MODEL = "m"
DEADLINE = 30.0  # seconds: a bound on every wait, never a measurement
SHORT = Limits(read_s=0.5, idle_s=0.5)


@pytest.fixture(scope="module")
def engine() -> Iterator[SimulatedEngine]:
    served = SimulatedEngine("bounded", model=MODEL, record=False, limits=SHORT).up()
    yield served
    served.down()


def until(condition: Callable[[], bool], what: str) -> None:
    ends = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < ends, f"{what}: not within {DEADLINE:g} s"
        time.sleep(0.05)


def post(url: str, raw: bytes, path: str = "/v1/completions") -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=DEADLINE)
    try:
        connection.request("POST", path, raw, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def idle(engine: SimulatedEngine) -> bool:
    running, waiting, _ = engine._state.core.counts()
    return running == waiting == 0


GOOD = {"model": MODEL, "prompt": "one two three", "max_tokens": 2}
MALFORMED: list[tuple[str, bytes, str | None]] = [
    ("a list", b"[1, 2]", None),
    ("null", b"null", None),
    ("not JSON", b"{not json", None),
    ("deep JSON", b"[" * 100_000, None),
    ("max_tokens abc", json.dumps({**GOOD, "max_tokens": "abc"}).encode(), "max_tokens"),
    ("max_tokens NaN", b'{"model": "m", "prompt": "a", "max_tokens": NaN}', "max_tokens"),
    ("max_tokens 1.5", json.dumps({**GOOD, "max_tokens": 1.5}).encode(), "max_tokens"),
    ("max_tokens true", json.dumps({**GOOD, "max_tokens": True}).encode(), "max_tokens"),
    ("max_tokens -5", json.dumps({**GOOD, "max_tokens": -5}).encode(), "max_tokens"),
    ("max_tokens 0", json.dumps({**GOOD, "max_tokens": 0}).encode(), "max_tokens"),
    ("max_tokens huge", json.dumps({**GOOD, "max_tokens": "9" * 5000}).encode(), "max_tokens"),
    ("prompt missing", json.dumps({"model": MODEL}).encode(), "prompt"),
    ("prompt a number", json.dumps({**GOOD, "prompt": 5}).encode(), "prompt"),
    ("prompt a dict", json.dumps({**GOOD, "prompt": {"a": 1}}).encode(), "prompt"),
    ("model a number", json.dumps({**GOOD, "model": 5}).encode(), "model"),
    ("stream a string", json.dumps({**GOOD, "stream": "yes"}).encode(), "stream"),
    ("stream_options a list", json.dumps({**GOOD, "stream_options": []}).encode(), None),
    ("kv params a list", json.dumps({**GOOD, "kv_transfer_params": []}).encode(), None),
    (
        "kv remote_port a string",
        json.dumps(
            {**GOOD, "kv_transfer_params": {"do_remote_prefill": True, "remote_port": "x"}}
        ).encode(),
        "kv_transfer_params",
    ),
]
CHAT_MALFORMED = [
    {"model": MODEL},
    {"model": MODEL, "messages": "hello"},
    {"model": MODEL, "messages": [1]},
    {"model": MODEL, "messages": [{"role": "user", "content": 5}]},
    {"model": MODEL, "messages": [{"role": "user", "content": [{"text": 7}]}]},
    {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0},
]


def assert_vllm_error(status: int, answer: Any, code: int = 400) -> None:
    """vLLM's ErrorResponse: {"error": {"message", "type", "param", "code"}}."""
    assert status == code, answer
    assert set(answer) == {"error"}, answer
    error = answer["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code
    assert isinstance(error["message"], str) and error["message"]


@pytest.mark.parametrize(
    ("raw", "param"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_completion_gets_vllms_400_and_no_traceback(
    engine: SimulatedEngine, raw: bytes, param: str | None, capfd: pytest.CaptureFixture[str]
) -> None:
    status, answer = post(engine.url, raw)
    assert_vllm_error(status, answer)
    if param is not None:
        assert answer["error"]["param"] == param
    assert post(engine.url, json.dumps(GOOD).encode())[0] == 200  # the engine still serves
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("body", CHAT_MALFORMED)
def test_a_malformed_chat_gets_vllms_400(
    engine: SimulatedEngine, body: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert_vllm_error(*post(engine.url, json.dumps(body).encode(), "/v1/chat/completions"))
    assert "Traceback" not in capfd.readouterr().err


def test_max_tokens_below_one_is_vllms_sampling_error(engine: SimulatedEngine) -> None:
    status, answer = post(engine.url, json.dumps({**GOOD, "max_tokens": -5}).encode())
    assert_vllm_error(status, answer)
    assert answer["error"]["message"] == "max_tokens must be at least 1, got -5."
    assert answer["error"]["type"] == "BadRequestError"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"max_tokens": 1, "min_tokens": 128},
            "min_tokens must be less than or equal to max_tokens=1, got 128.",
        ),
        ({"min_tokens": -1}, "min_tokens must be greater than or equal to 0, got -1."),
    ],
)
def test_min_tokens_out_of_range_is_vllms_sampling_error(
    engine: SimulatedEngine, extra: dict[str, int], message: str
) -> None:
    """What LMCache's PD proxy makes of bench's old min_tokens = max_tokens: prefill gets
    max_tokens 1 with min_tokens kept, and vLLM refuses it."""
    status, answer = post(engine.url, json.dumps({**GOOD, **extra}).encode())
    assert_vllm_error(status, answer)
    assert answer["error"]["message"] == message and answer["error"]["param"] == "min_tokens"
    assert (
        post(engine.url, json.dumps({**GOOD, "min_tokens": 2, "max_tokens": 2}).encode())[0] == 200
    )


def test_another_model_is_vllms_404(engine: SimulatedEngine) -> None:
    assert_vllm_error(*post(engine.url, json.dumps({**GOOD, "model": "x"}).encode()), code=404)


def raw_connection(engine: SimulatedEngine) -> socket.socket:
    connection = socket.create_connection((engine.host, engine.port), timeout=DEADLINE)
    return connection


def test_a_body_over_the_limit_is_refused_unread(engine: SimulatedEngine) -> None:
    with raw_connection(engine) as connection:
        connection.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"
        )
        reply = connection.makefile("rb").read()  # the server answers, then closes
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert_vllm_error(413, json.loads(body), code=413)


@pytest.mark.parametrize(
    "head",
    [
        b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"model',
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",  # answered, then idle on keep-alive
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n",  # headers never end
    ],
    ids=["stalled body", "idle keep-alive", "stalled headers"],
)
def test_a_stalled_or_idle_client_is_dropped(engine: SimulatedEngine, head: bytes) -> None:
    with raw_connection(engine) as connection:
        connection.sendall(head)
        connection.makefile("rb").read()  # ends: the server closed the connection
    until(lambda: not engine._connections, "the server lets the connection go")


def stream_request(engine: SimulatedEngine, max_tokens: int, stream: bool = True) -> socket.socket:
    body = json.dumps({"model": MODEL, "prompt": "a b c", "max_tokens": max_tokens})
    body = body[:-1] + (', "stream": true}' if stream else "}")
    connection = raw_connection(engine)
    connection.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    )
    return connection


def read_until(connection: socket.socket, text: bytes) -> None:
    seen = b""
    while text not in seen:
        chunk = connection.recv(65536)  # within the socket's timeout, DEADLINE
        assert chunk, seen
        seen += chunk


def test_requests_whose_clients_leave_are_aborted(capfd: pytest.CaptureFixture[str]) -> None:
    """Streams read then abandoned, a plain request abandoned, and one still queued behind
    --max-num-seqs 2: all leave the scheduler once their clients close (vLLM aborts them);
    otherwise they would run 8,000 steps of 10 ms."""
    slow = Behaviour(inter_token_delay=0.01)
    engine = SimulatedEngine(
        "abandoned", model=MODEL, behaviour=slow, timing=Timing(max_seqs=2), record=False
    ).up()
    try:
        streams = [stream_request(engine, 8000) for _ in range(2)]
        for connection in streams:
            read_until(connection, b"data: ")  # running: its first event came
        queued = stream_request(engine, 8000)
        plain = stream_request(engine, 8000, stream=False)
        until(lambda: engine._state.core.counts()[1] == 2, "two requests wait for a slot")
        for connection in [*streams, queued, plain]:
            connection.close()
        until(lambda: idle(engine), "every abandoned request is aborted")
        assert engine._state.core.scheduler.free_blocks == engine.timing.blocks
    finally:
        engine.down()
    assert "Traceback" not in capfd.readouterr().err


def test_the_served_simulator_keeps_nothing_per_request() -> None:
    """Refused 4 MB prompts (longer than the model) leave nothing behind."""
    built = serve.build(options.parse(["serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "0"]))
    engine = built.engine.up()
    try:
        prompt = "w " * (2 * 1024**2)  # 4 MB, 2M tokens
        for _ in range(3):
            raw = json.dumps({"model": engine.model, "prompt": prompt, "max_tokens": 4})
            assert_vllm_error(*post(engine.url, raw.encode()))
        assert post(engine.url, json.dumps({**GOOD, "model": engine.model}).encode())[0] == 200
    finally:
        engine.down()
    assert engine.record is False and engine.requests == []
    assert idle(engine)


def test_a_bench_stopped_with_ctrl_c_leaves_no_request_running() -> None:
    engine = SimulatedEngine(
        "bench-target", model=MODEL, behaviour=Behaviour(inter_token_delay=0.01), record=False
    ).up()
    argv = [sys.executable, "-m", "pdctl", "bench", "--url", engine.url, "--concurrency", "4"]
    argv += ["--requests", "8", "--input-len", "5", "--output-len", "5000"]
    bench = subprocess.Popen(
        argv,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        until(lambda: engine._state.core.counts()[0] == 4, "the bench's requests run")
        bench.send_signal(signal.SIGINT)
        _, err = bench.communicate(timeout=DEADLINE)
        assert bench.returncode == 130 and b"Traceback" not in err, err
        until(lambda: idle(engine), "the engine aborts the bench's requests")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        engine.down()
