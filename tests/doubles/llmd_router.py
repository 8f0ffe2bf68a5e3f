"""TEST DOUBLES of the llm-d router's request path, for the verify tests. NOT llm-d.

Neither the llm-d router's endpoint picker (EPP) with Envoy, nor its decode sidecar, nor vLLM runs
here. These doubles reproduce the HTTP each hop sends, as read in llm-d/llm-d-router at tag v0.10.0,
so that `pdctl verify` can be run through a routing path with the sidecar's request flow in front
of the vLLM engine doubles (tests/doubles/vllm_engine.py):

- `RouterDouble` stands in for Envoy + EPP in standalone mode: for each request it picks a decode
  endpoint and, for the completion routes, a prefill endpoint (round robin; the real EPP scores
  prefix-cache hits and queue depth), writes the prefill's host:port into `x-prefiller-host-port`
  (pkg/common/routing/common.go PrefillEndpointHeader) and forwards the request to the decode
  endpoint unchanged otherwise. `skip_prefill` makes it decide against disaggregation (no header),
  as prefix-based-pd-decider does for cached or short prompts.
- `SidecarDouble` stands in for the decode sidecar (pkg/sidecar/proxy/proxy.go createRoutes,
  connector_nixlv2.go handleNIXLV2), started with the arguments the chart renders: it answers
  `GET /health` itself; `POST /v1/completions` and `/v1/chat/completions` with the header go
  prefill then decode: the prefill leg is the request with `kv_transfer_params`
  {do_remote_decode: true, do_remote_prefill: false, remote_engine_id/remote_block_ids/
  remote_host/remote_port: null}, `stream` false, no `stream_options`, and max_tokens,
  max_completion_tokens and min_tokens set to 1, to http://<x-prefiller-host-port>; the decode
  leg is the original request (stream, stream_options and token limits restored) with the
  prefill response's `kv_transfer_params`, to vLLM on --model-server-port; both legs carry one new
  `x-request-id`. Without the header the request goes to vLLM as it came. Every other path is
  proxied to vLLM (`/metrics` too). Only --kv-connector nixlv2 is implemented.

Every request each double receives is recorded in `requests`.
"""

from __future__ import annotations

import http.client
import http.server
import itertools
import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tests.doubles import http_server
from tests.doubles.vllm_engine import PREFILL_REQUEST_PARAMS

PREFILL_HEADER = "x-prefiller-host-port"
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
TOKEN_LIMITS = ("max_tokens", "max_completion_tokens", "min_tokens")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Server:
    """A threading HTTP server on 127.0.0.1 whose handler calls self.handle(request)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> _Server:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.requests.append(Received(self.command, self.path, headers, body))
                owner.handle(self, raw, body, headers)

            do_GET = do_POST = _serve

        self._server = http_server.start(Handler)
        self.port = self._server.server_address[1]
        return self

    def down(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        raw: bytes,
        body: Any,
        headers: dict[str, str],
    ) -> None:
        raise NotImplementedError


def forward(
    handler: http.server.BaseHTTPRequestHandler,
    target: str,
    method: str,
    path: str,
    raw: bytes,
    headers: dict[str, str],
) -> None:
    """Send a request to host:port `target` and stream its answer back to the handler's client
    (chunked, so server-sent events pass as they come)."""
    host, _, port = target.partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        sent = {k: v for k, v in headers.items() if k not in _HOP}
        if raw:
            sent["Content-Length"] = str(len(raw))
        connection.request(method, path, body=raw or None, headers=sent)
        response = connection.getresponse()
        handler.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in _HOP:
                handler.send_header(key, value)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        while chunk := response.read1(65536):
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except OSError as error:
        message = json.dumps({"error": f"upstream {target}: {error}"}).encode()
        handler.send_response(502)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(message)))
        handler.end_headers()
        handler.wfile.write(message)
    finally:
        connection.close()


def post_json(target: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    host, _, port = target.partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        raw = json.dumps(body).encode()
        sent = {k: v for k, v in headers.items() if k not in _HOP}
        sent["Content-Length"] = str(len(raw))
        connection.request("POST", path, body=raw, headers=sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


class SidecarDouble(_Server):
    """The decode sidecar, configured by the arguments the chart renders (--model-server-port,
    --kv-connector; --port is where this double listens, given by the test)."""

    def __init__(self, args: list[str], model_server: str) -> None:
        super().__init__()
        flags = dict(arg.removeprefix("--").split("=", 1) for arg in args if "=" in arg)
        if flags.get("kv-connector", "nixlv2") != "nixlv2":
            raise ValueError(f"the double implements nixlv2 only, not {flags['kv-connector']}")
        if flags.get("secure-proxy", "true") != "false":
            raise ValueError("the chart must render --secure-proxy=false (Envoy speaks plain HTTP)")
        self.flags = flags
        self.model_server = model_server  # 127.0.0.1:<port> standing in for localhost:<vLLM port>

    def handle(self, handler, raw, body, headers):  # type: ignore[no-untyped-def]
        path = handler.path
        if handler.command == "GET" and path == "/health":
            handler.send_response(200)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        prefiller = headers.get(PREFILL_HEADER)
        if handler.command != "POST" or path not in COMPLETION_PATHS or not prefiller:
            forward(handler, self.model_server, handler.command, path, raw, headers)
            return
        request_id = str(uuid.uuid1())
        legs = {k: v for k, v in headers.items() if k != PREFILL_HEADER}
        legs["x-request-id"] = request_id
        prefill = dict(body)
        prefill["kv_transfer_params"] = dict(PREFILL_REQUEST_PARAMS)
        prefill["stream"] = False
        prefill.pop("stream_options", None)
        for limit in TOKEN_LIMITS:
            prefill[limit] = 1
        status, answer = post_json(prefiller, path, prefill, legs)
        if status >= 400:
            message = json.dumps(answer).encode()
            handler.send_response(status)
            handler.send_header("Content-Length", str(len(message)))
            handler.end_headers()
            handler.wfile.write(message)
            return
        decode = dict(body)
        decode["kv_transfer_params"] = (answer or {}).get("kv_transfer_params")
        raw = json.dumps(decode).encode()
        forward(handler, self.model_server, "POST", path, raw, legs)


class RouterDouble(_Server):
    """Envoy + EPP of standalone mode: picks a decode and (for completions) a prefill endpoint.
    prefill: host:port of the prefill pods (vLLM); decode: host:port of the decode pods (their
    sidecars)."""

    def __init__(self, prefill: list[str], decode: list[str]) -> None:
        super().__init__()
        self.prefill = prefill
        self.decode = decode
        self.skip_prefill = False
        self._turn = itertools.count()

    def handle(self, handler, raw, body, headers):  # type: ignore[no-untyped-def]
        turn = next(self._turn)
        target = self.decode[turn % len(self.decode)]
        sent = dict(headers)
        if handler.command == "POST" and not self.skip_prefill and self.prefill:
            sent[PREFILL_HEADER] = self.prefill[turn % len(self.prefill)]
        forward(handler, target, handler.command, handler.path, raw, sent)


def hostport(url: str) -> str:
    """host:port of a URL (what the EPP writes into x-prefiller-host-port)."""
    return urlsplit(url).netloc
