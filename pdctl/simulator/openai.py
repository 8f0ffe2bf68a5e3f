"""The simulated engine's HTTP: vLLM's OpenAI-compatible server as the router and pdctl see it
(vllm/entrypoints/openai: the completion and chat completion answers, plain or streamed as
server-sent events with `stream_options.include_usage` and `continuous_usage_stats`).

Bounded as a server facing any client is (`Limits`):
- a body over `max_body` bytes is refused unread (413), as is a body without a Content-Length
  (411) or with one that is not a number (400), and the connection closed;
- the body must arrive within `read_s` seconds, and a reply the client does not read for `read_s`
  seconds is dropped; a kept-alive connection idle for `idle_s` seconds is closed (vLLM's
  VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s by default, which the simulator reads too);
- a request whose client disconnects is aborted, as vLLM aborts it: it leaves the scheduler and
  frees its KV blocks (pdctl.simulator.core), whether it streams or not;
- every malformed or out-of-range request gets vLLM's error JSON, ErrorResponse
  `{"error": {"message", "type", "param", "code"}}` (vllm/entrypoints/openai/protocol.py): 400
  "Bad Request" for what vLLM's request model refuses (a body that is not an object, a field of
  the wrong type), 400 "BadRequestError" for what its sampling parameters refuse (`max_tokens`
  below 1, `min_tokens` below 0 or above `max_tokens`: SamplingParams._verify_args) and for a
  request longer than the model; nothing of it reaches the server's stderr;
- nothing is kept per request once it ends (`SimulatedEngine.record`, off in the served
  simulator, keeps each request for tests that assert on what the router sent).
"""

from __future__ import annotations

import http.server
import json
import math
import os
import select
import socket
import time
import uuid
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pdctl.simulator.core import cancellable
from pdctl.verify.checks import SIMULATOR_OWNER

if TYPE_CHECKING:
    from pdctl.simulator.engine import SimulatedEngine

OWNED_BY = SIMULATOR_OWNER  # /v1/models: vLLM says "vllm"
KEEP_ALIVE_ENV = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"  # vllm/envs.py, default 5 (seconds)
DEFAULT_MAX_TOKENS = 16
VOCABULARY = 128_000  # token ids /tokenize answers are below this


def _keep_alive() -> float:
    try:
        seconds = float(os.environ.get(KEEP_ALIVE_ENV) or 5)
    except ValueError:
        return 5.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 5.0


@dataclass(frozen=True)
class Limits:
    max_body: int = 64 * 1024**2  # bytes: far above a --max-model-len prompt as text or ids
    read_s: float = 30.0  # seconds for a request's body to arrive, and for a reply to be read
    idle_s: float = field(default_factory=_keep_alive)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Refused(Exception):
    """A request answered with vLLM's error JSON (see the module docstring)."""

    def __init__(
        self, status: int, message: str, kind: str = "Bad Request", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def payload(self) -> dict[str, Any]:
        info = {"message": self.message, "type": self.kind, "param": self.param}
        return {"error": {**info, "code": self.status}}


class _Dropped(Exception):
    """The client went away, or stalled past its deadline: close without an answer."""


def token_id(word: str) -> int:
    """The simulator's id of a token (a word): what /tokenize answers, read back by the prompt
    parser as the same token."""
    return zlib.crc32(word.encode()) % VOCABULARY


def chat_prompt(messages: list[dict[str, Any]]) -> str:
    """The simulator's chat template: each message as `<|role|> content`, then `<|assistant|>`."""
    parts = []
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|> {content}")
    return " ".join([*parts, "<|assistant|>"])


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _integer(body: dict[str, Any], name: str) -> int | None:
    """An integer field as vLLM's request model reads it (an integral number, or a string of
    one); Refused otherwise."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    text = value.strip() if isinstance(value, str) else ""
    if text.lstrip("+-").isascii() and text.lstrip("+-").isdigit() and len(text) < 20:
        return int(text)
    raise Refused(400, f"{name}: Input should be a valid integer, got {value!r:.40}", param=name)


def _max_tokens(body: dict[str, Any], chat: bool) -> int:
    """The output tokens asked for (chat: max_completion_tokens first, as vLLM reads them)."""
    names = ["max_completion_tokens", "max_tokens"] if chat else ["max_tokens"]
    for name in names:
        asked = _integer(body, name)
        if asked is not None:
            if asked < 1:  # vllm/sampling_params.py _verify_args
                message = f"max_tokens must be at least 1, got {asked}."
                raise Refused(400, message, "BadRequestError", name)
            return asked
    return DEFAULT_MAX_TOKENS


def _min_tokens(body: dict[str, Any], chat: bool, max_tokens: int) -> None:
    """min_tokens as vLLM's SamplingParams._verify_args checks it: not below 0, not above the
    max_tokens asked for (none asked: vLLM's own limit is the model's length, not checked)."""
    asked = _integer(body, "min_tokens")
    if asked is None:
        return
    if asked < 0:
        message = f"min_tokens must be greater than or equal to 0, got {asked}."
        raise Refused(400, message, "BadRequestError", "min_tokens")
    given = body.get("max_tokens") is not None or chat and body.get("max_completion_tokens")
    if given and asked > max_tokens:
        message = f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {asked}."
        raise Refused(400, message, "BadRequestError", "min_tokens")


def _typed(body: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is not None and not isinstance(value, kind):
        raise Refused(400, f"{name}: Input should be {what}", param=name)
    return value


# kv_transfer_params keys the simulator reads, and their types (NixlConnector's, which reads them
# from the request: vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py).
_KV_PARAMS: dict[str, tuple[type, ...]] = {
    "do_remote_prefill": (bool,),
    "do_remote_decode": (bool,),
    "remote_engine_id": (str,),
    "remote_request_id": (str,),
    "remote_host": (str,),
    "remote_port": (int,),
    "remote_block_ids": (list,),
    "tp_size": (int,),
}


def _kv_params(body: dict[str, Any]) -> dict[str, Any] | None:
    params: dict[str, Any] | None = _typed(body, "kv_transfer_params", dict, "an object")
    for key, kind in _KV_PARAMS.items():
        value = (params or {}).get(key)
        bad = value is not None and (
            not isinstance(value, kind) or isinstance(value, bool) and bool not in kind
        )
        ids = value if key == "remote_block_ids" and isinstance(value, list) else []
        if bad or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise Refused(400, f"kv_transfer_params.{key}: wrong type", param="kv_transfer_params")
    return params


def _prompt(body: dict[str, Any], chat: bool) -> list[str]:
    """The prompt's tokens: one per word (a chat's in the simulator's template), or the ids."""
    if chat:
        messages = _typed(body, "messages", list, "a list of messages")
        if messages is None:
            raise Refused(400, "messages: Field required", param="messages")
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else 0
            parts = content if isinstance(content, list) else []
            texts = [p.get("text", "") if isinstance(p, dict) else 0 for p in parts]
            if not (content is None or isinstance(content, (str, list))) or not all(
                isinstance(t, str) for t in texts
            ):
                raise Refused(400, "messages: Input should be a list of messages", param="messages")
        return chat_prompt(messages).split()
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch: the simulator answers its first prompt
    if isinstance(prompt, str):
        return prompt.split()
    if isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return [str(t) for t in prompt]
    what = "Field required" if prompt is None else "Input should be a string or token ids"
    raise Refused(400, f"prompt: {what}", param="prompt")


@dataclass(frozen=True)
class Request:
    """A generation request, checked."""

    chat: bool
    tokens: list[str]
    max_tokens: int
    stream: bool
    options: dict[str, Any]
    kv_transfer_params: dict[str, Any] | None


def parse(body: Any, chat: bool, model: str) -> Request:
    """The request, checked as vLLM checks it; Refused (400, 404) otherwise."""
    if not isinstance(body, dict):
        raise Refused(400, "Input should be a valid dictionary or object to extract fields from")
    asked = _typed(body, "model", str, "a valid string")
    if asked is not None and asked != model:  # vLLM: no model means the served one
        raise Refused(404, f"The model `{asked}` does not exist.", "NotFoundError", "model")
    options = _typed(body, "stream_options", dict, "an object") or {}
    max_tokens = _max_tokens(body, chat)
    _min_tokens(body, chat, max_tokens)
    return Request(
        chat,
        _prompt(body, chat),
        max_tokens,
        bool(_typed(body, "stream", bool, "a valid boolean")),
        options,
        _kv_params(body),
    )


def tokenized(body: Any, max_model_len: int) -> dict[str, Any]:
    """vLLM's POST /tokenize answer (TokenizeResponse) for {prompt} or {messages}: the ids of the
    prompt's tokens (a chat's in the simulator's template)."""
    if not isinstance(body, dict):
        raise Refused(400, "Input should be a valid dictionary or object to extract fields from")
    tokens = _prompt(body, "messages" in body)
    ids = [int(t) if t.isdigit() else token_id(t) for t in tokens]
    return {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": None}


def _gone(connection: socket.socket) -> bool:
    """Whether the client has closed or reset its side (its socket reads end of file)."""
    poller = select.poll()  # not select.select: a descriptor may be above 1023
    poller.register(connection, select.POLLIN)
    try:
        return bool(poller.poll(0)) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def handler(engine: SimulatedEngine, limits: Limits) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as uvicorn: each SSE event leaves at once

        def log_message(self, *args: object) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            engine.connected(self.connection, True)

        def finish(self) -> None:
            engine.connected(self.connection, False)
            try:
                super().finish()
            except OSError:
                pass

        def handle_one_request(self) -> None:
            self.connection.settimeout(limits.idle_s)  # for the next request line: keep-alive
            super().handle_one_request()  # a timeout in it closes the connection, quietly

        def _record(self, body: Any) -> None:
            if engine.record:
                headers = {k.lower(): v for k, v in self.headers.items()}
                engine.requests.append(Recorded(self.command, self.path, headers, body))

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload).encode())

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            self.connection.settimeout(limits.read_s)
            self._record(None)
            if self.path == "/health":
                self._send(503 if engine.behaviour.dead else 200, b"")
            elif self.path == "/v1/models":
                card = {
                    "id": engine.model,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": OWNED_BY,
                    "root": engine.model,
                    "parent": None,
                    "max_model_len": engine.shape.max_model_len,
                }
                self._json(200, {"object": "list", "data": [card]})
            elif self.path == "/metrics":
                self._send(200, engine.metrics().encode(), "text/plain; version=0.0.4")
            else:
                self._json(404, {"detail": "Not Found"})

        def _body(self) -> bytes:
            """The request's body, within the limits (Refused or _Dropped otherwise; either
            way the connection closes after the answer when the body was not read whole)."""
            self.close_connection = True  # until the whole body is read
            if self.headers.get("Transfer-Encoding"):
                raise Refused(411, "a request body needs a Content-Length", "Length Required")
            text = (self.headers.get("Content-Length") or "0").strip()
            if not (text.isascii() and text.isdigit()):
                raise Refused(400, f"Content-Length {text[:40]!r} is not a number of bytes")
            if len(text) > 15 or int(text) > limits.max_body:
                message = f"the request body is over {limits.max_body} bytes"
                raise Refused(413, message, "Request Entity Too Large")
            length, data = int(text), bytearray()
            deadline = time.monotonic() + limits.read_s
            while len(data) < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Dropped("the body did not arrive in time")
                self.connection.settimeout(left)
                try:
                    chunk = self.rfile.read1(min(length - len(data), 1 << 16))
                except OSError as error:  # a timeout, a reset
                    raise _Dropped(str(error)) from None
                if not chunk:
                    raise _Dropped("the client closed the connection mid-body")
                data += chunk
            self.connection.settimeout(limits.read_s)  # for the reply
            self.close_connection = False
            return bytes(data)

        def do_POST(self) -> None:  # noqa: N802
            try:
                self._post()
            except Refused as refused:
                self._json(refused.status, refused.payload())
            except _Dropped:
                self.close_connection = True

        def _post(self) -> None:
            raw = self._body()
            try:
                body = json.loads(raw or b"{}")
            except (ValueError, RecursionError):
                self._record(None)
                raise Refused(400, "the request body is not valid JSON") from None
            self._record(body)
            if self.path == "/tokenize":
                self._json(200, tokenized(body, engine.shape.max_model_len))
                return
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"detail": "Not Found"})
                return
            request = parse(body, self.path == "/v1/chat/completions", engine.model)
            if engine.behaviour.dead or engine.dies_of(request.kv_transfer_params):
                message = "EngineCore encountered an issue."
                raise Refused(500, message, "EngineDeadError")
            too_long = engine.too_long(len(request.tokens), request.max_tokens)
            if too_long:
                raise Refused(400, too_long, "BadRequestError")
            n = request.max_tokens
            admitted = engine.admit(request.tokens, request.kv_transfer_params)
            generated = cast(Generator[int, None, None], engine.generate(admitted, n))
            try:
                with cancellable(lambda: _gone(self.connection)):  # vLLM aborts it too
                    if request.stream:
                        self._stream(request, generated)
                    elif sum(1 for _ in generated) < n:
                        raise _Dropped("ended early: the client left, or the engine stopped")
                    else:
                        self._whole(request, admitted.kv_transfer_params)
            finally:
                generated.close()

        def _whole(self, request: Request, params: Any) -> None:
            chat, prompt, n = request.chat, len(request.tokens), request.max_tokens
            text = "".join(f" tok{i}" for i in range(n))
            if chat:
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "tool_calls": []},
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                }
                kind, prefix = "chat.completion", "chatcmpl"
            else:
                choice = {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "prompt_logprobs": None,
                }
                kind, prefix = "text_completion", "cmpl"
            self._json(
                200,
                {
                    "id": f"{prefix}-{uuid.uuid4().hex}",
                    "object": kind,
                    "created": int(time.time()),
                    "model": engine.model,
                    "choices": [choice],
                    "usage": _usage(prompt, n),
                    "kv_transfer_params": params,
                },
            )

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(self, request: Request, generated: Iterator[int]) -> None:
            chat, prompt, n = request.chat, len(request.tokens), request.max_tokens
            options = request.options
            usage_last = bool(options.get("include_usage"))
            usage_each = usage_last and bool(options.get("continuous_usage_stats"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            created = int(time.time())
            kind = "chat.completion.chunk" if chat else "text_completion"

            def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> None:
                payload: dict[str, Any] = {
                    "id": ident,
                    "object": kind,
                    "created": created,
                    "model": engine.model,
                    "choices": choices,
                }
                if usage is not None or usage_each:
                    payload["usage"] = usage
                self._chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

            sent = 0
            for i in generated:
                finish = "length" if i == n - 1 else None
                if chat:
                    if i == 0:
                        role = {"role": "assistant", "content": ""}
                        first = {"index": 0, "delta": role, "logprobs": None, "finish_reason": None}
                        event([first], _usage(prompt, 0) if usage_each else None)
                    choice = {"index": 0, "delta": {"content": f" tok{i}"}, "logprobs": None}
                else:
                    choice = {"index": 0, "text": f" tok{i}", "logprobs": None}
                choice["finish_reason"] = finish
                event([choice], _usage(prompt, i + 1) if usage_each else None)
                sent = i + 1
            if sent < n:
                raise _Dropped("ended early: the client left, or the engine stopped")
            if usage_last:
                event([], _usage(prompt, n))
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
