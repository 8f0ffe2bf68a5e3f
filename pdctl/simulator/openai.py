"""The simulated engine's HTTP: vLLM's OpenAI-compatible server as the router and pdctl see it
(vllm/entrypoints/openai: the completion and chat completion answers, plain or streamed as
server-sent events with `stream_options.include_usage` and `continuous_usage_stats`)."""

from __future__ import annotations

import http.server
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdctl.verify.checks import SIMULATOR_OWNER

if TYPE_CHECKING:
    from pdctl.simulator.engine import SimulatedEngine

OWNED_BY = SIMULATOR_OWNER  # /v1/models: vLLM says "vllm"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


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


def _error(message: str, code: int, kind: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


def _prompt(body: dict[str, Any], chat: bool) -> list[str]:
    if chat:
        return chat_prompt(body.get("messages") or []).split()
    prompt = body.get("prompt") or ""
    prompt = prompt[0] if isinstance(prompt, list) and prompt else prompt
    return str(prompt).split()


def handler(engine: SimulatedEngine) -> type[http.server.BaseHTTPRequestHandler]:
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

        def _record(self, body: Any) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            engine.requests.append(Recorded(self.command, self.path, headers, body))

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload).encode())

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
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

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._record(None)
                self._json(400, _error("invalid JSON body", 400))
                return
            self._record(body)
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"detail": "Not Found"})
                return
            if body.get("model") != engine.model:
                message = f"The model `{body.get('model')}` does not exist."
                self._json(404, _error(message, 404, "NotFoundError"))
                return
            if engine.behaviour.dead:
                self._json(500, _error("EngineCore encountered an issue.", 500, "EngineDeadError"))
                return
            chat = self.path == "/v1/chat/completions"
            tokens = _prompt(body, chat)
            max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
            too_long = engine.too_long(len(tokens), max_tokens)
            if too_long:
                self._json(400, _error(too_long, 400))
                return
            admitted = engine.admit(tokens, body.get("kv_transfer_params"))
            generated = engine.generate(admitted, max_tokens)
            if body.get("stream"):
                self._stream(body, chat, len(tokens), max_tokens, generated)
            else:
                for _ in generated:
                    pass
                self._whole(chat, len(tokens), max_tokens, admitted.kv_transfer_params)

        def _whole(self, chat: bool, prompt: int, n: int, params: Any) -> None:
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

        def _stream(
            self,
            body: dict[str, Any],
            chat: bool,
            prompt: int,
            n: int,
            generated: Iterator[int],
        ) -> None:
            options = body.get("stream_options") or {}
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
            if usage_last:
                event([], _usage(prompt, n))
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
