"""The simulator as `pdctl up` runs it: `python -m pdctl.simulator serve MODEL ...` processes (not
vLLM), started with the arguments the chart renders for a NixlConnector PD pair, behind the REAL
vllm-router 0.1.17, checked by `pdctl verify`. The KV handoff crosses processes over the
side-channel ports (VLLM_NIXL_SIDE_CHANNEL_PORT). Faults are set with --sim-fault at start: the
decode process is restarted on its port with each one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pdctl.verify.checks import Settings, run
from pdctl.verify.report import Check, Report, Status
from pdctl.verify.targets import from_urls
from tests.doubles.router_stack import _pd_args, _router
from tests.helpers import free_port, stop

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NIXL = '{"kv_connector":"NixlConnector","kv_load_failure_policy":"fail","kv_role":"kv_both"}'
QUICK = Settings(max_tokens=8, prompt_words=200, settle=0.0, timeout=20.0)


def _serve(port: int, side_port: int, *extra: str) -> list[str]:
    """The chart's engine arguments after `vllm serve`, moved to loopback (as `pdctl up`)."""
    return [
        sys.executable, "-m", "pdctl.simulator", "serve", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "16384", "--gpu-memory-utilization", "0.9",
        "--kv-transfer-config", NIXL,
        "--swap-space", "4",  # a vLLM flag the simulator does not model: accepted, ignored
        "--sim-gpu", "H100-80GB", *extra,
    ]  # fmt: skip


@contextmanager
def _engine(log: Path, *extra: str, port: int = 0) -> Iterator[str]:
    port = port or free_port()
    side = free_port()
    env = {
        **os.environ,
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(side),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            _serve(port, side, *extra), stdout=out, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    break
            except OSError as error:  # not listening yet, or (dead fault) 503
                if getattr(error, "code", None) == 503:
                    break
                time.sleep(0.05)
        yield url
    finally:
        stop(proc)


@dataclass
class Pair:
    router: str
    prefill: str
    decode_port: int
    tmp: Path

    def verify(self, *decode_faults: str) -> Report:
        """Verify with the decode process restarted on its port with these faults."""
        faults = [a for f in decode_faults for a in ("--sim-fault", f)]
        log = self.tmp / "decode-faults.log"
        with _engine(log, *faults, port=self.decode_port) as decode:
            return run(from_urls(self.router, [self.prefill], [decode]), QUICK)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """The router waits for healthy engines at start: it starts beside a healthy decode, which
    then stops; each test starts a decode with its faults on that port."""
    tmp = tmp_path_factory.mktemp("sim")
    decode_port = free_port()
    with ExitStack() as stack:
        prefill = stack.enter_context(_engine(tmp / "prefill.log"))
        with _engine(tmp / "decode.log", port=decode_port) as decode:
            router = stack.enter_context(_router(_pd_args(prefill, decode), tmp / "router.log"))
        yield Pair(router, prefill, decode_port, tmp)


def _check(report: Report, check_id: str) -> Check:
    return next(c for c in report.checks if c.id == check_id)


def test_verify_passes_and_proves_pd_across_processes(pair: Pair) -> None:
    report = pair.verify()
    assert report.passed and report.pd_proven, [(c.id, c.summary) for c in report.checks]
    assert _check(report, "pd-kv-transfer").status is Status.passed
    # the link table's H100 network (ib-ndr, 50 GB/s) times the transfers: an RDMA speed
    assert _check(report, "pd-kv-bandwidth").status is Status.passed


def test_it_says_it_is_a_simulator(pair: Pair) -> None:
    with urllib.request.urlopen(f"{pair.prefill}/v1/models", timeout=5) as response:
        (card,) = json.load(response)["data"]
    assert card["id"] == MODEL and card["owned_by"] == "pd-stack-simulator"
    with urllib.request.urlopen(f"{pair.prefill}/metrics", timeout=5) as response:
        page = response.read().decode()
    assert 'pdstack_simulator_info{model="meta-llama/Llama-3.1-8B-Instruct",gpu="H100-80GB"' in page
    assert (
        (pair.tmp / "prefill.log")
        .read_text()
        .startswith(f"pd-stack simulator (not vLLM): {MODEL} on H100-80GB, TP 1/PP 1, port ")
    )


def test_decode_recomputing_fails_kv_transfer(pair: Pair) -> None:
    report = pair.verify("recompute")
    assert _check(report, "pd-kv-transfer").status is Status.failed and not report.passed


def test_lost_transfers_fail_kv_transfer(pair: Pair) -> None:
    kv = _check(pair.verify("lose-transfers"), "pd-kv-transfer")
    assert kv.status is Status.failed
    assert "vllm:nixl_num_failed_transfers on " in kv.summary


def test_slow_kv_warns_on_bandwidth(pair: Pair) -> None:
    report = pair.verify("slow-kv=0.5")
    bandwidth = _check(report, "pd-kv-bandwidth")
    assert bandwidth.status is Status.warned, bandwidth.summary
    assert report.pd_proven


def test_a_dead_engine_fails_the_health_check(pair: Pair) -> None:
    report = pair.verify("dead")
    health = _check(report, "engines-health")
    assert health.status is Status.failed and "decode" in health.summary, health.summary
    assert not report.passed


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_it_promptly_with_exit_0(tmp_path: Path, signum: int) -> None:
    for _ in range(5):  # a port free a moment ago may be taken by another suite on the host
        port = free_port()
        proc = subprocess.Popen(
            _serve(port, free_port()), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        banner = proc.stdout.readline()  # printed once it listens
        if "Address already in use" not in banner:
            break
        stop(proc)
    try:
        assert banner.startswith("pd-stack simulator (not vLLM): ") and f"port {port}" in banner
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)


def test_other_connectors_are_refused_with_exit_2() -> None:
    mooncake = '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_both"}'
    argv = [*_serve(free_port(), free_port()), "--kv-transfer-config", mooncake]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "the simulator models NixlConnector and LMCacheConnectorV1 only" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("melt", "--sim-fault melt: no such fault"),
        ("slow-kv", "--sim-fault slow-kv: write it as slow-kv=SECONDS"),
        ("slow-kv=soon", "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_fault_is_refused_with_exit_2(fault: str, message: str) -> None:
    argv = [*_serve(free_port(), free_port()), "--sim-fault", fault]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
