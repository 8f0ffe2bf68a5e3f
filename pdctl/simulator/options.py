"""The simulator's command line: the arguments the chart renders for `vllm serve` (the ones the
simulator models are read, every other vLLM flag is accepted and ignored) plus its own `--sim-*`
flags. Bad flags are a UsageError (exit 2), as vLLM's own argument parser exits."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import defaults
from pdctl.errors import UsageError
from pdctl.local.multiproc import ENV as MULTIPROC_ENV
from pdctl.simulator import lmcache

# The connectors the simulator models: vLLM's NIXL, and LMCache's PD (pdctl.simulator.lmcache)
CONNECTORS = ("NixlConnector", "LMCacheConnectorV1")
DEFAULT_GPU = defaults.GPU_TYPE
CLOCKS = ("real", "virtual")
# vLLM's defaults for the side channel (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_HOST / _PORT).
SIDE_CHANNEL_HOST, SIDE_CHANNEL_PORT = "localhost", 5600

USAGE = """python -m pdctl.simulator serve MODEL [vLLM serve flags] [--sim-* flags]

pd-stack's engine simulator (not vLLM): an OpenAI-compatible server that speaks vLLM's PD
protocols (NixlConnector, LMCache's PD), metrics and health, and times each scheduler step with
pdctl's planner (docs/simulator.md). It reads these `vllm serve` flags: --host, --port,
--served-model-name, --tensor-parallel-size, --pipeline-parallel-size, --max-model-len,
--gpu-memory-utilization, --max-num-batched-tokens, --max-num-seqs, --kv-cache-dtype,
--enable-prefix-caching, --kv-transfer-config (NixlConnector, LMCacheConnectorV1 or none);
every other vLLM flag is accepted and ignored. Environment, as vLLM and LMCache read it:
VLLM_NIXL_SIDE_CHANNEL_HOST, VLLM_NIXL_SIDE_CHANNEL_PORT; LMCache's PD settings (LMCACHE_ENABLE_PD
and LMCACHE_PD_*, or the PD tutorial's LMCACHE_ENABLE_NIXL and LMCACHE_NIXL_*)."""

FAULTS_HELP = (
    "a fault to simulate (repeatable): recompute (a decode ignores the transferred KV), "
    "lose-transfers (every KV read fails; the decode recomputes), slow-kv=SECONDS (each KV "
    "transfer takes that much longer), first-token-delay=SECONDS, inter-token-delay=SECONDS, "
    "dead (/health answers 503 and requests fail, as a vLLM whose engine died)"
)


@dataclass(frozen=True)
class Options:
    model: str
    served_name: str
    host: str
    port: int
    tp: int
    pp: int
    max_model_len: int | None
    utilization: float
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    kv_cache_dtype: str
    prefix_caching: bool
    connector: str | None  # one of CONNECTORS, or None (aggregated)
    lmcache_pd: lmcache.Settings | None  # LMCache's PD settings (LMCacheConnectorV1 only)
    # PROMETHEUS_MULTIPROC_DIR set: vLLM serves LMCache's metrics, counted in its engine core,
    # only in prometheus_client's multiprocess mode (LMCache's
    # docs/source/production/observability/vllm_endpoint.rst)
    lmcache_metrics: bool
    side_host: str
    side_port: int
    gpu: str
    model_config: Path | None
    clock: str
    faults: tuple[str, ...]
    link: str | None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pdctl.simulator", usage=USAGE, add_help=True)
    p.add_argument("command", choices=["serve"])
    p.add_argument("model")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=defaults.PORT)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=defaults.GPU_MEMORY_UTILIZATION)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--kv-transfer-config", default=None)
    sim = p.add_argument_group("simulator (not vLLM flags)")
    sim.add_argument(
        "--sim-gpu", default=DEFAULT_GPU, help=f"the catalog GPU simulated ({DEFAULT_GPU})"
    )
    sim.add_argument(
        "--sim-model-config", type=Path, default=None, help="a config.json (else the catalog)"
    )
    sim.add_argument("--sim-clock", choices=CLOCKS, default="real", help="real or virtual time")
    sim.add_argument("--sim-fault", action="append", default=[], help=FAULTS_HELP)
    sim.add_argument(
        "--sim-link",
        default=None,
        help="the link table's id KV moves over (the GPU's usual network)",
    )
    return p


def _connector(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        config: Any = json.loads(text)
    except ValueError as error:
        raise UsageError(f"--kv-transfer-config is not JSON: {error}") from None
    name = config.get("kv_connector") if isinstance(config, dict) else None
    if name not in CONNECTORS:
        raise UsageError(
            f"--kv-transfer-config names kv_connector {name!r}: the simulator models "
            f"{' and '.join(CONNECTORS)} only",
            hint="simulate NixlConnector PD (tutorials/17-nixl-vllm-router.md) or LMCache's "
            "(tutorials/16-disagg-prefill.md, 19-lmcache-pd.md), or serve without "
            "--kv-transfer-config (aggregated)",
        )
    return str(name)


def _side_port() -> int:
    text = os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT") or str(SIDE_CHANNEL_PORT)
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UsageError(f"VLLM_NIXL_SIDE_CHANNEL_PORT={text!r} is not a port number")
    return int(text)


def parse(argv: list[str]) -> Options:
    """The options of `argv` (without the program name). vLLM flags the simulator does not
    model are ignored; a refused connector or a malformed flag raises UsageError."""
    parser = _parser()
    try:
        args, _ignored = parser.parse_known_args(argv)
    except SystemExit as stop:  # argparse printed its message (or --help)
        if not stop.code:
            raise
        raise UsageError("invalid command line (see the message above)") from stop
    served = args.served_model_name[0] if args.served_model_name else args.model
    connector = _connector(args.kv_transfer_config)
    return Options(
        model=args.model,
        served_name=served,
        host=args.host,
        port=args.port,
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        max_model_len=args.max_model_len,
        utilization=args.gpu_memory_utilization,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        kv_cache_dtype=args.kv_cache_dtype,
        prefix_caching=args.enable_prefix_caching,
        connector=connector,
        lmcache_pd=lmcache.from_environment() if connector == CONNECTORS[1] else None,
        lmcache_metrics=bool(os.environ.get(MULTIPROC_ENV)),
        side_host=os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST") or SIDE_CHANNEL_HOST,
        side_port=_side_port(),
        gpu=args.sim_gpu,
        model_config=args.sim_model_config,
        clock=args.sim_clock,
        faults=tuple(args.sim_fault),
        link=args.sim_link,
    )
