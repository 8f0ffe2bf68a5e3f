"""What the stand-in does with a generation request (POST /v1/completions, /v1/chat/completions),
as the router it plays does it:

- `roundrobin` and `session` (production-stack's routingLogic for aggregated engines,
  src/vllm_router/routers/routing_logic.py): the request goes whole to one engine, in turn, or, for
  `session`, to the engine the value of the session header hashes to (in turn without one).
- `disaggregated_prefill` (production-stack, src/vllm_router/services/request_service/request.py
  route_disaggregated_prefill_request): a copy of the request goes to the prefill engine with
  `max_tokens` 1, without `max_completion_tokens` and `min_tokens`, `stream` false and no
  `stream_options`; once it answered, the original request goes to the decode engine, whose answer
  is passed on as it comes (content type application/json, as production-stack's
  StreamingResponse). production-stack binds one client per role (the last engine it discovered):
  the stand-in sends to the last prefill and the last decode URL it was given.
- `lmcache-proxy` (LMCache 0.5.6 examples/disagg_prefill/disagg_proxy_server.py): the prompt (a
  chat's messages) is tokenized by an engine (POST /tokenize, engines in turn); the prefill gets
  the request with the token ids as its prompt, `max_tokens` 1 (and `max_completion_tokens` 1 when
  given), every other field kept (`min_tokens` too, which vLLM then refuses above 1: HTTP 400, and
  the proxy answers 500), `stream` false, no `stream_options`, and `kv_transfer_params`
  {ret_first_tok, disagg_spec: {req_id, receiver_host, receiver_init_port, receiver_alloc_port}}
  of the decode chosen (prefill and decode in turn). Every answer is then a stream, whatever the
  client asked (content type application/json, as the proxy's StreamingResponse): first a chunk
  with the prefill's token and usage null (a chat's after a role chunk), then, once the prefill's
  sender reported the transfer once per receiver TP rank, the decode's own stream of the ids and
  the prefill's first token with `max_tokens` one less, `stream` true and the client's
  `stream_options` (a chat's chunks converted to chat chunks, a usage chunk passed on as it is:
  the decode's count, of the prompt and the prefill's token, and of its own output). Where the
  stand-in differs: it waits NOTIFY_WAIT_S at most for the transfer report (the proxy forever),
  and says why it answers 500.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pdctl import lmcache_wire
from pdctl.standin import upstream

ROUTINGS = ("roundrobin", "session", "disaggregated_prefill", "lmcache-proxy")
NOTIFY_WAIT_S = 30.0
JSON = "application/json"


@dataclass
class Outcome:
    status: int
    content_type: str
    body: Iterator[bytes]


def _error(status: int, message: str) -> Outcome:
    payload = {"error": {"message": message, "type": "stand-in router", "code": status}}
    return Outcome(status, JSON, iter([json.dumps(payload).encode()]))


def passed(answer: upstream.Answer, content_type: str | None = None) -> Outcome:
    return Outcome(answer.status, content_type or answer.content_type, answer.chunks())


@dataclass(frozen=True)
class Decoder:
    url: str
    init_ports: tuple[int, ...] = ()
    alloc_ports: tuple[int, ...] = ()


@dataclass(frozen=True)
class Engines:
    prefill: tuple[str, ...] = ()
    decode: tuple[Decoder, ...] = ()
    both: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.prefill, *(d.url for d in self.decode), *self.both)


class Router:
    """One routing logic over the engines (ROUTINGS)."""

    def __init__(
        self,
        routing: str,
        engines: Engines,
        session_key: str | None = None,
        notified: lmcache_wire.Notified | None = None,
    ) -> None:
        self.routing, self.engines, self.session_key = routing, engines, session_key
        self.notified = notified or lmcache_wire.Notified()
        self._turn = itertools.count()
        self._requests = itertools.count(1)

    def route(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Outcome:
        try:
            if self.routing == "disaggregated_prefill":
                return self._disaggregated_prefill(path, body)
            if self.routing == "lmcache-proxy":
                return self._lmcache_proxy(path, body)
            return passed(upstream.request("POST", self._pick(headers), path, body))
        except OSError as error:
            return _error(502, f"an engine cannot be reached: {error}")
        except (ValueError, TypeError) as error:  # max_tokens not a number, say
            return _error(400, f"the request cannot be routed: {error}")

    def _pick(self, headers: dict[str, str]) -> str:
        engines = self.engines.all
        session = (
            headers.get((self.session_key or "").lower()) if self.routing == "session" else None
        )
        if session:
            digest = hashlib.sha256(session.encode()).digest()
            return engines[int.from_bytes(digest[:8], "big") % len(engines)]
        return engines[next(self._turn) % len(engines)]

    # ---- production-stack's disaggregated_prefill
    def _disaggregated_prefill(self, path: str, body: dict[str, Any]) -> Outcome:
        request_id = str(uuid.uuid4())
        first = copy.deepcopy(body)
        first["max_tokens"] = 1
        for key in ("max_completion_tokens", "min_tokens", "stream_options"):
            first.pop(key, None)
        first["stream"] = False
        prefill = upstream.request("POST", self.engines.prefill[-1], path, first, request_id)
        answer = prefill.whole()
        if prefill.status != 200:
            return Outcome(prefill.status, prefill.content_type, iter([answer]))
        decode = upstream.request("POST", self.engines.decode[-1].url, path, body, request_id)
        return passed(decode, JSON)

    # ---- LMCache's PD proxy
    def _lmcache_proxy(self, path: str, body: dict[str, Any]) -> Outcome:
        if "max_tokens" not in body:  # the proxy reads req_data["max_tokens"] (a KeyError: 500)
            return _error(500, "the request has no max_tokens, which LMCache's PD proxy needs")
        turn = next(self._turn)
        prefill = self.engines.prefill[turn % len(self.engines.prefill)]
        decoder = self.engines.decode[turn % len(self.engines.decode)]
        chat = path.endswith("/chat/completions")
        asked = {"messages": body.get("messages")} if chat else {"prompt": body.get("prompt")}
        tokenizer = self.engines.all[turn % len(self.engines.all)]
        ids = upstream.request("POST", tokenizer, "/tokenize", asked).json()
        if not isinstance(ids, dict) or not isinstance(ids.get("tokens"), list):
            return _error(500, "the engine's /tokenize gave no tokens")
        req_id = str(next(self._requests))
        first = _prefill_request(body, ids["tokens"], req_id, decoder)
        answer = upstream.request("POST", prefill, "/v1/completions", first)
        text = answer.whole()
        head = _parsed(text)
        if answer.status != 200 or head is None:
            why = text.decode("utf-8", "replace")[:300]
            return _error(500, f"the prefill answered HTTP {answer.status}: {why}")
        rest = _decode_request(body, first, head)
        ranks = len(decoder.init_ports) or 1
        return Outcome(200, JSON, self._streamed(head, req_id, ranks, decoder, rest, chat))

    def _streamed(
        self,
        head: dict[str, Any],
        req_id: str,
        ranks: int,
        decoder: Decoder,
        rest: dict[str, Any],
        chat: bool,
    ) -> Iterator[bytes]:
        """The proxy's stream: the prefill's token first (after a role chunk for a chat), then,
        once the transfer was reported, the decode's events (a chat's converted to chat chunks);
        cut short, as the proxy's is, when the report or the decode fails."""
        if chat:
            yield _chunk(head, chat, None)
        yield _chunk(head, chat, _text(head))
        if not self.notified.wait(req_id, ranks, NOTIFY_WAIT_S):
            return
        decoded = upstream.request("POST", decoder.url, "/v1/completions", rest)
        if decoded.status != 200:
            decoded.whole()
            return
        pending = b""
        for data in decoded.chunks():
            pending += data
            while b"\n\n" in pending:
                line, pending = pending.split(b"\n\n", 1)
                yield _converted(line) if chat else line + b"\n\n"
        if pending:
            yield pending


def _parsed(text: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _prefill_request(
    body: dict[str, Any], ids: list[Any], req_id: str, decoder: Decoder
) -> dict[str, Any]:
    """The proxy's request to the prefill: the client's, with the token ids, one token, the
    decoder's receiver, no stream."""
    first = {k: v for k, v in body.items() if k != "stream_options"}
    first.update(prompt=ids, max_tokens=1, stream=False)
    if "max_completion_tokens" in body:
        first["max_completion_tokens"] = 1
    spec = {
        "req_id": req_id,
        "receiver_host": _host(decoder.url),
        "receiver_init_port": list(decoder.init_ports),
        "receiver_alloc_port": list(decoder.alloc_ports),
    }
    first["kv_transfer_params"] = {"ret_first_tok": True, "disagg_spec": spec}
    return first


def _decode_request(
    body: dict[str, Any], first: dict[str, Any], head: dict[str, Any]
) -> dict[str, Any]:
    """The proxy's request to the decode: the ids and the prefill's first token, one token less
    to generate, streamed with the client's stream_options (if any)."""
    rest = {k: v for k, v in first.items() if k != "kv_transfer_params"}
    token = (head.get("kv_transfer_params") or {}).get("first_tok")
    rest.update(prompt=[*first["prompt"], token], max_tokens=int(body["max_tokens"]) - 1)
    if "max_completion_tokens" in body:
        rest["max_completion_tokens"] = int(body["max_completion_tokens"]) - 1
    rest["stream"] = True
    if "stream_options" in body:
        rest["stream_options"] = body["stream_options"]
    return rest


def _host(url: str) -> str:
    return url.split("://", 1)[-1].rsplit(":", 1)[0]


def _text(answer: dict[str, Any]) -> str:
    choices = answer.get("choices") or [{}]
    return str(choices[0].get("text") or "")


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _chunk(head: dict[str, Any], chat: bool, text: str | None) -> bytes:
    """The proxy's own first chunks: a chat's role chunk (text None), or the prefill's token."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": None}
    if chat:
        choice["delta"] = (
            {"role": "assistant", "content": ""} if text is None else {"content": text}
        )
        kind = "chat.completion.chunk"
    else:
        choice.update(text=text or "", stop_reason=None)
        kind = "text_completion"
    payload = {
        "id": head.get("id"),
        "object": kind,
        "created": head.get("created"),
        "model": head.get("model"),
        "choices": [choice],
    }
    if not chat:
        payload["usage"] = None
    return _event(payload)


def _converted(line: bytes) -> bytes:
    """A decode event as the proxy passes it to a chat client: a chat chunk of its first choice;
    an event without choices (the usage) or not JSON as it came."""
    if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
        return line + b"\n\n"
    try:
        event = json.loads(line[6:])
    except ValueError:
        return line + b"\n\n"
    choices = event.get("choices") if isinstance(event, dict) else None
    if not choices:
        return line + b"\n\n"
    choice = choices[0]
    return _event(
        {
            "id": event.get("id"),
            "object": "chat.completion.chunk",
            "created": event.get("created"),
            "model": event.get("model"),
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": choice.get("text")},
                    "logprobs": choice.get("logprobs"),
                    "finish_reason": choice.get("finish_reason"),
                }
            ],
        }
    )
