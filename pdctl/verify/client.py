"""HTTP for verify: plain requests, server-sent-event streams timed on arrival, and the curl
command that repeats each request by hand.

httpx is imported when an Http is made, so importing this module costs nothing. Nothing here
raises for a network problem: a reply carries the error instead, because an unreachable router
or engine is a failed check, not a crash.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

CONNECT_TIMEOUT = 5.0
# Loopback (the port-forwards of cluster mode) never goes through a proxy from the environment.
_LOOPBACK = ("all://127.0.0.1", "all://localhost", "all://[::1]")


@dataclass
class Reply:
    """One request's outcome: the status and body, or why there was none."""

    status: int | None
    elapsed_ms: float
    text: str = ""
    error: str | None = None  # the connection failed or timed out (then status is None)

    @property
    def ok(self) -> bool:
        return self.status == 200

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None

    def problem(self) -> str:
        """What went wrong, in one line (for a failed check)."""
        if self.error:
            return self.error
        return f"HTTP {self.status}: {self.text.strip()[:300] or '(empty body)'}"


@dataclass
class Event:
    """One server-sent event: its data as JSON, and when it arrived (seconds after sending)."""

    at: float
    data: dict[str, Any]


@dataclass
class Stream:
    """A streamed response: its events in order, whether `data: [DONE]` came, and the end."""

    status: int | None
    events: list[Event] = field(default_factory=list)
    done: bool = False
    ended_at: float = 0.0
    error: str | None = None
    text: str = ""  # the body of a non-200 reply

    def problem(self) -> str:
        if self.error:
            return self.error
        return f"HTTP {self.status}: {self.text.strip()[:300] or '(empty body)'}"


def _describe(error: Exception, timeout: float) -> str:
    import httpx

    if isinstance(error, httpx.ConnectError):
        return f"cannot connect: {error}"
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {timeout:g} s ({type(error).__name__})"
    return f"{type(error).__name__}: {error}"


class Http:
    """A small synchronous client (one connection pool for the whole verify run)."""

    def __init__(self, timeout: float = 60.0) -> None:
        import httpx

        self.timeout = timeout
        direct = httpx.HTTPTransport()
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            mounts=dict.fromkeys(_LOOPBACK, direct),
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Http:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, url: str, body: dict[str, Any] | None) -> Reply:
        import httpx

        start = time.perf_counter()
        try:
            response = self._client.request(method, url, json=body)
        except httpx.HTTPError as error:  # reported, never raised
            elapsed = (time.perf_counter() - start) * 1000
            return Reply(None, elapsed, error=_describe(error, self.timeout))
        return Reply(response.status_code, (time.perf_counter() - start) * 1000, response.text)

    def get(self, url: str) -> Reply:
        return self._send("GET", url, None)

    def post(self, url: str, body: dict[str, Any]) -> Reply:
        return self._send("POST", url, body)

    def stream(self, url: str, body: dict[str, Any]) -> Stream:
        """POST `body` and read the reply as server-sent events, timing each event when its
        blank line arrives. Comment lines (`:`) and other fields are skipped; `data: [DONE]`
        ends the stream; data that is not JSON is an error."""
        import httpx

        start = time.perf_counter()
        result = Stream(status=None)
        try:
            with self._client.stream("POST", url, json=body) as response:
                result.status = response.status_code
                if response.status_code != 200:
                    result.text = response.read().decode("utf-8", "replace")
                    result.ended_at = time.perf_counter() - start
                    return result
                self._read_events(response, start, result)
        except httpx.HTTPError as error:
            result.error = _describe(error, self.timeout)
        result.ended_at = time.perf_counter() - start
        return result

    @staticmethod
    def _read_events(response: httpx.Response, start: float, result: Stream) -> None:
        data: list[str] = []
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
                continue
            if line or not data:
                continue  # another field (event:, id:), or a blank line with nothing pending
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                result.done = True
                continue
            try:
                parsed = json.loads(payload)
            except ValueError:
                result.error = f"an event is not JSON: {payload[:200]}"
                return
            if isinstance(parsed, dict):
                result.events.append(Event(time.perf_counter() - start, parsed))
        if data:  # a last event without its blank line
            if "\n".join(data).strip() == "[DONE]":
                result.done = True


def curl(
    url: str,
    body: dict[str, Any] | None = None,
    *,
    stream: bool = False,
    tail: str = "",
    shell_data: str | None = None,
) -> str:
    """The curl command that sends the same request: GET, or POST of `body` as JSON (or of
    `shell_data`, a -d argument already written for the shell); `tail` is piped after it."""
    parts = ["curl", "-sS"]
    if stream:
        parts.append("-N")
    post = body is not None or shell_data is not None
    if not post and not tail:
        parts += ["-w", r"\n%{http_code}\n"]
    parts.append(url)
    if post:
        parts += ["-H", "Content-Type: application/json"]
    command = " ".join(shlex.quote(part) for part in parts)
    if shell_data is not None:
        command += f" -d {shell_data}"
    elif body is not None:
        command += f" -d {shlex.quote(json.dumps(body))}"
    return f"{command} | {tail}" if tail else command
