"""The preflight probe: runs INSIDE the engine image, on a node a pool would land on (pdctl
preflight mounts this file from a ConfigMap and runs it with the image's python). Standard library
plus the image's own `nixl`; it never imports pdctl.

Two roles, one pod each:
- target (on a prefill pool's node): fills a buffer of --size-bytes with a pattern, registers it
  with a NIXL agent on the UCX backend, and publishes the agent's metadata and the buffer's
  address over a small HTTP side channel (--port); it waits for the initiator's notification.
- initiator (on a decode pool's node): fetches that metadata, READs the buffer with NIXL as vLLM's
  NixlConnector does (decode pulls the KV cache from prefill), times each transfer, checks the
  bytes that arrived, and notifies the target.

Both print one line `PDCTL-PREFLIGHT {json}` last: the role, GPUs (`nvidia-smi -L`), RDMA devices
(/sys/class/infiniband), network interfaces, UCX_* settings, whether IPC_LOCK is held and the
locked-memory limit, whether `import nixl` works and its UCX backend starts, the UCX version, the
transports UCX chose (UCX_PROTO_INFO tables, when UCX prints them) and, for the initiator, the
transfer: bytes, seconds per iteration, GB/s (1e9 bytes per second). Exit 0 when the role's work
succeeded, 1 otherwise (the report says why).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import http.server
import importlib
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from typing import Any

MARKER = "PDCTL-PREFLIGHT "
CAP_IPC_LOCK = 14
# A UCX_PROTO_INFO table cell naming a transport and its device: "tcp/eth0", "rc_mlx5/mlx5_0:1",
# "cuda_ipc/cuda", "cma/memory", "sysv/memory", "self/memory".
_TRANSPORT = re.compile(r"\b([a-z][a-z0-9_]*)/([A-Za-z0-9_.:-]+)")
_PROTO_LINE = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+\|")  # "[1700000000.1] [host:pid:0] | ... |"


# ---- what the node and the image offer --------------------------------------------------------


def _command_lines(argv: list[str]) -> tuple[list[str], str | None]:
    if shutil.which(argv[0]) is None:
        return [], f"{argv[0]} not found"
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [], f"{' '.join(argv)}: {error}"
    if run.returncode != 0:
        return [], f"{' '.join(argv)} exited {run.returncode}: {run.stderr.strip()[:200]}"
    return [line for line in run.stdout.splitlines() if line.strip()], None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def rdma_devices(root: str = "/sys/class/infiniband") -> list[dict[str, Any]]:
    """Each RDMA device with its ports: state, link layer (InfiniBand or Ethernet = RoCE), rate."""
    devices = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        ports_dir = os.path.join(root, name, "ports")
        ports = []
        for port in sorted(os.listdir(ports_dir)) if os.path.isdir(ports_dir) else []:
            base = os.path.join(ports_dir, port)
            ports.append(
                {
                    "port": port,
                    "state": _read(os.path.join(base, "state")),
                    "link_layer": _read(os.path.join(base, "link_layer")),
                    "rate": _read(os.path.join(base, "rate")),
                }
            )
        devices.append({"name": name, "ports": ports})
    return devices


def net_interfaces(root: str = "/sys/class/net") -> list[str]:
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def capabilities() -> dict[str, Any]:
    """Whether the process holds CAP_IPC_LOCK (effective set) and its RLIMIT_MEMLOCK."""
    status = _read("/proc/self/status") or ""
    match = re.search(r"^CapEff:\s*([0-9a-fA-F]+)$", status, re.MULTILINE)
    ipc_lock = bool(int(match.group(1), 16) >> CAP_IPC_LOCK & 1) if match else None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {
        "ipc_lock": ipc_lock,
        "memlock_bytes": None if soft == resource.RLIM_INFINITY else soft,
    }


def ucx_version() -> tuple[str | None, str | None]:
    """The UCX version of the libucp loaded in this process (NIXL's), and its path."""
    maps = _read("/proc/self/maps") or ""
    paths = sorted({line.split()[-1] for line in maps.splitlines() if "libucp" in line})
    for path in paths:
        try:
            function = ctypes.CDLL(path).ucp_get_version_string
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_char_p
        return str(function().decode()), path
    return None, None


def transports(text: str) -> list[dict[str, Any]]:
    """What the UCX_PROTO_INFO tables say UCX selected: for each scope (intra-node, inter-node;
    "self" tables, an agent with itself, are left out) and operation (remote memory read/write,
    active message ...), the transport/device pairs, in order of first mention."""
    tables: dict[tuple[str, str], list[str]] = {}
    scope = operation = ""
    for line in text.splitlines():
        if not _PROTO_LINE.match(line) or line.count("|") < 2:
            continue
        cells = [cell.strip() for cell in line[line.index("|") + 1 : line.rindex("|")].split("|")]
        if len(cells) == 1:
            header = re.search(r"\b(self|intra-node|inter-node) cfg#\d+$", cells[0])
            if header:
                scope, operation = header.group(1), ""
            else:
                operation = cells[0]
        elif len(cells) >= 3 and scope and operation and scope != "self":
            found = tables.setdefault((scope, operation), [])
            for tl, device in _TRANSPORT.findall(cells[-1]):
                if f"{tl}/{device}" not in found:
                    found.append(f"{tl}/{device}")
    return [
        {"scope": scope, "operation": operation, "transports": found}
        for (scope, operation), found in tables.items()
        if found
    ]


def environment() -> dict[str, Any]:
    gpus, gpu_error = _command_lines(["nvidia-smi", "-L"])
    return {
        "hostname": socket.gethostname(),
        "node": os.environ.get("NODE_NAME"),
        "pod_ip": os.environ.get("POD_IP"),
        "python": sys.version.split()[0],
        "gpus": gpus,
        "gpu_error": gpu_error,
        "rdma_devices": rdma_devices(),
        "net_interfaces": net_interfaces(),
        "ucx_env": {key: value for key, value in sorted(os.environ.items()) if key[:4] == "UCX_"},
        "capabilities": capabilities(),
    }


# ---- NIXL -------------------------------------------------------------------------------------


class Buffer:
    """The bytes to move: host memory (DRAM), or GPU memory (VRAM) through torch when asked."""

    def __init__(self, size: int, memory: str):
        self.size, self.memory = size, memory
        self.tensor: Any = None
        if memory == "VRAM":
            torch = importlib.import_module("torch")
            self.tensor = torch.zeros(size, dtype=torch.uint8, device="cuda")
            self.address = int(self.tensor.data_ptr())
            self.device = int(self.tensor.get_device())
        else:
            self.host = ctypes.create_string_buffer(size)
            self.address, self.device = ctypes.addressof(self.host), 0

    def fill(self, seed: int) -> int:
        """Fill with a pattern; its CRC-32."""
        block = bytes((seed + i * 31) % 251 for i in range(1 << 16))
        data = (block * (self.size // len(block) + 1))[: self.size]
        if self.tensor is not None:
            torch = importlib.import_module("torch")
            self.tensor.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        else:
            ctypes.memmove(self.address, data, self.size)
        return zlib.crc32(data)

    def crc(self) -> int:
        if self.tensor is not None:
            return zlib.crc32(self.tensor.cpu().numpy().tobytes())
        return zlib.crc32(ctypes.string_at(self.address, self.size))


def pick_memory(asked: str) -> str:
    if asked != "auto":
        return asked.upper()
    try:
        torch = importlib.import_module("torch")
        return "VRAM" if torch.cuda.is_available() else "DRAM"
    except Exception:
        return "DRAM"


def start_agent(name: str, report: dict[str, Any]) -> Any:
    """A NIXL agent with the UCX backend; None (with the reason in the report) when it fails."""
    nixl: dict[str, Any] = {"importable": False, "ucx_backend": False}
    report["nixl"] = nixl
    try:
        api = importlib.import_module("nixl._api")
    except Exception as error:  # ImportError, or a broken native library
        nixl["error"] = f"import nixl failed: {type(error).__name__}: {error}"
        return None
    nixl["importable"] = True
    nixl["version"] = _distribution_version(("nixl", "nixl-cu13", "nixl-cu12"))
    try:
        agent = api.nixl_agent(name, api.nixl_agent_config(backends=["UCX"]))
    except Exception as error:
        nixl["error"] = f"NIXL agent failed to start: {type(error).__name__}: {error}"
        return None
    nixl["plugins"] = list(agent.get_plugin_list())
    nixl["ucx_backend"] = "UCX" in agent.backends
    version, path = ucx_version()
    report["ucx"] = {"version": version, "library": path}
    if not nixl["ucx_backend"]:
        nixl["error"] = "NIXL has no UCX backend (plugins: " + ", ".join(nixl["plugins"]) + ")"
        return None
    return agent


def _distribution_version(names: tuple[str, ...]) -> str | None:
    from importlib import metadata

    for name in names:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def _wait(agent: Any, handle: Any, deadline: float) -> None:
    while True:
        state = agent.check_xfer_state(handle)
        if state == "DONE":
            return
        if state == "ERR":
            raise RuntimeError("the NIXL transfer failed (state ERR)")
        if time.monotonic() > deadline:
            raise TimeoutError("the NIXL transfer did not finish in time")


# ---- the two roles ----------------------------------------------------------------------------


def run_target(args: argparse.Namespace, report: dict[str, Any]) -> bool:
    agent = start_agent(f"pdctl-preflight-target-{socket.gethostname()}", report)
    if agent is None:
        return False
    memory = pick_memory(args.memory)
    buffer = Buffer(args.size_bytes, memory)
    crc = buffer.fill(seed=7)
    agent.register_memory([(buffer.address, buffer.size, buffer.device, "")], memory)
    published = {
        "agent": agent.name,
        "metadata": base64.b64encode(agent.get_agent_metadata()).decode(),
        "descriptor": [buffer.address, buffer.size, buffer.device],
        "memory": memory,
        "crc32": crc,
    }
    body = json.dumps(published).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/metadata" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if self.path == "/metadata" else b"{}")

        def log_message(self, format: str, *values: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("", args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"target: serving metadata on port {args.port}", flush=True)
    report["transfer"] = {"bytes": buffer.size, "memory": memory, "role": "source"}
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            notes = agent.get_new_notifs()
            messages = [m for values in notes.values() for m in values]
            if any(m.startswith(b"pdctl-preflight-done") for m in messages):
                report["transfer"]["initiator_done"] = True
                return True
            time.sleep(0.05)
        report["error"] = f"no initiator finished within {args.timeout:g}s"
        return False
    finally:
        server.shutdown()


def _fetch(target: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{target}/metadata", timeout=5) as reply:
                data: dict[str, Any] = json.loads(reply.read())
                return data
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_initiator(args: argparse.Namespace, report: dict[str, Any]) -> bool:
    agent = start_agent(f"pdctl-preflight-initiator-{socket.gethostname()}", report)
    if agent is None:
        return False
    try:
        remote = _fetch(args.target, args.timeout)
    except OSError as error:
        report["error"] = f"cannot reach the target's side channel {args.target}: {error}"
        return False
    memory = pick_memory(args.memory)
    size = int(remote["descriptor"][1])
    buffer = Buffer(size, memory)
    agent.register_memory([(buffer.address, size, buffer.device, "")], memory)
    name = agent.add_remote_agent(base64.b64decode(remote["metadata"]))
    local = agent.get_xfer_descs([(buffer.address, size, buffer.device)], memory)
    far = agent.get_xfer_descs([tuple(int(v) for v in remote["descriptor"])], remote["memory"])
    seconds = []
    deadline = time.monotonic() + args.timeout
    for _ in range(args.iterations + 1):  # the first one sets up the connection: not counted
        handle = agent.initialize_xfer(args.op.upper(), local, far, name)
        start = time.perf_counter()
        state = agent.transfer(handle)
        if state == "ERR":
            report["error"] = "the NIXL transfer could not be posted (state ERR)"
            return False
        _wait(agent, handle, deadline)
        seconds.append(time.perf_counter() - start)
        agent.release_xfer_handle(handle)
    seconds = seconds[1:]
    verified = args.op != "read" or buffer.crc() == int(remote["crc32"])
    best, median = min(seconds), statistics.median(seconds)
    report["transfer"] = {
        "operation": args.op.upper(),
        "backend": "UCX",
        "memory": memory,
        "remote_memory": remote["memory"],
        "bytes": size,
        "iterations": len(seconds),
        "seconds": [round(s, 6) for s in seconds],
        "gbps": round(size / median / 1e9, 3),
        "best_gbps": round(size / best / 1e9, 3),
        "verified": verified,
    }
    agent.send_notif(name, b"pdctl-preflight-done")
    time.sleep(0.5)  # let the notification leave before the agent goes away
    if not verified:
        report["error"] = "the bytes read differ from the target's (CRC-32 mismatch)"
    return verified


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("role", choices=["target", "initiator"])
    parser.add_argument("--size-bytes", type=int, default=256 << 20)
    parser.add_argument("--port", type=int, default=5599, help="target: side-channel port")
    parser.add_argument("--target", help="initiator: the target's HOST:PORT")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--op", choices=["read", "write"], default="read")
    parser.add_argument("--memory", choices=["auto", "dram", "vram"], default="auto")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    if args.role == "initiator" and not args.target:
        parser.error("the initiator needs --target HOST:PORT")

    # UCX prints the protocols it selects (transport and device) with UCX_PROTO_INFO=y into its
    # log: sent to a file of our own, then parsed and echoed.
    log_file = os.path.join(tempfile.mkdtemp(prefix="pdctl-preflight-"), "ucx.log")
    os.environ.setdefault("UCX_PROTO_INFO", "y")
    os.environ.setdefault("UCX_LOG_FILE", log_file)
    report: dict[str, Any] = {"role": args.role, **environment()}
    started = time.monotonic()
    try:
        ok = (run_target if args.role == "target" else run_initiator)(args, report)
    except Exception as error:
        report["error"] = f"{type(error).__name__}: {error}"
        ok = False
    ucx_log = _read(os.environ["UCX_LOG_FILE"]) or ""
    if ucx_log:
        sys.stdout.write(ucx_log + "\n")
    report["transports"] = transports(ucx_log)
    report["ok"] = ok
    report["elapsed"] = round(time.monotonic() - started, 3)
    sys.stdout.write(MARKER + json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
