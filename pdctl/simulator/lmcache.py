"""LMCache's PD transfer between simulated engines, in the two forms the chart renders
(helm/files/connectors.yaml: `tutorialLMCache` and `LMCacheConnectorV1`); the engine runs it when
its --kv-transfer-config names LMCacheConnectorV1 and its env turns PD on:

- the PD tutorial's (LMCache 0.2.x/0.3.0): LMCACHE_ENABLE_NIXL, LMCACHE_NIXL_ROLE sender|receiver,
  LMCACHE_NIXL_RECEIVER_HOST/PORT. A sender pushes the KV of every prompt it computes to the one
  receiver those name; the receiver keeps it by the prompt's tokens. production-stack's
  disaggregated_prefill then sends the same request to the decode, whose LMCache finds the prompt.
- LMCache >= 0.3.7: LMCACHE_ENABLE_PD, LMCACHE_PD_ROLE, the receiver's LMCACHE_PD_PEER_HOST,
  _PEER_INIT_PORT and _PEER_ALLOC_PORT (one per TP rank), the sender's LMCACHE_PD_PROXY_HOST/PORT.
  LMCache's PD proxy (examples/disagg_prefill/disagg_proxy_server.py) sends the prefill
  `kv_transfer_params` {ret_first_tok, disagg_spec: {req_id, receiver_host, receiver_init_port[],
  receiver_alloc_port[]}}; the sender pushes the KV to that receiver, then tells the proxy, once
  per receiver TP rank (PDMsg {req_id} to pd_proxy_host:pd_proxy_port), and answers with
  `kv_transfer_params.first_tok`; the proxy then sends the decode the prompt and that token. A
  completion sent to such a sender without a disagg_spec kills its engine (LMCache 0.5.6's default
  pd_backend_mode async: pd_backend_async.py batched_submit_put_task reads the receiver from it
  unchecked; an H200 prefill died so, benchmarks/records/lmcache-h200-1gpu-leak.json).

What the simulator moves (pdctl/lmcache_wire.py): one HTTP POST from the sender to the
receiver's port (its alloc port in the second form) carrying the prompt's tokens, in place of
LMCache's ZMQ handshake and NIXL write, and one to the proxy's port in place of its ZMQ PUSH. No
KV bytes move: the sender times the push by the link's bandwidth. The push happens before the
prefill answers, so the decode finds the KV whenever the router follows the protocol.

The decode (LMCache's vLLM adapter, lmcache/integration/vllm/vllm_v1_adapter.py
get_num_new_matched_tokens; a kv_producer looks nothing up): LMCache's lookup finds the longest
prompt prefix the receiver holds; a hit of the whole prompt is cut by one token, which vLLM
computes. Received KV is handed over once and the receiver keeps at most KEPT prompts.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from pdctl import lmcache_wire as wire

KEPT = 4096  # prompts a receiver keeps (the oldest goes first): LMCache's buffer is bounded too
SENDER, RECEIVER = "sender", "receiver"
TUTORIAL, CURRENT = "tutorial", "current"


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def _ports(value: str | None) -> tuple[int, ...]:
    words = [w.strip().strip("[]") for w in (value or "").split(",")]
    return tuple(int(w) for w in words if w.isdigit())


@dataclass(frozen=True)
class Settings:
    """An engine's LMCache PD settings, from its env as LMCache reads them (LMCACHE_<KEY>)."""

    form: str  # TUTORIAL or CURRENT
    role: str  # SENDER or RECEIVER
    receiver_host: str = "localhost"  # the tutorial's: where a sender pushes, where a receiver
    receiver_port: int = 0  # listens
    peer_host: str = "localhost"  # a current receiver's address and ports
    init_ports: tuple[int, ...] = ()
    alloc_ports: tuple[int, ...] = ()
    proxy_host: str = ""  # a current sender's proxy
    proxy_port: int = 0

    @property
    def listens(self) -> list[tuple[str, int]]:
        """The (host, port) a receiver listens on (the tutorial's receiver port; the init and
        alloc ports)."""
        if self.role != RECEIVER:
            return []
        if self.form == TUTORIAL:
            return [(self.receiver_host, self.receiver_port)]
        return [(self.peer_host, port) for port in (*self.init_ports, *self.alloc_ports)]


def settings(env: Mapping[str, str]) -> Settings | None:
    """The LMCache PD settings env holds, or None when it does not turn PD on."""
    if _on(env.get("LMCACHE_ENABLE_PD")):
        return Settings(
            CURRENT,
            SENDER if env.get("LMCACHE_PD_ROLE") == SENDER else RECEIVER,
            peer_host=env.get("LMCACHE_PD_PEER_HOST") or "localhost",
            init_ports=_ports(env.get("LMCACHE_PD_PEER_INIT_PORT")),
            alloc_ports=_ports(env.get("LMCACHE_PD_PEER_ALLOC_PORT")),
            proxy_host=env.get("LMCACHE_PD_PROXY_HOST") or "",
            proxy_port=(_ports(env.get("LMCACHE_PD_PROXY_PORT")) or (0,))[0],
        )
    if _on(env.get("LMCACHE_ENABLE_NIXL")):
        return Settings(
            TUTORIAL,
            SENDER if env.get("LMCACHE_NIXL_ROLE") == SENDER else RECEIVER,
            receiver_host=env.get("LMCACHE_NIXL_RECEIVER_HOST") or "localhost",
            receiver_port=(_ports(env.get("LMCACHE_NIXL_RECEIVER_PORT")) or (0,))[0],
        )
    return None


def from_environment() -> Settings | None:
    return settings(os.environ)


def _key(tokens: list[str]) -> tuple[int, int]:
    return len(tokens), hash(tuple(tokens))


class Received:
    """The KV a receiver holds: prompts by their tokens, handed over once, at most KEPT."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: collections.OrderedDict[tuple[int, int], None] = collections.OrderedDict()

    def put(self, tokens: list[str]) -> None:
        with self._lock:
            self._held[_key(tokens)] = None
            while len(self._held) > KEPT:
                self._held.popitem(last=False)

    def take_prefix(self, tokens: list[str]) -> int:
        """The longest prompt prefix held (handed over: gone after), 0 when none is."""
        with self._lock:
            lengths = sorted({n for n, _ in self._held if n <= len(tokens)}, reverse=True)
            for n in lengths:
                key = _key(tokens[:n])
                if key in self._held:
                    del self._held[key]
                    return n
        return 0


def receiver_handler(received: Received) -> type:
    """A receiver's port: POST PUSH_PATH {tokens} keeps the prompt's KV."""

    def take(body: dict[str, object]) -> None:
        tokens = body["tokens"]
        if not isinstance(tokens, list):
            raise TypeError("tokens")
        received.put([str(t) for t in tokens])

    return wire.json_handler(wire.PUSH_PATH, take)
