"""A hostile HTTP server for the red-team set: it plays a router or an engine (the routes
`pdctl verify` and `pdctl bench` call) and misbehaves in one chosen way. NOT vLLM.

Standard library only. It listens on 127.0.0.1 only, and every misbehaviour is bounded: an
endless body stops after `MAX_BYTES`, a drip or a hang after `MAX_SECONDS` or when the server is
stopped, whichever comes first, so a pdctl that never gives up still ends within the runner's
deadline plus these bounds.

Modes (`MODES`):
- ok: a small well-behaved engine (health, one model `m`, completions plain and streamed, a
  /metrics page whose counters grow with each request);
- drip-sse: streamed requests get 200 and then an SSE comment every second, never an event;
- drip-body: plain requests get 200, a Content-Length, and one byte of the body per second;
- endless-models: GET /v1/models answers endless bytes; endless-metrics: /metrics the same, as
  valid-looking samples; endless-error: POSTs answer 500 with an endless body;
  endless-sse: streamed requests get `data:` events forever, as fast as they are read;
- inf-counters / nan-counters: /metrics counters are finite until the first POST, then +Inf
  (or NaN);
- hang: every request is read and never answered; close: every connection is closed at once;
- fail: /health and /v1/models answer, every POST answers 500;
- auth: every request without `Authorization: Bearer <key>` gets 401 (key given at start;
  `authorized` counts the requests that carried it);
- control: the model name and the error bodies carry ESC sequences and other control characters.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any

MAX_BYTES = 8 * 1024**3
MAX_SECONDS = 120.0
MODEL = "m"
CONTROL_MODEL = "m\x1b]0;pwned\x07\x1b[2J\x1b[31mred"
MODES = (
    "ok",
    "drip-sse",
    "drip-body",
    "endless-models",
    "endless-metrics",
    "endless-error",
    "endless-sse",
    "inf-counters",
    "nan-counters",
    "hang",
    "close",
    "fail",
    "auth",
    "control",
)
_CHUNK = b"x" * 65536
USAGE = {"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}


class HostileServer:
    """`with HostileServer("drip-sse") as server: ... server.url ...`"""

    def __init__(self, mode: str, key: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
        self.mode = mode
        self.key = key
        self.authorized = 0
        self.requests = 0
        self.posts = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def count(self, authorized: bool) -> int:
        with self._lock:
            self.requests += 1
            self.authorized += authorized
            return self.requests

    def posted(self) -> None:
        with self._lock:
            self.posts += 1


def _handler(server: HostileServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server

    return Handler


class _Handler(http.server.BaseHTTPRequestHandler):
    owner: HostileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    # ---- plumbing

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode())

    def _endless(self, status: int, first: bytes, chunk: bytes) -> None:
        """A body without a length, written until the bound or the client goes away."""
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        sent, start = 0, time.monotonic()
        try:
            self.wfile.write(first)
            while sent < MAX_BYTES and not self._expired(start):
                self.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            pass

    def _expired(self, start: float) -> bool:
        return self.owner.stopping.is_set() or time.monotonic() - start > MAX_SECONDS

    def _drip(self, kind: str, piece: bytes, length: int | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        start = time.monotonic()
        try:
            while not self._expired(start):
                self.wfile.write(piece)
                self.wfile.flush()
                self.owner.stopping.wait(1.0)
        except OSError:
            pass

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 16 * 1024 * 1024)) if length else b""
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    # ---- routes

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._route("GET", {})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self._route("POST", self._body())

    def _route(self, method: str, body: dict[str, Any]) -> None:
        owner, mode = self.owner, self.owner.mode
        wanted = f"Bearer {owner.key}" if owner.key else None
        authorized = wanted is not None and self.headers.get("Authorization") == wanted
        owner.count(authorized)
        if mode == "hang":
            owner.stopping.wait(MAX_SECONDS)
            self.close_connection = True
            return
        if mode == "close":
            self.close_connection = True
            return
        if mode == "auth" and not authorized:
            self._json(401, {"error": "Unauthorized"})
            return
        path = self.path.split("?")[0]
        if method == "GET":
            self._get(path, mode)
        else:
            self._post(path, mode, body)

    def _get(self, path: str, mode: str) -> None:
        if path == "/health":
            self._send(200, b"")
        elif path == "/v1/models":
            if mode == "endless-models":
                self._endless(200, b'{"object": "list", "data": [{"id": "', _CHUNK)
                return
            name = CONTROL_MODEL if mode == "control" else MODEL
            self._json(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
        elif path == "/metrics":
            self._metrics(mode)
        else:
            self._json(404, {"error": "no such route"})

    def _metrics(self, mode: str) -> None:
        if mode == "endless-metrics":
            line = b'vllm:prompt_tokens_total{model_name="m",engine="0"} 1\n'
            self._endless(200, b"# TYPE vllm:prompt_tokens counter\n", line * 1024)
            return
        value = str(float(self.owner.requests))
        if mode in ("inf-counters", "nan-counters") and self.owner.posts:
            value = "+Inf" if mode == "inf-counters" else "NaN"
        names = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
        text = "".join(
            f'# TYPE {name[:-6]} counter\n{name}{{model_name="{MODEL}"}} {value}\n'
            for name in names
        )
        self._send(200, text.encode(), "text/plain; version=0.0.4")

    def _post(self, path: str, mode: str, body: dict[str, Any]) -> None:
        self.owner.posted()
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._json(404, {"error": "no such route"})
        elif mode == "fail":
            self._json(500, {"error": "the engine failed"})
        elif mode == "endless-error":
            self._endless(500, b'{"error": "', _CHUNK)
        elif mode == "control":
            self._json(500, {"error": "bad\x1b[2J\x1b]0;pwned\x07\r\x00request"})
        elif body.get("stream"):
            self._stream(path, mode)
        elif mode == "drip-body":
            self._drip("application/json", b" ", 1_000_000)
        else:
            self._json(200, _completion(path))

    def _stream(self, path: str, mode: str) -> None:
        if mode == "drip-sse":
            self._drip("text/event-stream", b": keep-alive\n\n", None)
            return
        chunk = _chunk(path, " tok")
        if mode == "endless-sse":
            event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            self._endless(200, b"", event * 256)
            return
        usage = {"id": "x", "model": MODEL, "choices": [], "usage": USAGE}
        events = [_chunk(path, f" tok{i}") for i in range(3)] + [usage]
        data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        self._send(200, data + b"data: [DONE]\n\n", "text/event-stream")


def _completion(path: str) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if path.endswith("chat/completions"):
        choice["message"] = {"role": "assistant", "content": " tok0 tok1"}
    else:
        choice["text"] = " tok0 tok1"
    return {"id": "x", "model": MODEL, "choices": [choice], "usage": USAGE}


def _chunk(path: str, text: str) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": None}
    if path.endswith("chat/completions"):
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return {"id": "x", "model": MODEL, "choices": [choice]}
