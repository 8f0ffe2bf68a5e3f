"""The KV handoff between simulated engines, across processes, as vLLM's NixlConnector does it.

A prefill engine keeps a finished prompt's KV blocks (`KvStore`) and names where to read them in
its answer's `kv_transfer_params` (`remote_host`/`remote_port`: its NIXL side channel,
VLLM_NIXL_SIDE_CHANNEL_HOST/PORT). The decode engine pulls them from there (`read`): here one HTTP
POST to the prefill's side channel, which hands the blocks over once. No bytes of KV move; the
decode times the transfer by the link's bandwidth (pdctl.simulator.engine).
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

from pdctl import lmcache_wire

READ_PATH = "/simulator/kv/read"


class KvStore:
    """The KV blocks prefill engines keep for remote decodes, read once, keyed by engine id and
    request id (one store per process; engines in one process may share one)."""

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
        """Hand the blocks over once: True when they were kept under exactly those ids."""
        with self._lock:
            kept = self._blocks.pop((engine_id, request_id), None)
        return kept is not None and kept == blocks


def side_channel_handler(store: KvStore) -> type[http.server.BaseHTTPRequestHandler]:
    """The side channel's HTTP: POST READ_PATH {engine_id, request_id, block_ids} answers
    200 when the blocks were handed over, 404 when the store does not hold them."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                ask = json.loads(self.rfile.read(length) or b"{}")
                found = store.take(
                    str(ask["engine_id"]), str(ask["request_id"]), list(ask["block_ids"])
                )
            except (ValueError, KeyError, TypeError):
                found = False
            body = json.dumps({"read": found}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def read(params: dict[str, Any], deadline_s: float = 5.0) -> bool:
    """Pull a prefill's blocks from its side channel, as a decode does with the
    kv_transfer_params it was given; False when they are gone or the channel does not answer."""
    ask = {
        "engine_id": params["remote_engine_id"],
        "request_id": params["remote_request_id"],
        "block_ids": params.get("remote_block_ids") or [],
    }
    host, port = str(params["remote_host"]), int(params["remote_port"])
    return lmcache_wire.post(host, port, READ_PATH, ask, deadline_s)
