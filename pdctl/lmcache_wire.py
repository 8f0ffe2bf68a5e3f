"""The wire of LMCache's PD as pd-stack's test doubles speak it (the simulator's LMCache engines,
pdctl/simulator/lmcache.py, and the router stand-in playing LMCache's PD proxy, pdctl/standin):
JSON POSTs where LMCache speaks ZMQ and NIXL. A sender pushes a prompt's KV to its receiver
(PUSH_PATH {tokens}: which prompt, no bytes), then reports the transfer to the proxy (NOTIFY_PATH
{req_id, ...}: LMCache's PDMsg, which its proxy's ZMQ PULL socket receives)."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from collections.abc import Callable

PUSH_PATH = "/simulator/lmcache/push"
NOTIFY_PATH = "/simulator/lmcache/notify"
MAX_BODY = 64 * 1024**2


class Notified:
    """The proxy's side: how many notifications each req_id has had (the stand-in router's)."""

    def __init__(self) -> None:
        self._done = threading.Condition()
        self._count: dict[str, int] = {}

    def add(self, req_id: str) -> None:
        with self._done:
            self._count[req_id] = self._count.get(req_id, 0) + 1
            self._done.notify_all()

    def wait(self, req_id: str, count: int, seconds: float) -> bool:
        """Wait until req_id had `count` notifications (then forget it); False at the deadline."""
        with self._done:
            ready = self._done.wait_for(lambda: self._count.get(req_id, 0) >= count, seconds)
            self._count.pop(req_id, None)
        return ready


def json_handler(path: str, take: Callable[[dict[str, object]], None]) -> type:
    """An HTTP handler taking POST `path` {JSON object} (answered 200; 400 when `take` refuses it
    with ValueError or TypeError, or it is not such a body)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            length = int(self.headers.get("Content-Length") or 0)
            ok = self.path == path and 0 < length <= MAX_BODY
            try:
                body = json.loads(self.rfile.read(length)) if ok else None
                ok = isinstance(body, dict)
                if ok:
                    take(body)  # type: ignore[arg-type]
            except (ValueError, TypeError, KeyError):
                ok = False
            self.send_response(200 if ok else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def notify_handler(notified: Notified) -> type:
    """The proxy's notification port: POST NOTIFY_PATH {req_id} (LMCache's PDMsg)."""
    return json_handler(NOTIFY_PATH, lambda body: notified.add(str(body["req_id"])))


def post(host: str, port: int, path: str, body: object, deadline_s: float = 5.0) -> bool:
    """One JSON POST; whether it was answered 200 (also the simulator's NIXL side-channel read)."""
    connection = http.client.HTTPConnection(host, port, timeout=deadline_s)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
