"""The real vllm-router (the PyPI console script) in front of two vLLM engine doubles
(tests/doubles/vllm_engine.py): a PD pair on loopback for verify's tests and benchmarks.

Only the router is real; the engines are doubles that speak vLLM's PD protocol and metrics.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pdctl.verify.report import Targets
from pdctl.verify.targets import from_urls
from tests.doubles.vllm_engine import Behaviour, KvRegistry, VllmEngineDouble
from tests.helpers import STARTUP_LIMIT, stop

# The venv's console script; VLLM_ROUTER names another (the GPU host installs it elsewhere).
ROUTER = Path(os.environ.get("VLLM_ROUTER") or Path(sys.executable).parent / "vllm-router")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    port, metrics_port = free_port(), free_port()
    command = [str(ROUTER), "--host", "127.0.0.1", "--port", str(port), *args]
    command += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            assert proc.poll() is None, f"vllm-router exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"vllm-router not up: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        stop(proc)


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
