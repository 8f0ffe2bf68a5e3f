"""HTTP for verify and bench: plain requests, server-sent-event streams timed on arrival, and the
curl command that repeats each request by hand.

Every request has one deadline, `timeout` seconds from sending to the last byte (a server that
drips a byte or an SSE comment every second still ends there), and every body has a size limit
(`max_body` bytes: a larger one is cut and reported). Each request runs on a thread of its own
that the caller waits for until the deadline, so a server that stalls mid-read costs the caller
no more than the deadline; `get_all` sends several GETs at once (hung engines cost one timeout,
not one each). With an API key, each request carries `Authorization: Bearer <key>` (vLLM's
--api-key); the key is never part of a message or a curl command.

httpx is imported when an Http is made, so importing this module costs nothing. Nothing here
raises for a network problem: a reply carries the error instead, because an unreachable router
or engine is a failed check, not a crash.
"""

from __future__ import annotations

import functools
import json
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pdctl import defaults

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
CONNECT_TIMEOUT = 5.0
# The largest body read whole (/metrics, /v1/models, a completion) and the largest stream: a
# vLLM /metrics page is well under 1 MiB, a streamed answer of 128k tokens about 30 MiB.
MAX_BODY = 16 * 1024 * 1024
MAX_STREAM = 128 * 1024 * 1024
MAX_EVENT = 1024 * 1024  # one server-sent event's data
# Loopback (the port-forwards of cluster mode) never goes through a proxy from the environment.
_LOOPBACK = ("all://127.0.0.1", "all://localhost", "all://[::1]")
# Where the curl commands take the API key from (the key itself is never printed).
API_KEY_ENV = "VLLM_API_KEY"
CURL_AUTH = f"Authorization: Bearer ${API_KEY_ENV}"


class _TooLarge(Exception):
    """A body or an event past its limit."""


class _Late(Exception):
    """The request's deadline passed while its body was read."""


@dataclass
class Reply:
    """One request's outcome: the status and body, or why there was none."""

    status: int | None
    elapsed_ms: float
    text: str = ""
    error: str | None = None  # the connection failed, timed out, or the body was too large

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except (ValueError, RecursionError):
            return None

    def problem(self) -> str:
        """What went wrong, in one line (for a failed check)."""
        return _problem(self.status, self.text, self.error)


@dataclass
class StreamEvent:
    """One server-sent event: its data as JSON, and when it arrived (seconds after sending)."""

    at: float
    data: dict[str, Any]


@dataclass
class Stream:
    """A streamed response: its events in order, whether `data: [DONE]` came, and the end."""

    status: int | None
    events: list[StreamEvent] = field(default_factory=list)
    done: bool = False
    ended_at: float = 0.0
    error: str | None = None
    text: str = ""  # the body of a non-200 reply

    def problem(self) -> str:
        return _problem(self.status, self.text, self.error)


def _problem(status: int | None, text: str, error: str | None) -> str:
    if error:
        return error
    problem = f"HTTP {status}: {text.strip()[:300] or '(empty body)'}"
    if status == 401:
        problem += f" (an API key is wanted: --api-key-file, or ${API_KEY_ENV})"
    return problem


def _describe(error: Exception, timeout: float) -> str:
    import httpx

    if isinstance(error, httpx.ConnectError):
        return f"cannot connect: {error}"
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {timeout:g} s ({type(error).__name__})"
    return f"{type(error).__name__}: {error}"


def _chunks(response: httpx.Response, deadline: float, limit: int) -> Iterator[bytes]:
    """The body's bytes as they arrive, until the deadline and up to `limit` bytes."""
    size = 0
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise _Late
        size += len(chunk)
        if size > limit:
            raise _TooLarge(f"the body is larger than {limit} bytes: not read further")
        yield chunk


def _lines(chunks: Iterator[bytes], limit: int) -> Iterator[str]:
    """The lines of a byte stream (LF or CRLF), none longer than `limit` bytes."""
    pending = bytearray()
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending += chunk[start:end]
            yield pending.rstrip(b"\r").decode("utf-8", "replace")
            pending.clear()
            start = end + 1
        pending += chunk[start:]
        if len(pending) > limit:
            raise _TooLarge(f"a line of the stream is longer than {limit} bytes")
    if pending:
        yield pending.decode("utf-8", "replace")


def parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run each call on a thread of its own, all at once; their results in order (an exception
    in a call is raised here, in the caller's thread)."""
    results: list[Any] = [None] * len(calls)
    failed: list[BaseException] = []

    def one(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as error:  # handed to the caller's thread
            failed.append(error)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    return results


def authorize(command: str) -> str:
    """A curl command (or shell lines with one) that sends the API key from $VLLM_API_KEY."""
    return command.replace("curl -sS", f'curl -sS -H "{CURL_AUTH}"')


class Http:
    """A small synchronous client (one connection pool for the whole verify run)."""

    def __init__(
        self,
        timeout: float = defaults.VERIFY_TIMEOUT_S,
        api_key: str | None = None,
        max_body: int = MAX_BODY,
    ) -> None:
        import httpx

        self.timeout = timeout
        self.max_body = max_body
        self.authorized = bool(api_key)
        # identity: a compressed body cannot grow past the size limit in one chunk
        headers = {"Accept-Encoding": "identity"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        direct = httpx.HTTPTransport()
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            headers=headers,
            mounts=dict.fromkeys(_LOOPBACK, direct),
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Http:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _late(self) -> str:
        return f"no complete answer within {self.timeout:g} s (--timeout, sending to last byte)"

    def _bounded(self, work: Callable[[float], T], late: Callable[[], T]) -> T:
        """`work(deadline)` on a thread of its own; `late()` when it has not ended by the
        deadline (the thread then stops at its next read, or when its read times out)."""
        deadline = time.monotonic() + self.timeout
        done: list[T] = []
        failed: list[BaseException] = []

        def run() -> None:
            try:
                done.append(work(deadline))
            except BaseException as error:  # handed to the caller's thread
                failed.append(error)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
        if failed:
            raise failed[0]
        return done[0] if done else late()

    def _send(self, method: str, url: str, body: dict[str, Any] | None) -> Reply:
        import httpx

        start = time.perf_counter()

        def elapsed() -> float:
            return (time.perf_counter() - start) * 1000

        def work(deadline: float) -> Reply:
            status = None
            try:
                with self._client.stream(method, url, json=body) as response:
                    status = response.status_code
                    data = b"".join(_chunks(response, deadline, self.max_body))
            except httpx.HTTPError as error:  # reported, never raised
                return Reply(status, elapsed(), error=_describe(error, self.timeout))
            except _Late:
                return Reply(status, elapsed(), error=self._late())
            except _TooLarge as error:
                return Reply(status, elapsed(), error=f"{method} {url}: {error}")
            return Reply(status, elapsed(), data.decode("utf-8", "replace"))

        return self._bounded(work, lambda: Reply(None, elapsed(), error=self._late()))

    def get(self, url: str) -> Reply:
        return self._send("GET", url, None)

    def get_all(self, urls: Sequence[str]) -> list[Reply]:
        """GET every URL at once: all of them end within one timeout."""
        return parallel([functools.partial(self.get, url) for url in urls])

    def post(self, url: str, body: dict[str, Any]) -> Reply:
        return self._send("POST", url, body)

    def stream(self, url: str, body: dict[str, Any]) -> Stream:
        """POST `body` and read the reply as server-sent events, timing each event when its
        blank line arrives. Comment lines (`:`) and other fields are skipped; `data: [DONE]`
        ends the stream; data that is not JSON is an error."""
        import httpx

        start = time.perf_counter()
        result = Stream(status=None)

        def work(deadline: float) -> Stream:
            try:
                with self._client.stream("POST", url, json=body) as response:
                    result.status = response.status_code
                    if response.status_code != 200:
                        text = b"".join(_chunks(response, deadline, self.max_body))
                        result.text = text.decode("utf-8", "replace")
                    else:
                        chunks = _chunks(response, deadline, MAX_STREAM)
                        _read_events(_lines(chunks, MAX_EVENT), start, result)
            except httpx.HTTPError as error:
                result.error = _describe(error, self.timeout)
            except _Late:
                result.error = self._late()
            except _TooLarge as error:
                result.error = f"POST {url}: {error}"
            result.ended_at = time.perf_counter() - start
            return result

        def late() -> Stream:
            ended = time.perf_counter() - start
            return replace(result, events=list(result.events), error=self._late(), ended_at=ended)

        return self._bounded(work, late)


def _read_events(lines: Iterator[str], start: float, result: Stream) -> None:
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            if sum(len(part) for part in data) > MAX_EVENT:
                raise _TooLarge(f"an event is longer than {MAX_EVENT} bytes")
            continue
        if line or not data:
            continue  # another field (event:, id:), or a blank line with nothing pending
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            result.done = True
            continue
        try:
            parsed = json.loads(payload)
        except (ValueError, RecursionError):
            result.error = f"an event is not JSON: {payload[:200]}"
            return
        if isinstance(parsed, dict):
            result.events.append(StreamEvent(time.perf_counter() - start, parsed))
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
