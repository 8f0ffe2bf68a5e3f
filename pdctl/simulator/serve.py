"""One simulator process: the engine that `python -m pdctl.simulator serve` runs, built from its
options (the model from the catalog or --sim-model-config, offline; the GPU from the catalog; the
KV link from the link table), until SIGTERM or SIGINT."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from types import FrameType

from pdctl.errors import InputError, UsageError
from pdctl.models import catalog, links
from pdctl.models.memory import kv_layout
from pdctl.plan import resolve_model
from pdctl.simulator import model
from pdctl.simulator.core import RealClock, VirtualClock
from pdctl.simulator.engine import Behaviour, Shape, SimulatedEngine, with_faults
from pdctl.simulator.options import CONNECTORS, Options


@dataclass(frozen=True)
class Built:
    engine: SimulatedEngine
    link: links.Link


def build(options: Options) -> Built:
    """The engine the options describe, not yet listening."""
    if options.model_config is None and catalog.find_model(options.model) is None:
        raise InputError(
            f"{options.model} is not in the planner's model catalog",
            hint="pass --sim-model-config PATH (its config.json); `pdctl catalog models` lists "
            "the catalog",
        )
    arch = resolve_model(options.model, options.model_config, offline=True)
    try:
        gpu = catalog.gpu(options.gpu)
    except UsageError as error:  # catalog.gpu names pdctl's option: name the simulator's
        raise UsageError(
            f"--sim-gpu {options.gpu!r} is not in the GPU catalog", error.hint
        ) from None
    try:
        link = links.load().by_id(options.link or gpu.network)
    except ValueError as error:
        ids = ", ".join(link.id for link in links.load().links)
        raise UsageError(f"--sim-link: {error}", hint=f"one of {ids}") from None
    sized = model.timing(
        arch,
        gpu,
        options.tp,
        options.pp,
        utilization=options.utilization,
        kv_cache_dtype=options.kv_cache_dtype,
        budget=options.max_num_batched_tokens,
        max_seqs=options.max_num_seqs,
    )
    layout = kv_layout(arch, options.tp, options.pp, options.kv_cache_dtype, budget=sized.budget)
    shape = Shape(
        model=options.model,
        gpu=gpu.name,
        tp=options.tp,
        pp=options.pp,
        kv_bytes_per_token=layout.per_token,
        max_model_len=options.max_model_len or arch.max_positions,  # vLLM: the config's
        prefix_caching=options.prefix_caching,
        nixl=options.connector == CONNECTORS[0],
        with_lmcache=options.connector == CONNECTORS[1] and options.lmcache_metrics,
        lmcache_pd=options.lmcache_pd,
    )
    behaviour = with_faults(Behaviour(kv_gbps=link.gbps), options.faults)
    engine = SimulatedEngine(
        options.served_name,
        model=options.served_name,
        behaviour=behaviour,
        shape=shape,
        timing=sized,
        clock=VirtualClock() if options.clock == "virtual" else RealClock(),
        host=options.host,
        port=options.port,
        side_host=options.side_host,
        side_port=options.side_port,
        record=False,  # a served engine keeps nothing per request once it ends
    )
    return Built(engine, link)


def _kv(engine: SimulatedEngine) -> str:
    """Where KV arrives: the NIXL side channel, LMCache's receiver, or nowhere."""
    if engine.shape.nixl:
        return f"KV side channel {engine.side_host}:{engine.side_port}"
    pd = engine.shape.lmcache_pd
    if pd is not None and pd.listens:
        return "LMCache receiver " + ", ".join(f"{h}:{p}" for h, p in pd.listens)
    return f"LMCache {pd.role}" if pd is not None else "no KV transfer"


def banner(built: Built) -> str:
    e, s = built.engine, built.engine.shape
    return (
        f"pd-stack simulator (not vLLM): {s.model} on {s.gpu}, TP {s.tp}/PP {s.pp}, "
        f"port {e.port} ({_kv(e)}, {built.link.name})"
    )


def on_signals() -> int:
    """A descriptor that becomes readable once SIGTERM or SIGINT arrives from now on (installed
    before the engine says it is up, so that a signal right after the banner still ends it
    cleanly): Python's C-level handler writes each caught signal to a pipe (signal.set_wakeup_fd)
    on whichever thread takes it, and the Python handlers do nothing. A threading.Event set by the
    handler failed twice over: a signal taken by another thread (any of the engine's may take a
    process's signal) runs the Python handler only once the main thread runs Python again, which
    a thread waiting on the event never did (a killed supervisor's engine stayed up, its SIGTERM
    received); and run on the main thread while it held the event's lock, at the start of
    Event.wait, Event.set waited for that lock for ever."""
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    signal.set_wakeup_fd(writable)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _nothing)
    return readable


def _nothing(_signum: int, _frame: FrameType | None) -> None:
    """The Python handler: the wakeup descriptor has been written already."""


def serve_until(engine: SimulatedEngine, stop: int) -> None:
    """Serve until `stop` (on_signals) is readable, then stop listening."""
    try:
        os.read(stop, 1)
    finally:
        engine.down()
