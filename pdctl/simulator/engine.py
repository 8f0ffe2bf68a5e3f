"""One simulated vLLM engine: what it counts and answers, not a model (docs/simulator.md).

It speaks the HTTP that vllm-router 0.1.17 speaks with vLLM engines in PD mode, and exports
vLLM's metric names with vLLM's semantics, so that the real router routes through it and
`pdctl verify` and `pdctl bench` read it like a real engine:

- `GET /health` (200, empty body), `GET /v1/models` (owned_by "pd-stack-simulator"),
  `GET /metrics` (Prometheus text, pdctl.simulator.metrics).
- `POST /v1/completions` and `/v1/chat/completions`, plain or streamed as server-sent events
  (pdctl.simulator.openai); `POST /tokenize`, the ids of the prompt's tokens (LMCache's PD proxy
  sends the prefill and decode token ids).
- The PD round trip of vLLM's NixlConnector, as the router drives it:
  - a request whose `kv_transfer_params` has `do_remote_decode: true` is a prefill: the engine
    computes the prompt, generates one token, keeps the prompt's KV blocks for a decode to read,
    and answers with `kv_transfer_params` {do_remote_prefill, do_remote_decode, remote_engine_id,
    remote_request_id, remote_block_ids, remote_host, remote_port, tp_size}, the host and port
    being its side channel (pdctl.simulator.kv);
  - a request carrying those params (`do_remote_prefill: true`) is a decode: the engine reads the
    blocks from that prefill's side channel instead of computing the prompt, then generates;
  - any other request is computed locally.
- Token counts: one token per whitespace-separated word of the prompt (chat messages are put
  in a small template first); output tokens are " tok0", " tok1", ... up to max_tokens, so the
  `usage` fields pdctl bench counts are exact.
- LMCache's PD (LMCacheConnectorV1 with LMCache's PD env, both forms the chart renders;
  pdctl.simulator.lmcache): a sender pushes the prompt's KV to its receiver before it answers;
  the receiver's engine loads the prompt from it (external_kv_transfer) and exports LMCache's
  counters.
- Counters as vLLM moves them: prompt tokens by source (local_compute, local_cache_hit,
  external_kv_transfer; they add up to prompt tokens), a prefix cache of 16-token blocks (hits
  are whole blocks, never the last prompt token), NIXL's transfer histograms and failure counters
  (moved by the engine that reads the KV: the decode, as NixlConnector pulls), the request phase
  histograms and the running/waiting/KV-usage gauges.

Faults (`Behaviour`, settable while running; `--sim-fault` at start):
- `recompute`: a decode ignores `kv_transfer_params` and computes the whole prompt itself;
- `lose_transfers`: the KV read fails (counted in nixl_num_failed_transfers) and the decode
  recomputes (kv_load_failure_policy "recompute");
- `slow_kv_s`: every KV transfer takes this many seconds more;
- `legacy_last_token`: vLLM before 0.21, where a decode recomputes the last prompt token;
- `prompt_sources`: False for vLLM before PR #33290 (no prompt_tokens_by_source);
- `first_token_delay` and `inter_token_delay` (seconds, on top of the step times);
- `dead`: /health answers 503 and requests 500, as vLLM's server does once its engine died;
and `down()` / `up()` stop and restart the servers on the same ports (an engine down: connection
refused); `replace()` after `down()` makes the next `up()` a new process, as a replaced pod is: a
new `engine_id` (vLLM draws a uuid4 per process when none is configured), the KV blocks the old
one held gone, counters and prefix cache from zero.
With `record` (the default in tests; the served simulator, pdctl.simulator.serve, turns it off:
nothing is kept per request) every request is recorded in `requests` (path, headers, body) so
tests can assert on exactly what the router sent. `limits` bound what a client may send and how
long it may stall (pdctl.simulator.openai).
"""

from __future__ import annotations

import http.server
import socket
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pdctl import lmcache_wire as wire
from pdctl import vllm_image
from pdctl.errors import UsageError
from pdctl.plan.step import Chunk
from pdctl.simulator import kv, lmcache, metrics, openai
from pdctl.simulator.core import Clock, Core, Delays, RealClock
from pdctl.simulator.kv import KvStore
from pdctl.simulator.openai import Recorded
from pdctl.simulator.scheduler import Blocks, Scheduler, Sequence, StepCost

BLOCK_SIZE = vllm_image.grammar().block_size  # vLLM's default --block-size
# What a PD router sends prefill with NixlConnector: compute the prompt, keep the KV blocks for a
# remote decode (vLLM's NIXL PD proxy, tests/v1/kv_connector/nixl_integration/toy_proxy_server.py;
# vllm-router and llm-d's sidecar send the same).
PREFILL_REQUEST_PARAMS: dict[str, Any] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}


@dataclass
class Behaviour:
    first_token_delay: float = 0.0
    inter_token_delay: float = 0.0
    recompute: bool = False
    lose_transfers: bool = False
    slow_kv_s: float = 0.0
    legacy_last_token: bool = False
    prompt_sources: bool = True
    # /health 503 (as vLLM's on EngineDeadError, vllm/entrypoints/serve/instrumentator/health.py),
    # requests 500: a vLLM whose engine core died
    dead: bool = False
    # The KV bandwidth of the link transfers run over (GB/s per GPU): NVLink-class by default.
    kv_gbps: float = 300.0


FAULTS = {
    "recompute": "recompute",
    "lose-transfers": "lose_transfers",
    "slow-kv": "slow_kv_s",
    "first-token-delay": "first_token_delay",
    "inter-token-delay": "inter_token_delay",
    "dead": "dead",
}


def with_faults(behaviour: Behaviour, faults: Iterable[str]) -> Behaviour:
    """`behaviour` with `--sim-fault` values set: NAME (a switch) or NAME=SECONDS."""
    changes: dict[str, Any] = {}
    for fault in faults:
        name, _, value = fault.partition("=")
        field_name = FAULTS.get(name)
        if field_name is None:
            raise UsageError(
                f"--sim-fault {fault}: no such fault", hint="one of " + ", ".join(FAULTS)
            )
        timed = isinstance(getattr(behaviour, field_name), float)
        if timed != bool(value):
            form = f"{name}=SECONDS" if timed else name
            raise UsageError(f"--sim-fault {fault}: write it as {form}")
        try:
            changes[field_name] = float(value) if timed else True
        except ValueError:
            raise UsageError(f"--sim-fault {fault}: {value!r} is not a number of seconds") from None
    return replace(behaviour, **changes)


@dataclass(frozen=True)
class Shape:
    """What the engine simulates: the model, GPU and parallelism (for metrics' info), the KV
    bytes one prompt token takes on one GPU, and the longest sequence it serves."""

    model: str = "simulated"
    gpu: str = "none"
    tp: int = 1
    pp: int = 1
    kv_bytes_per_token: int = 2 * 28 * 8 * 128 * 2  # K and V, layers x kv heads x head dim x bf16
    max_model_len: int = 8192
    prefix_caching: bool = True
    nixl: bool = True  # NixlConnector configured; without it kv_transfer_params are ignored
    # LMCacheConnectorV1 configured and PROMETHEUS_MULTIPROC_DIR set: exports LMCache's counters
    with_lmcache: bool = False
    lmcache_pd: lmcache.Settings | None = None  # and its PD settings (pdctl.simulator.lmcache)

    @property
    def connector(self) -> str | None:
        """The connector whose metrics the engine exports."""
        return metrics.NIXL if self.nixl else metrics.LMCACHE if self.with_lmcache else None


def _instant(chunks: list[Chunk], contexts: list[int]) -> float:
    return 0.0


@dataclass(frozen=True)
class Timing:
    """How the engine's scheduler times and fits requests: the step cost (pdctl.plan.step for a
    model; `instant` by default: only injected delays take time), the KV blocks a sequence of n
    tokens takes and how many the engine has, the token budget and --max-num-seqs."""

    cost: StepCost = _instant
    blocks_of: Blocks = lambda tokens: -(-tokens // BLOCK_SIZE)
    blocks: int = 1 << 20
    budget: int = 8192
    max_seqs: int = 1024

    def scheduler(self) -> Scheduler:
        return Scheduler(self.cost, self.blocks_of, self.blocks, self.budget, self.max_seqs)


@dataclass(frozen=True)
class Admitted:
    """A request the engine accounted for: its prompt, the prompt tokens already in its KV cache
    (prefix hits, transferred KV), the transfer's seconds, and a prefill's kv_transfer_params."""

    prompt: int
    cached: int
    transfer_s: float
    kv_transfer_params: dict[str, Any] | None


@dataclass
class _State:
    """What a process holds: gone when it is replaced."""

    core: Core
    counters: metrics.Counters = field(default_factory=metrics.Counters)
    cache: set[int] = field(default_factory=set)


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or stalled is no error of the engine's (uvicorn logs none
        either)."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _start(
    handler: type[http.server.BaseHTTPRequestHandler], host: str, port: int
) -> http.server.ThreadingHTTPServer:
    server = _Server((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class SimulatedEngine:
    """One engine on `host`:`port` (0: a free one, kept across down()/up()), its KV side channel
    on `side_host`:`side_port` (0: a free one)."""

    def __init__(
        self,
        name: str,
        store: KvStore | None = None,
        model: str = "double-model",
        behaviour: Behaviour | None = None,
        *,
        shape: Shape | None = None,
        timing: Timing | None = None,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        side_host: str = "127.0.0.1",
        side_port: int = 0,
        record: bool = True,
        limits: openai.Limits | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.store = store or KvStore()
        self.received = lmcache.Received()  # an LMCache receiver's KV
        self.behaviour = behaviour or Behaviour()
        self.shape = shape or Shape()
        self.timing = timing or Timing()
        self.clock: Clock = clock or RealClock()
        self.engine_id = f"{name}-{uuid.uuid4()}"
        self.record = record
        self.requests: list[Recorded] = []
        self.limits = limits or openai.Limits()
        self.host, self.port = host, port
        self.side_host, self.side_port = side_host, side_port
        self._state = self._new_state()
        self._lock = threading.Lock()
        self._servers: list[http.server.ThreadingHTTPServer] = []
        self._connections: set[socket.socket] = set()

    # ---- lifecycle
    def _new_state(self) -> _State:
        b = lambda: Delays(self.behaviour.first_token_delay, self.behaviour.inter_token_delay)  # noqa: E731
        return _State(Core(self.timing.scheduler(), self.clock, b))

    @property
    def registry(self) -> KvStore:
        """The store this engine keeps its blocks in (the test doubles' name for it)."""
        return self.store

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def up(self) -> SimulatedEngine:
        # The NIXL side channel: only with NixlConnector (vLLM opens none without it).
        sides = []
        if self.shape.nixl:
            sides = [_start(kv.side_channel_handler(self.store), self.side_host, self.side_port)]
            self.side_port = sides[0].server_address[1]
        receivers = [
            _start(lmcache.receiver_handler(self.received), host, port)
            for host, port in (self.shape.lmcache_pd.listens if self.shape.lmcache_pd else [])
        ]
        api = _start(openai.handler(self, self.limits), self.host, self.port)
        self.port = api.server_address[1]
        self._servers = [api, *sides, *receivers]
        self._state.core.start()
        return self

    def down(self) -> None:
        """Stop listening and drop every open connection (the router keeps connections alive:
        a process that died would reset them too)."""
        stopping = [threading.Thread(target=server.shutdown) for server in self._servers]
        for thread in stopping:  # together: each waits up to its server's poll interval
            thread.start()
        for thread, server in zip(stopping, self._servers, strict=True):
            thread.join()
            server.server_close()
        self._servers = []
        self._state.core.stop()
        with self._lock:
            connections, self._connections = set(self._connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def replace(self) -> None:
        """The process is gone for good: the next `up()` is a new one (new engine_id, no KV)."""
        self.store.drop(self.engine_id)
        self.engine_id = f"{self.name}-{uuid.uuid4()}"
        with self._lock:
            self._state = self._new_state()

    def connected(self, connection: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def generation_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST"]

    # ---- engine
    def _cached_prefix(self, tokens: list[str]) -> tuple[int, list[int]]:
        """Prompt tokens found in the prefix cache (whole blocks, at most all but the last
        token), and the hashes of the prompt's full blocks."""
        hashes, running = [], 0
        for start in range(0, len(tokens) - len(tokens) % BLOCK_SIZE, BLOCK_SIZE):
            running = hash((running, tuple(tokens[start : start + BLOCK_SIZE])))
            hashes.append(running)
        hit = 0
        for h in hashes:
            if h not in self._state.cache:
                break
            hit += BLOCK_SIZE
        limit = ((len(tokens) - 1) // BLOCK_SIZE) * BLOCK_SIZE
        return min(hit, limit), hashes

    def _read_remote(self, remote: dict[str, Any]) -> bool:
        fields = ("remote_engine_id", "remote_request_id", "remote_host", "remote_port")
        if self.behaviour.lose_transfers or any(remote.get(f) is None for f in fields):
            return False
        return kv.read(remote)

    def _transfer(self, tokens: int, blocks: int) -> float:
        """Account for a KV read of `tokens` prompt tokens; its seconds over the link."""
        size = tokens * self.shape.kv_bytes_per_token
        seconds = size / (self.behaviour.kv_gbps * 1e9) + self.behaviour.slow_kv_s
        c = self._state.counters
        c.xfer_time.observe(seconds)
        c.xfer_bytes.observe(size)
        c.descriptors.observe(float(blocks))
        return seconds

    def too_long(self, prompt: int, max_tokens: int) -> str | None:
        """vLLM's refusal of a request longer than --max-model-len (or than the KV cache holds,
        which vLLM refuses at start), or None."""
        limit = self.shape.max_model_len
        total = prompt + max_tokens
        if total > limit or self.timing.blocks_of(total) > self.timing.blocks:
            return (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{total} tokens ({prompt} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion."
            )
        return None

    def dies_of(self, params: dict[str, Any] | None) -> bool:
        """Whether a completion with these kv_transfer_params kills the engine core: an LMCache
        >= 0.3.7 sender's without the PD proxy's disagg_spec (pdctl.simulator.lmcache). Then the
        engine is dead from here on, as vLLM's after EngineDeadError."""
        pd = self.shape.lmcache_pd
        if pd is None or (pd.form, pd.role) != (lmcache.CURRENT, lmcache.SENDER):
            return False
        if isinstance((params or {}).get("disagg_spec"), dict):
            return False
        self.behaviour = replace(self.behaviour, dead=True)
        return True

    def admit(self, tokens: list[str], params: dict[str, Any] | None) -> Admitted:
        """Account for the prompt as vLLM does: prefix cache hits, the KV read from a remote
        prefill (or its failure), the tokens computed here."""
        pd = self.shape.lmcache_pd
        if pd is not None:
            return self._admit_lmcache(tokens, params or {}, pd)
        b = self.behaviour
        n = len(tokens)
        params = params if self.shape.nixl else None
        remote = params if params and params.get("do_remote_prefill") else None
        read = remote is not None and not b.recompute and self._read_remote(remote)
        transfer_s = 0.0
        with self._lock:
            hit, hashes = self._cached_prefix(tokens)
            c = self._state.counters
            external = 0
            if remote is not None and read:
                external = n - hit - (1 if b.legacy_last_token else 0)
                transfer_s = self._transfer(external, len(remote.get("remote_block_ids") or []))
            elif remote is not None and not b.recompute:
                c.failed_transfers += 1
            self._count_prompt(n, hit, external, hashes)
        kept = self._keep(n) if params and params.get("do_remote_decode") else None
        return Admitted(n, hit + external, transfer_s, kept)

    def _count_prompt(self, n: int, hit: int, external: int, hashes: list[int]) -> None:
        """The prompt's tokens by where their KV came from (vLLM's prompt_tokens_by_source);
        the caller holds the lock."""
        c = self._state.counters
        c.prompt_tokens += n
        c.by_source["local_cache_hit"] += hit
        c.by_source["external_kv_transfer"] += external
        c.by_source["local_compute"] += n - hit - external
        if self.shape.prefix_caching:
            self._state.cache.update(hashes)

    def _admit_lmcache(
        self, tokens: list[str], params: dict[str, Any], pd: lmcache.Settings
    ) -> Admitted:
        """LMCache PD (pdctl.simulator.lmcache): a receiver loads what it was sent, a sender
        computes the prompt, then pushes its KV (timed) before it answers."""
        n, b = len(tokens), self.behaviour
        with self._lock:
            hit, hashes = self._cached_prefix(tokens)
        external = 0
        c = self._state.counters
        if pd.role == lmcache.RECEIVER:
            found = self.received.take_prefix(tokens)
            found = 0 if b.recompute or b.lose_transfers else found
            found = min(found, n - 1)  # a whole-prompt hit: vLLM computes the last token
            external = max(found - hit, 0)
            # LMCache's lookup counters, then its load's (LMCache 0.5.6 cache_engine.py retrieve:
            # observability.py on_retrieve_request and on_retrieve_finished), as the real
            # receiver's did on vLLM 0.26.0's V1 model runner (benchmarks/records/
            # lmcache-h200-1gpu-v1runner.json; on its V2 runner only the lookup counters moved).
            loads = {"retrieve_requests": 1, "retrieve_tokens": found, "retrieve_hit_tokens": found}
            with self._lock:
                c.count_lmcache(lookup_requests=1, lookup_tokens=n, lookup_hit_tokens=found)
                c.count_lmcache(**(loads if external else {}))
        with self._lock:
            self._count_prompt(n, hit, external, hashes)
        if pd.role != lmcache.SENDER:
            return Admitted(n, hit + external, 0.0, None)
        with self._lock:
            c.count_lmcache(store_requests=1, stored_tokens=n)
        return self._send_lmcache(tokens, params, pd)

    def _send_lmcache(
        self, tokens: list[str], params: dict[str, Any], pd: lmcache.Settings
    ) -> Admitted:
        """The sender's push (the tutorial's to its receiver; the current form's to the
        disagg_spec's, then a notification per receiver TP rank to the proxy) and its answer's
        kv_transfer_params (first_tok when the proxy asked for it)."""
        b, n = self.behaviour, len(tokens)
        spec = params.get("disagg_spec") if isinstance(params.get("disagg_spec"), dict) else None
        target: tuple[str, int] | None = (pd.receiver_host, pd.receiver_port)
        if pd.form == lmcache.CURRENT:
            ports = (spec or {}).get("receiver_alloc_port") or []
            target = (str(spec["receiver_host"]), int(ports[0])) if spec and ports else None
        seconds = 0.0
        if target is not None:
            seconds = n * self.shape.kv_bytes_per_token / (b.kv_gbps * 1e9) + b.slow_kv_s
            if not b.lose_transfers:
                wire.post(*target, wire.PUSH_PATH, {"tokens": tokens})
        if spec is not None and pd.proxy_host:
            for _ in spec.get("receiver_init_port") or [0]:
                wire.post(pd.proxy_host, pd.proxy_port, wire.NOTIFY_PATH, spec)
        answer = {"first_tok": openai.token_id("tok0")} if params.get("ret_first_tok") else None
        return Admitted(n, 0, seconds, answer)

    def _keep(self, n: int) -> dict[str, Any]:
        """Keep a prefill's blocks for the remote decode; the params that say where they are."""
        request_id = f"cmpl-{uuid.uuid4().hex}"
        blocks = list(range((n + BLOCK_SIZE - 1) // BLOCK_SIZE))
        self.store.put(self.engine_id, request_id, blocks)
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": blocks,
            "remote_engine_id": self.engine_id,
            "remote_request_id": request_id,
            "remote_host": self.side_host,
            "remote_port": self.side_port,
            "tp_size": self.shape.tp,
        }

    def generate(self, admitted: Admitted, max_tokens: int) -> Iterator[int]:
        """Run the request through the scheduler: yields each output token's index as its step
        ends (after the KV transfer); its phases go to vLLM's histograms when it is done."""
        core = self._state.core
        core.wait(admitted.transfer_s)
        emitted = 0
        seq = None
        for seq in core.generate(admitted.prompt, admitted.cached, max_tokens):
            while emitted < seq.generated:
                with self._lock:
                    self._state.counters.generation_tokens += 1
                yield emitted
                emitted += 1
        if seq is not None and seq.done:
            self._finished(seq)

    def _finished(self, seq: Sequence) -> None:
        scheduled = seq.scheduled_at if seq.scheduled_at is not None else seq.arrival
        first, last = seq.token_times[0], seq.token_times[-1]
        phases = (scheduled - seq.arrival, first - scheduled, last - first)
        with self._lock:
            c = self._state.counters
            c.success["length"] += 1
            for phase, seconds in zip(metrics.PHASES, phases, strict=True):
                c.phases[phase].observe(seconds)

    def metrics(self) -> str:
        s = self.shape
        info = metrics.Info(s.model, s.gpu, s.tp, s.pp, self.clock.name)
        gauges = metrics.Gauges(*self._state.core.counts())
        with self._lock:
            return metrics.render(
                self.model,
                self._state.counters,
                gauges,
                info,
                self.behaviour.prompt_sources,
                s.connector,
            )
