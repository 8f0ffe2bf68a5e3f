"""pdctl.cluster (the kubernetes client) and pdctl.release.release_pods against the Kubernetes API
server test double (tests/doubles/kube_api.py): pods with the reason they are not Ready, events,
logs, port-forwarding, and what happens without a cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pdctl import cluster, naming
from pdctl.errors import EnvironmentProblem
from pdctl.release import release_pods
from tests.doubles.kube_api import KubeAPIDouble, serving

NAMES = naming.Release("pd", "default")


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeAPIDouble]:
    """The API double with one GPU (this module's own, over conftest's eight)."""
    with serving(tmp_path, monkeypatch, gpus=1) as api:
        yield api


def make_pod(
    api: KubeAPIDouble,
    name: str,
    labels: dict[str, str],
    image: str = "app:1",
    gpus: int = 0,
    ports: list[dict[str, Any]] | None = None,
) -> None:
    resources = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    main = {"name": "main", "image": image, "resources": resources, "ports": ports or []}
    api.state.create(
        "pods",
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [main]},
        },
    )


def engine(role: str, pool: str) -> dict[str, str]:
    return {**NAMES.pool_selector(pool), naming.ROLE: role}


def test_pods_say_why_they_are_not_ready(kube: KubeAPIDouble) -> None:
    kube.fail_pull("engine:missing")
    kube.crash("engine:broken", ["Loading weights", "torch.OutOfMemoryError: CUDA out of memory"])
    make_pod(kube, "ok", engine("prefill", "p"), gpus=1)
    make_pod(kube, "no-gpu", engine("prefill", "p"), gpus=1)  # the node's one GPU is taken
    make_pod(kube, "no-image", engine("decode", "d"), image="engine:missing")
    make_pod(kube, "crashing", engine("decode", "d"), image="engine:broken")
    kube_cluster = cluster.connect()
    pods = {pod.name: pod for pod in kube_cluster.pods("default", NAMES.engine_selector)}
    assert pods["ok"].ready and pods["ok"].phase == "Running" and pods["ok"].reason is None
    assert (pods["no-gpu"].phase, pods["no-gpu"].reason) == ("Pending", "Unschedulable")
    assert "1 Insufficient nvidia.com/gpu" in (pods["no-gpu"].message or "")
    assert pods["no-image"].reason == "ImagePullBackOff" and pods["no-image"].stuck
    assert (pods["crashing"].reason, pods["crashing"].restarts) == ("CrashLoopBackOff", 4)
    assert kube_cluster.logs("default", "crashing", lines=1) == [
        "torch.OutOfMemoryError: CUDA out of memory"
    ]
    warnings = [(e.reason, e.name) for e in kube_cluster.events("default")]
    assert ("FailedScheduling", "no-gpu") in warnings
    assert ("BackOff", "crashing") in warnings
    assert all(e.type == "Warning" for e in kube_cluster.events("default"))


def test_release_pods_by_role(kube: KubeAPIDouble) -> None:
    kube.gpus = 8
    kube.crash("engine:broken", ["boom"])
    make_pod(kube, "pd-router-1", NAMES.router_selector)
    make_pod(kube, "pd-prefill-b", engine("prefill", "p"))
    make_pod(kube, "pd-prefill-a", engine("prefill", "p"), image="engine:broken")
    ports = [
        {"name": "http", "containerPort": 8000},
        {"name": naming.VLLM_PORT, "containerPort": 8200},
    ]
    make_pod(kube, "pd-decode-1", engine("decode", "d"), ports=ports)
    make_pod(kube, "other-release", {**naming.Release("other").router_selector})
    found = release_pods("pd", "default")
    assert {key: [pod.name for pod in pods] for key, pods in found.items()} == {
        "router": ["pd-router-1"],
        "prefill": ["pd-prefill-b", "pd-prefill-a"],  # Ready first
        "decode": ["pd-decode-1"],
        "both": [],
    }
    # Named container ports, which verify reads vLLM's port from behind the llm-d sidecar.
    assert found["decode"][0].ports == {"http": 8000, naming.VLLM_PORT: 8200}


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        self._answer({"path": self.path})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer({"path": self.path, "echo": json.loads(body)})

    def _answer(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_port_forward_reaches_the_pod_port(kube: KubeAPIDouble) -> None:
    make_pod(kube, "pd-router-1", NAMES.router_selector)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kube.forward("pd-router-1", 8000, server.server_address[1])
    try:
        with cluster.port_forward("default", "pd-router-1", 8000) as url:
            assert url.startswith("http://127.0.0.1:")
            with urllib.request.urlopen(f"{url}/health", timeout=5) as reply:
                assert json.load(reply) == {"path": "/health"}
            body = json.dumps({"prompt": "x" * 100_000}).encode()  # many WebSocket frames
            request = urllib.request.Request(
                f"{url}/v1/completions", body, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=5) as reply:
                assert json.load(reply)["echo"] == {"prompt": "x" * 100_000}
    finally:
        server.shutdown()
    assert any("/pods/pd-router-1/portforward?ports=8000" in r for r in kube.requests)


def test_no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(EnvironmentProblem, match="no cluster configured"):
        cluster.connect()


def test_help_does_not_import_the_kubernetes_client() -> None:
    code = (
        "import sys\n"
        "from pdctl.cli.app import app\n"
        "try:\n"
        "    app(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "for command in ('deploy', 'status', 'uninstall'):\n"
        "    try:\n"
        "        app([command, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    for option in ("--create-namespace", "--dry-run", "--delete-data"):
        assert option in run.stdout
