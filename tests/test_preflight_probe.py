"""The preflight probe script (pdctl/preflight/probe.py) as the engine pods run it: the REAL NIXL
wheel (nixl-cu13, `make setup` installs it) moves a KV-sized buffer between a target and an
initiator process over loopback, host (DRAM) memory, UCX backend; and what the probe reads from a
node (UCX_PROTO_INFO tables, /sys/class/infiniband) and says when the image has no nixl."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pdctl.preflight import probe
from pdctl.preflight.orchestrate import report_line

PROBE = Path(probe.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_probe(args: list[str], python: list[str] | None = None) -> tuple[int, dict[str, Any]]:
    run = subprocess.run(
        [*(python or [sys.executable]), str(PROBE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("UCX_")},
    )
    report = report_line(run.stdout.splitlines())
    assert report is not None, run.stdout[-2000:] + run.stderr[-2000:]
    return run.returncode, report


@pytest.mark.skipif(
    importlib.util.find_spec("nixl") is None, reason="nixl is not installed (make setup does it)"
)
def test_real_nixl_reads_a_kv_sized_buffer_over_loopback() -> None:
    size, port = 32 << 20, free_port()
    target = subprocess.Popen(
        [sys.executable, str(PROBE), "target", "--port", str(port), "--size-bytes", str(size)]
        + ["--timeout", "90", "--memory", "dram"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("UCX_")},
    )
    try:
        code, report = run_probe(
            ["initiator", "--target", f"127.0.0.1:{port}", "--iterations", "3"]
            + ["--timeout", "90", "--memory", "dram"]
        )
        out, err = target.communicate(timeout=60)
    finally:
        target.kill()
    assert code == 0 and report["ok"], report
    transfer = report["transfer"]
    assert (transfer["operation"], transfer["memory"], transfer["backend"]) == (
        "READ",
        "DRAM",
        "UCX",
    )
    assert transfer["bytes"] == size and transfer["iterations"] == 3
    assert transfer["verified"]  # the CRC-32 of what arrived is the target's
    assert transfer["gbps"] > 0 and all(s > 0 for s in transfer["seconds"])
    assert report["nixl"]["importable"] and report["nixl"]["ucx_backend"]
    assert report["ucx"]["version"]  # read from the libucp NIXL loaded
    # UCX printed the protocols it chose between the two processes (intra-node here).
    assert report["transports"] and all(t["scope"] == "intra-node" for t in report["transports"])
    target_report = report_line(out.splitlines())
    assert target.returncode == 0 and target_report is not None, err[-2000:]
    assert target_report["transfer"]["initiator_done"]
    print(json.dumps(transfer))  # the figures, for the record (pytest -s)


def test_an_image_without_nixl_is_reported_not_crashed() -> None:
    # -S: no site-packages, so no nixl; what an engine image without NIXL looks like to the probe.
    code, report = run_probe(
        ["target", "--port", str(free_port()), "--size-bytes", "4096", "--timeout", "1"],
        python=[sys.executable, "-S"],
    )
    assert code == 1 and not report["ok"]
    assert not report["nixl"]["importable"]
    assert "import nixl failed" in report["nixl"]["error"]


PROTO_INFO = """\
[1.2] [node-a:19:0]   +---------+-------------+--------------------------+
[1.2] [node-a:19:0]   | pdctl-preflight-initiator inter-node cfg#2   |
[1.2] [node-a:19:0]   | remote memory read by ucp_get* from host memory |
[1.2] [node-a:19:0]   +---------+-------------+--------------------------+
[1.2] [node-a:19:0]   |  Range  | Description |          Config          |
[1.2] [node-a:19:0]   | 0..inf  | zero-copy   | rc_mlx5/mlx5_0:1         |
[1.3] [node-a:19:0]   | pdctl-preflight-initiator self cfg#0   |
[1.3] [node-a:19:0]   | remote memory read by ucp_get* from host memory |
[1.3] [node-a:19:0]   | 0..inf  | zero-copy   | self/memory              |
[1.4] [node-a:19:0]   | pdctl-preflight-initiator inter-node cfg#2   |
[1.4] [node-a:19:0]   | active message by ucp_am_send* from host memory |
[1.4] [node-a:19:0]   |   0..8184 | short | tcp/eth0 |
2026-12-01 NIXL INFO    _api.py:405 Backend UCX was instantiated
"""


def test_transports_are_read_from_the_proto_info_tables() -> None:
    assert probe.transports(PROTO_INFO) == [
        {
            "scope": "inter-node",
            "operation": "remote memory read by ucp_get* from host memory",
            "transports": ["rc_mlx5/mlx5_0:1"],
        },
        {
            "scope": "inter-node",
            "operation": "active message by ucp_am_send* from host memory",
            "transports": ["tcp/eth0"],
        },
    ]


def test_rdma_devices_are_read_from_sysfs(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    assert probe.rdma_devices(str(tmp_path)) == [
        {
            "name": "mlx5_0",
            "ports": [
                {
                    "port": "1",
                    "state": "4: ACTIVE",
                    "link_layer": "InfiniBand",
                    "rate": "400 Gb/sec (4X NDR)",
                }
            ],
        }
    ]
    assert probe.rdma_devices(str(tmp_path / "absent")) == []
