"""The real vllm-router (the PyPI console script) in front of two vLLM engine doubles
(tests/doubles/vllm_engine.py): a PD pair on loopback for verify's tests and benchmarks.

Only the router is real; the engines are doubles that speak vLLM's PD protocol and metrics.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pdctl.verify.report import Targets
from pdctl.verify.targets import from_urls
from tests.doubles.vllm_engine import Behaviour, KvRegistry, VllmEngineDouble
from tests.helpers import server

# The venv's console script; VLLM_ROUTER names another (the GPU host installs it elsewhere).
ROUTER = Path(os.environ.get("VLLM_ROUTER") or Path(sys.executable).parent / "vllm-router")


@dataclass
class Stack:
    router: str
    prefill: VllmEngineDouble
    decode: VllmEngineDouble

    def targets(self, engines: bool = True) -> Targets:
        if not engines:
            return from_urls(self.router, [], [])
        return from_urls(self.router, [self.prefill.url], [self.decode.url])

    def urls(self) -> list[str]:
        return ["--url", self.router, "--prefill-url", self.prefill.url] + [
            "--decode-url",
            self.decode.url,
        ]

    def reset(self) -> None:
        for engine in (self.prefill, self.decode):
            engine.behaviour = Behaviour()
            engine.requests.clear()


@contextmanager
def _router(args: list[str], log: Path) -> Iterator[str]:
    assert ROUTER.is_file(), "the vllm-router console script is missing: make setup"

    def command(port: int, metrics_port: int) -> list[str]:
        return [str(ROUTER), "--host", "127.0.0.1", "--port", str(port), *args] + [
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)
        ]  # fmt: skip

    with server(command, lambda port: f"http://127.0.0.1:{port}/health", log) as (_, port, _):
        yield f"http://127.0.0.1:{port}"


def _pd_args(prefill: str, decode: str) -> list[str]:
    """The chart's static-URL vllm-router arguments (helm/templates/_router.tpl)."""
    return [
        "--vllm-pd-disaggregation",
        "--prefill", prefill,
        "--decode", decode,
        "--kv-connector", "nixl",
        "--policy", "round_robin",
    ]  # fmt: skip


@contextmanager
def pd_stack(tmp: Path, pd: bool = True) -> Iterator[Stack]:
    registry = KvRegistry()
    prefill = VllmEngineDouble("prefill", registry).up()
    decode = VllmEngineDouble("decode", registry).up()
    args = _pd_args(prefill.url, decode.url) if pd else ["--worker-urls", decode.url]
    try:
        with _router(args, tmp / "router.log") as url:
            prefill.requests.clear()
            decode.requests.clear()
            yield Stack(url, prefill, decode)
    finally:
        prefill.down()
        decode.down()
