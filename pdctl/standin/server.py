"""The stand-in's HTTP: its command line, GET /health (200, naming what it plays), GET /v1/models
(an engine's), the generation routes (pdctl.standin.routes) and, playing LMCache's PD proxy, the
port on which the prefills' senders report each transfer (pdctl/lmcache_wire.py; LMCache's
proxy binds a ZMQ PULL socket there). Every answer's Server header names the stand-in."""

from __future__ import annotations

import argparse
import http.server
import json
import signal
import threading
from dataclasses import dataclass
from typing import Any

from pdctl import lmcache_wire
from pdctl.errors import UsageError
from pdctl.local.routers import plays
from pdctl.standin import routes, upstream

MAX_BODY = 64 * 1024**2
GENERATION = ("/v1/completions", "/v1/chat/completions")


@dataclass(frozen=True)
class Options:
    host: str
    port: int
    routing: str
    engines: routes.Engines
    session_key: str | None
    notify_port: int | None


def _ports(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    init, _, alloc = text.partition("/")
    try:
        return tuple(int(p) for p in init.split(",") if p), tuple(
            int(p) for p in alloc.split(",") if p
        )
    except ValueError:
        raise UsageError(
            f"--decode-ports {text!r}: write INIT[,INIT...]/ALLOC[,ALLOC...]"
        ) from None


def parse(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(prog="python -m pdctl.standin", allow_abbrev=False)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--routing", choices=routes.ROUTINGS, required=True)
    p.add_argument("--prefill", action="append", default=[])
    p.add_argument("--decode", action="append", default=[])
    p.add_argument("--engine", action="append", default=[], help="an engine of role both")
    p.add_argument(
        "--decode-ports", action="append", default=[], help="INIT,../ALLOC,.. per --decode"
    )
    p.add_argument("--session-key", default=None)
    p.add_argument("--notify-port", type=int, default=None)
    try:
        args = p.parse_args(argv)
    except SystemExit as stop:
        raise UsageError("invalid command line (see the message above)") from stop
    ports = [_ports(text) for text in args.decode_ports]
    if ports and len(ports) != len(args.decode):
        raise UsageError("give one --decode-ports per --decode")
    decoders = tuple(
        routes.Decoder(url, *(ports[i] if ports else ((), ()))) for i, url in enumerate(args.decode)
    )
    engines = routes.Engines(tuple(args.prefill), decoders, tuple(args.engine))
    pd = args.routing in ("disaggregated_prefill", "lmcache-proxy")
    if pd and not (engines.prefill and engines.decode) or not engines.all:
        raise UsageError(
            f"--routing {args.routing}: give the engines (--prefill and --decode, or --engine)"
        )
    return Options(args.host, args.port, args.routing, engines, args.session_key, args.notify_port)


def handler(router: routes.Router, identity: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args: object) -> None:
            pass

        def version_string(self) -> str:
            return identity

        def _send(self, outcome: routes.Outcome) -> None:
            self.send_response(outcome.status)
            self.send_header("Content-Type", outcome.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for data in outcome.body:
                if data:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def _json(self, status: int, payload: Any) -> None:
            self._send(routes.Outcome(status, routes.JSON, iter([json.dumps(payload).encode()])))

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self.path == "/health":
                self._json(200, {"status": "healthy", "router": identity})
            elif self.path == "/v1/models":
                try:
                    self._send(
                        routes.passed(upstream.request("GET", router.engines.all[0], self.path))
                    )
                except OSError as error:
                    self._json(502, {"error": {"message": str(error), "code": 502}})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            length = self.headers.get("Content-Length") or ""
            if not length.isdigit() or int(length) > MAX_BODY:
                self.close_connection = True
                self._json(413 if length.isdigit() else 411, {"detail": "body size"})
                return
            try:
                body = json.loads(self.rfile.read(int(length)) or b"{}")
            except ValueError:
                body = None
            if self.path not in GENERATION:
                self._json(404, {"detail": "Not Found"})
            elif not isinstance(body, dict):
                self._json(
                    400, {"error": {"message": "the body is not a JSON object", "code": 400}}
                )
            else:
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(router.route(self.path, body, headers))

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away: nothing to report


def start(options: Options) -> tuple[routes.Router, list[http.server.ThreadingHTTPServer]]:
    """The router and its servers, listening (port 0: a free one; server_address says which)."""
    router = routes.Router(options.routing, options.engines, options.session_key)
    servers: list[http.server.ThreadingHTTPServer] = [
        _Server((options.host, options.port), handler(router, plays(options.routing)))
    ]
    if options.notify_port is not None:
        notify = lmcache_wire.notify_handler(router.notified)
        servers.append(_Server((options.host, options.notify_port), notify))
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return router, servers


def run(options: Options) -> None:
    """Serve until SIGTERM or SIGINT."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    _, servers = start(options)
    print(f"{plays(options.routing)} on {options.host}:{options.port}", flush=True)
    stop.wait()
    for server in servers:
        server.shutdown()
        server.server_close()
