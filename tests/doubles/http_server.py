"""The local HTTP server the test doubles listen with: a thread per connection, served from a
daemon thread, on 127.0.0.1 (port 0: a free one)."""

from __future__ import annotations

import http.server
import threading


def start(
    handler: type[http.server.BaseHTTPRequestHandler], port: int = 0
) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
