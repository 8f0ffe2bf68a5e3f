"""The stand-in's requests to the engines: JSON POSTs, whole or read as they stream, with the
headers the router it plays sends (production-stack's and LMCache's proxy: `Authorization: Bearer
$OPENAI_API_KEY`; with no key set, no Authorization at all, where both routers would send
`Bearer None`)."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

KEY_ENV = "OPENAI_API_KEY"
TIMEOUT_S = 600.0  # an engine's answer may take minutes (a long prompt, a loaded engine)


def headers(request_id: str | None = None) -> dict[str, str]:
    found = {"Content-Type": "application/json"}
    key = os.environ.get(KEY_ENV)
    if key:
        found["Authorization"] = f"Bearer {key}"
    if request_id:
        found["X-Request-Id"] = request_id
    return found


@dataclass
class Answer:
    """An engine's answer: its status and content type, its body read whole or as it comes."""

    status: int
    content_type: str
    connection: http.client.HTTPConnection
    response: http.client.HTTPResponse

    def chunks(self) -> Iterator[bytes]:
        try:
            while chunk := self.response.read1(65536):
                yield chunk
        finally:
            self.connection.close()

    def whole(self) -> bytes:
        try:
            return self.response.read()
        finally:
            self.connection.close()

    def json(self) -> Any:
        try:
            return json.loads(self.whole())
        except ValueError:
            return None


def _connection(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=TIMEOUT_S)


def request(
    method: str, base: str, path: str, body: Any = None, request_id: str | None = None
) -> Answer:
    """One request to an engine (a JSON body when given); OSError when it cannot be reached."""
    connection = _connection(base)
    try:
        data = None if body is None else json.dumps(body)
        connection.request(method, path, data, headers(request_id))
        response = connection.getresponse()
    except (OSError, http.client.HTTPException) as error:
        connection.close()
        raise OSError(f"{base}{path}: {error}") from None
    kind = response.getheader("Content-Type") or "application/json"
    return Answer(response.status, kind, connection, response)
