"""TEST DOUBLE of a vLLM engine (OpenAI server + NIXL connector) for the verify tests. NOT vLLM.

It runs no model. It speaks the HTTP that vllm-router 0.1.17 speaks with vLLM engines in PD
mode, and exports vLLM's metric names with vLLM's semantics, so that the real router can route
through it and `pdctl verify` can read it like a real engine:

- `GET /health` (200, empty body), `GET /v1/models`, `GET /metrics` (Prometheus text).
- `POST /v1/completions` and `/v1/chat/completions`, plain or streamed as server-sent events
  (`stream_options.include_usage`: a last chunk with `choices: []` and `usage`;
  `continuous_usage_stats`: usage on every chunk; `data: [DONE]` at the end).
- The PD round trip of vLLM's NixlConnector, as the router drives it:
  - a request whose `kv_transfer_params` has `do_remote_decode: true` is a prefill: the double
    computes the prompt, generates one token, keeps the prompt's KV blocks for a decode to read,
    and answers with `kv_transfer_params` {do_remote_prefill, do_remote_decode, remote_engine_id,
    remote_request_id, remote_block_ids, remote_host, remote_port, tp_size};
  - a request carrying those params (`do_remote_prefill: true`) is a decode: the double reads the
    blocks from that prefill engine (through the shared KvRegistry that stands in for NIXL's
    transfer) instead of computing the prompt, then generates.
  - any other request is computed locally.
- Token counts: one token per whitespace-separated word of the prompt (chat messages are put
  in a small template first); output tokens are " tok0", " tok1", ... up to max_tokens.
- Counters (labels model_name, engine), as vLLM 0.33 moves them:
  `vllm:prompt_tokens_total`, `vllm:prompt_tokens_by_source_total{source=local_compute|
  local_cache_hit|external_kv_transfer}` (they add up to prompt tokens), `vllm:generation_tokens
  _total`, `vllm:request_success_total{finished_reason}`; a prefix cache of 16-token blocks
  (hits are whole blocks, never the last prompt token); NIXL's histograms
  `vllm:nixl_xfer_time_seconds`, `vllm:nixl_bytes_transferred`, `vllm:nixl_num_descriptors` and
  counters `vllm:nixl_num_failed_transfers`, `vllm:nixl_num_failed_notifications`, moved by the
  engine that reads the KV (the decode: NixlConnector pulls); the request phase histograms
  `vllm:request_{queue,prefill,decode}_time_seconds` (queue always 0, prefill the first-token
  delay, decode the rest of the request); the gauges `vllm:num_requests_running`,
  `vllm:num_requests_waiting` (always 0) and `vllm:kv_cache_usage_perc` (0.1 per running request).

Misbehaviour, set on `Behaviour` (also while running):
- `recompute`: a decode ignores `kv_transfer_params` and computes the whole prompt itself;
- `lose_transfers`: the KV read fails (counted in nixl_num_failed_transfers) and the decode
  recomputes (kv_load_failure_policy "recompute");
- `legacy_last_token`: vLLM before 0.21, where a decode recomputes the last prompt token;
- `prompt_sources`: False for vLLM before PR #33290 (no prompt_tokens_by_source);
- `first_token_delay` and `inter_token_delay` (seconds);
and `down()` / `up()` stop and restart the server on the same port (connection refused);
`replace()` after `down()` makes the next `up()` a new process, as a replaced pod is: a new
`engine_id` (vLLM draws a uuid4 per process when none is configured), the KV blocks the old one
held gone, counters and prefix cache from zero.
Every request is recorded in `requests` (path, headers, body) so tests can assert on exactly
what the router sent.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.doubles import http_server

BLOCK_SIZE = 16
# What a PD router sends prefill with NixlConnector: compute the prompt, keep the KV blocks for a
# remote decode (vLLM's NIXL PD proxy, tests/v1/kv_connector/nixl_integration/toy_proxy_server.py;
# vllm-router and llm-d's sidecar send the same).
PREFILL_REQUEST_PARAMS: dict[str, Any] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
BYTES_PER_TOKEN = 2 * 28 * 8 * 128 * 2  # K and V, layers x kv heads x head dim x bf16 (made up)
KV_USAGE_PER_REQUEST = 0.1  # vllm:kv_cache_usage_perc per running request (made up); none wait
_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
_BYTE_BUCKETS = (1e4, 1e5, 1e6, 1e7, 1e8, 1e9)
_DESC_BUCKETS = (1.0, 10.0, 100.0, 1000.0, 10000.0)


@dataclass
class Behaviour:
    first_token_delay: float = 0.0
    inter_token_delay: float = 0.0
    recompute: bool = False
    lose_transfers: bool = False
    legacy_last_token: bool = False
    prompt_sources: bool = True
    # The KV bandwidth the double's transfers report (GB/s): NVLink-class by default; 0.43 is
    # what the first real-engine run measured with no fast UCX transport.
    kv_gbps: float = 300.0


class KvRegistry:
    """Stands in for NIXL: prefill engines leave KV blocks here, decode engines read them once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: dict[tuple[str, str], list[int]] = {}

    def put(self, engine_id: str, request_id: str, blocks: list[int]) -> None:
        with self._lock:
            self._blocks[(engine_id, request_id)] = blocks

    def drop(self, engine_id: str) -> None:
        """Forget every block an engine held (its process is gone)."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == engine_id]:
                del self._blocks[key]

    def take(self, engine_id: str, request_id: str, blocks: list[int]) -> bool:
        with self._lock:
            kept = self._blocks.pop((engine_id, request_id), None)
        return kept is not None and kept == blocks


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


@dataclass
class _Counters:
    prompt_tokens: int = 0
    by_source: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("local_compute", "local_cache_hit", "external_kv_transfer"), 0
        )
    )
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=lambda: {"length": 0, "stop": 0})
    running: int = 0
    failed_transfers: int = 0
    failed_notifications: int = 0
    xfer_time: _Histogram = field(default_factory=lambda: _Histogram(_BUCKETS))
    xfer_bytes: _Histogram = field(default_factory=lambda: _Histogram(_BYTE_BUCKETS))
    descriptors: _Histogram = field(default_factory=lambda: _Histogram(_DESC_BUCKETS))
    phases: dict[str, _Histogram] = field(
        default_factory=lambda: {p: _Histogram(_BUCKETS) for p in ("queue", "prefill", "decode")}
    )


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def chat_prompt(messages: list[dict[str, Any]]) -> str:
    """The double's chat template: each message as `<|role|> content`, then `<|assistant|>`."""
    parts = []
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|> {content}")
    return " ".join([*parts, "<|assistant|>"])


class VllmEngineDouble:
    """One engine double on 127.0.0.1 (a free port, kept across down()/up())."""

    def __init__(
        self,
        name: str,
        registry: KvRegistry,
        model: str = "double-model",
        behaviour: Behaviour | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.registry = registry
        self.behaviour = behaviour or Behaviour()
        self.engine_id = f"{name}-{uuid.uuid4()}"
        self.requests: list[Recorded] = []
        self._counters = _Counters()
        self._cache: set[int] = set()
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self.port = 0

    # ---- lifecycle
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> VllmEngineDouble:
        self._server = http_server.start(_handler(self), self.port)
        self.port = self._server.server_address[1]
        return self

    def down(self) -> None:
        """Stop listening and drop every open connection (the router keeps connections alive:
        a process that died would reset them too)."""
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            connections, self._connections = set(self._connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def replace(self) -> None:
        """The process is gone for good: the next `up()` is a new one (new engine_id, no KV)."""
        self.registry.drop(self.engine_id)
        self.engine_id = f"{self.name}-{uuid.uuid4()}"
        with self._lock:
            self._counters = _Counters()
            self._cache = set()

    def generation_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST"]

    # ---- engine
    def _cached_prefix(self, tokens: list[str]) -> tuple[int, list[int]]:
        """Prompt tokens found in the prefix cache (whole blocks, at most all but the last
        token), and the hashes of the prompt's full blocks."""
        hashes, running = [], 0
        for start in range(0, len(tokens) - len(tokens) % BLOCK_SIZE, BLOCK_SIZE):
            running = hash((running, tuple(tokens[start : start + BLOCK_SIZE])))
            hashes.append(running)
        hit = 0
        for h in hashes:
            if h not in self._cache:
                break
            hit += BLOCK_SIZE
        limit = ((len(tokens) - 1) // BLOCK_SIZE) * BLOCK_SIZE
        return min(hit, limit), hashes

    def admit(self, tokens: list[str], params: dict[str, Any] | None) -> dict[str, Any] | None:
        """Account for the prompt as vLLM does; returns the kv_transfer_params to answer with
        (a prefill's), or None."""
        b = self.behaviour
        n = len(tokens)
        with self._lock:
            hit, hashes = self._cached_prefix(tokens)
            external = 0
            remote = params if params and params.get("do_remote_prefill") else None
            if remote and not b.recompute:
                fields = ("remote_engine_id", "remote_request_id", "remote_host", "remote_port")
                blocks = remote.get("remote_block_ids") or []
                valid = all(remote.get(f) is not None for f in fields)
                if (
                    valid
                    and not b.lose_transfers
                    and self.registry.take(
                        str(remote["remote_engine_id"]), str(remote["remote_request_id"]), blocks
                    )
                ):
                    external = n - hit - (1 if b.legacy_last_token else 0)
                    size = external * BYTES_PER_TOKEN
                    self._counters.xfer_time.observe(size / (b.kv_gbps * 1e9))
                    self._counters.xfer_bytes.observe(size)
                    self._counters.descriptors.observe(float(len(blocks)))
                else:
                    self._counters.failed_transfers += 1
            c = self._counters
            c.prompt_tokens += n
            c.by_source["local_cache_hit"] += hit
            c.by_source["external_kv_transfer"] += external
            c.by_source["local_compute"] += n - hit - external
            self._cache.update(hashes)
            c.running += 1
        if params and params.get("do_remote_decode"):
            request_id = f"cmpl-{uuid.uuid4().hex}"
            blocks = list(range((n + BLOCK_SIZE - 1) // BLOCK_SIZE))
            self.registry.put(self.engine_id, request_id, blocks)
            return {
                "do_remote_prefill": True,
                "do_remote_decode": False,
                "remote_block_ids": blocks,
                "remote_engine_id": self.engine_id,
                "remote_request_id": request_id,
                "remote_host": "127.0.0.1",
                "remote_port": 5600,
                "tp_size": 1,
            }
        return None

    def generated(self, tokens: int) -> None:
        with self._lock:
            self._counters.generation_tokens += tokens

    def finished(self, prefill_s: float = 0.0, decode_s: float = 0.0) -> None:
        """A request ended: its prefill phase (here, the first-token delay) and decode phase
        go to vLLM's request phase histograms; it never queued."""
        with self._lock:
            self._counters.success["length"] += 1
            self._counters.running -= 1
            self._counters.phases["queue"].observe(0.0)
            self._counters.phases["prefill"].observe(prefill_s)
            self._counters.phases["decode"].observe(decode_s)

    def metrics(self) -> str:
        labels = f'engine="0",model_name="{self.model}"'
        with self._lock:
            c = self._counters
            usage = min(c.running * KV_USAGE_PER_REQUEST, 1.0)
            out = [
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge",
                f"vllm:num_requests_running{{{labels}}} {float(c.running)}",
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge",
                f"vllm:num_requests_waiting{{{labels}}} 0.0",
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f"vllm:kv_cache_usage_perc{{{labels}}} {usage}",
                "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
                "# TYPE vllm:prompt_tokens_total counter",
                f"vllm:prompt_tokens_total{{{labels}}} {float(c.prompt_tokens)}",
                "# HELP vllm:prompt_tokens_created Number of prefill tokens processed.",
                "# TYPE vllm:prompt_tokens_created gauge",
                f"vllm:prompt_tokens_created{{{labels}}} 1.7e+09",
            ]
            if self.behaviour.prompt_sources:
                out += [
                    "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.",
                    "# TYPE vllm:prompt_tokens_by_source_total counter",
                ]
                out += [
                    f'vllm:prompt_tokens_by_source_total{{{labels},source="{s}"}} {float(v)}'
                    for s, v in c.by_source.items()
                ]
            out += [
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                "# TYPE vllm:generation_tokens_total counter",
                f"vllm:generation_tokens_total{{{labels}}} {float(c.generation_tokens)}",
                "# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter",
            ]
            out += [
                f'vllm:request_success_total{{{labels},finished_reason="{r}"}} {float(v)}'
                for r, v in c.success.items()
            ]
            phases = [
                (f"vllm:request_{p}_time_seconds", c.phases[p], f"Histogram of {p} time")
                for p in ("queue", "prefill", "decode")
            ]
            for name, hist, help_text in (
                ("vllm:nixl_xfer_time_seconds", c.xfer_time, "Histogram of transfer duration"),
                ("vllm:nixl_bytes_transferred", c.xfer_bytes, "Histogram of bytes transferred"),
                ("vllm:nixl_num_descriptors", c.descriptors, "Histogram of descriptors"),
                *phases,
            ):
                out += [f"# HELP {name} {help_text}.", f"# TYPE {name} histogram"]
                for bound, count in zip(hist.buckets, hist.counts, strict=True):
                    out.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
                out += [
                    f'{name}_bucket{{{labels},le="+Inf"}} {float(hist.count)}',
                    f"{name}_count{{{labels}}} {float(hist.count)}",
                    f"{name}_sum{{{labels}}} {hist.sum}",
                ]
            for name, value in (
                ("vllm:nixl_num_failed_transfers", c.failed_transfers),
                ("vllm:nixl_num_failed_notifications", c.failed_notifications),
            ):
                out += [
                    f"# HELP {name} Number of failures.",
                    f"# TYPE {name} counter",
                    f"{name}_total{{{labels}}} {float(value)}",
                ]
        return "\n".join(out) + "\n"


def _handler(engine: VllmEngineDouble) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as uvicorn: each SSE event leaves at once

        def log_message(self, *args: object) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            with engine._lock:
                engine._connections.add(self.connection)

        def finish(self) -> None:
            with engine._lock:
                engine._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def _record(self, body: Any) -> None:
            engine.requests.append(
                Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
            )

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
                self._send(200, b"")
            elif self.path == "/v1/models":
                card = {
                    "id": engine.model,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm",
                    "root": engine.model,
                    "parent": None,
                    "max_model_len": 8192,
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
            chat = self.path == "/v1/chat/completions"
            if chat:
                prompt = chat_prompt(body.get("messages") or [])
            else:
                prompt = body.get("prompt") or ""
                prompt = prompt[0] if isinstance(prompt, list) and prompt else prompt
            tokens = str(prompt).split()
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
            params = engine.admit(tokens, body.get("kv_transfer_params"))
            scheduled = time.perf_counter()
            time.sleep(engine.behaviour.first_token_delay)
            first = time.perf_counter()
            if body.get("stream"):
                self._stream(body, chat, len(tokens), int(max_tokens))
            else:
                self._whole(chat, len(tokens), int(max_tokens), params)
            engine.finished(first - scheduled, time.perf_counter() - first)

        def _whole(self, chat: bool, prompt: int, n: int, params: Any) -> None:
            for i in range(n):
                if i:
                    time.sleep(engine.behaviour.inter_token_delay)
                engine.generated(1)
            text = "".join(f" tok{i}" for i in range(n))
            usage = _usage(prompt, n)
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
                    "usage": usage,
                    "kv_transfer_params": params,
                },
            )

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(self, body: dict[str, Any], chat: bool, prompt: int, n: int) -> None:
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

            for i in range(n):
                if i:
                    time.sleep(engine.behaviour.inter_token_delay)
                engine.generated(1)
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


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _error(message: str, code: int, kind: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


@dataclass
class PdPair:
    """A prefill and a decode double sharing one KV registry."""

    prefill: VllmEngineDouble
    decode: VllmEngineDouble

    @property
    def engines(self) -> Iterator[VllmEngineDouble]:
        yield self.prefill
        yield self.decode
