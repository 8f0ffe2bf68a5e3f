"""The chart's vllm-router arguments, checked by the real vllm-router 0.1.17 (PyPI wheel,
pinned in the test extra): its own argument parser reads what the chart rendered, and the
binary starts on loopback with static URLs.

The wheel installs the console script `vllm-router` (vllm_router.launch_router:main): Python
argparse (vllm_router.launch_router.parse_router_args + RouterArgs._validate_router_args) in
front of the Rust router (vllm_router_rs). Parsing therefore needs no network and no workers.
"""

from __future__ import annotations

import http.server
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# A plain import: the test extra pins vllm-router, so a missing package fails the suite.
from vllm_router import launch_router  # type: ignore[import-untyped]  # noqa: E402

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import ASSETS, CI, Render, container, server

VLLM_ROUTER_FILES = {
    "nixl-k8s": ASSETS / "values-17-nixl-vllm-router.yaml",
    "xpyd-k8s": ASSETS / "values-18-nixl-xpyd.yaml",
    "mooncake-k8s": ASSETS / "values-20-mooncake.yaml",
    "p2pnccl-static": CI / "p2pnccl-static-router-values.yaml",
    "nixl-static-explicit": CI / "nixl-rdma-hetero-tp-values.yaml",
    "nixl-dp-k8s": CI / "nixl-dp-recompute-values.yaml",
    "mooncake-static": CI / "mooncake-static-values.yaml",
}


def test_pinned_version() -> None:
    from importlib.metadata import version

    assert version("vllm-router") == "0.1.17"


@pytest.fixture(scope="module")
def router_args(helm4: Helm, rendered: Render) -> dict[str, list[str]]:
    result = {}
    for name, path in VLLM_ROUTER_FILES.items():
        router = container(rendered(helm4, path), "pd-deployment-router")
        assert router["command"] == ["vllm-router"]
        result[name] = router["args"]
    return result


def parse(args: list[str]) -> Any:  # vllm_router.router_args.RouterArgs
    parsed = launch_router.parse_router_args(args)
    parsed._validate_router_args()
    return parsed


@pytest.mark.parametrize("name", sorted(VLLM_ROUTER_FILES))
def test_real_parser_accepts_rendered_args(router_args: dict[str, list[str]], name: str) -> None:
    parsed = parse(router_args[name])
    assert parsed.vllm_pd_disaggregation is True
    assert parsed.host == "0.0.0.0" and parsed.port == 8000
    assert parsed.prometheus_host == "0.0.0.0"


def test_real_parser_rejects_what_it_does_not_know(router_args: dict[str, list[str]]) -> None:
    """The check above is meaningful: the same parser refuses an unknown flag or a bad policy."""
    with pytest.raises(SystemExit):
        launch_router.parse_router_args([*router_args["nixl-k8s"], "--pd-disaggregation"])
    with pytest.raises(SystemExit):
        launch_router.parse_router_args([*router_args["nixl-k8s"], "--decode-policy", "least"])


def test_k8s_discovery_nixl(router_args: dict[str, list[str]]) -> None:
    args = router_args["nixl-k8s"]
    assert args == [
        "--host", "0.0.0.0", "--port", "8000", "--vllm-pd-disaggregation",
        "--service-discovery", "--service-discovery-namespace", "default",
        "--service-discovery-port", "8000",
        "--prefill-selector", "app.kubernetes.io/instance=pd",
        "app.kubernetes.io/component=serving-engine", "pd-stack.io/role=prefill",
        "--decode-selector", "app.kubernetes.io/instance=pd",
        "app.kubernetes.io/component=serving-engine", "pd-stack.io/role=decode",
        "--kv-connector", "nixl", "--policy", "cache_aware",
        "--prefill-policy", "cache_aware", "--decode-policy", "round_robin",
        "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
    ]  # fmt: skip
    parsed = parse(args)
    assert parsed.service_discovery is True
    assert parsed.service_discovery_namespace == "default"
    assert parsed.service_discovery_port == 8000
    assert parsed.prefill_selector == {
        "app.kubernetes.io/instance": "pd",
        "app.kubernetes.io/component": "serving-engine",
        "pd-stack.io/role": "prefill",
    }
    assert parsed.decode_selector["pd-stack.io/role"] == "decode"
    assert (parsed.prefill_policy, parsed.decode_policy) == ("cache_aware", "round_robin")
    assert parsed.kv_connector == "nixl" and parsed.prometheus_port == 29000


def test_selectors_match_the_engine_pods(helm4: Helm, rendered: Render) -> None:
    objects = rendered(helm4, VLLM_ROUTER_FILES["xpyd-k8s"])
    args = container(objects, "pd-deployment-router")["args"]
    parsed = parse(args)
    for pool, selector in (
        ("llama-prefill", parsed.prefill_selector),
        ("llama-decode", parsed.decode_selector),
    ):
        labels = manifests.find(objects, "Deployment", f"pd-{pool}-deployment-vllm")["spec"][
            "template"
        ]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    prefill_labels = manifests.find(objects, "Deployment", "pd-llama-prefill-deployment-vllm")[
        "spec"
    ]["template"]["metadata"]["labels"]
    assert not parsed.decode_selector.items() <= prefill_labels.items()
    # Kubernetes discovery needs to read pods in the namespace, and nothing more.
    role = manifests.find(objects, "Role", "pd-pod-reader")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    assert manifests.find(objects, "RoleBinding", "pd-router-pod-reader")


def test_static_urls_parse_to_the_pool_services(router_args: dict[str, list[str]]) -> None:
    parsed = parse(router_args["mooncake-static"])
    assert parsed.prefill_urls == [("http://pd-mc-prefill-engine-service:80", 9998)]
    assert parsed.decode_urls == ["http://pd-mc-decode-engine-service:80"]
    assert parsed.kv_connector == "mooncake" and parsed.service_discovery is False
    parsed = parse(router_args["nixl-static-explicit"])
    assert parsed.prefill_urls == [("http://pd-prefill-tp2-engine-service:80", None)]
    assert (parsed.prefill_policy, parsed.decode_policy) == ("random", "consistent_hash")
    assert parsed.prometheus_port == 29100
    parsed = parse(router_args["p2pnccl-static"])
    assert parsed.vllm_discovery_address == "0.0.0.0:30001"
    assert parsed.decode_urls == ["http://pd-d-engine-service:80"]
    assert parsed.policy == "round_robin"


def test_mooncake_k8s(router_args: dict[str, list[str]]) -> None:
    parsed = parse(router_args["mooncake-k8s"])
    assert parsed.kv_connector == "mooncake"
    # The router reads each prefill pod's bootstrap port from this annotation (fixed name).
    assert parsed.bootstrap_port_annotation == "vllm.ai/bootstrap-port"


def test_static_router_has_no_rbac(helm4: Helm, rendered: Render) -> None:
    objects = rendered(helm4, VLLM_ROUTER_FILES["mooncake-static"])
    kinds = {obj["kind"] for obj in objects}
    assert "Role" not in kinds and "RoleBinding" not in kinds


# ---- Starting the real binary ------------------------------------------------------------


class _StubWorkerHandler(http.server.BaseHTTPRequestHandler):
    """A test double of a vLLM engine that only answers GET (/health, /metrics) with 200."""

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub_workers() -> Iterator[list[str]]:
    servers = [
        http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StubWorkerHandler) for _ in range(2)
    ]
    for stub in servers:
        threading.Thread(target=stub.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    for stub in servers:
        stub.shutdown()
        stub.server_close()


def _loopback(args: list[str], prefill: str, decode: str, port: int, metrics: int) -> list[str]:
    """The rendered arguments with every address moved to loopback (and nothing else changed)."""
    out = list(args)
    out[out.index("--host") + 1] = "127.0.0.1"
    out[out.index("--port") + 1] = str(port)
    out[out.index("--prometheus-host") + 1] = "127.0.0.1"
    out[out.index("--prometheus-port") + 1] = str(metrics)
    out[out.index("--prefill") + 1] = prefill
    out[out.index("--decode") + 1] = decode
    return out


def test_router_starts_with_static_urls(
    router_args: dict[str, list[str]], stub_workers: list[str], tmp_path: Path
) -> None:
    binary = Path(sys.executable).parent / "vllm-router"
    assert binary.is_file(), "the vllm-router console script is missing: make setup"
    prefill, decode = stub_workers
    rendered = router_args["nixl-static-explicit"]

    def command(port: int, metrics: int) -> list[str]:
        args = _loopback(rendered, prefill, decode, port, metrics)
        assert all("127.0.0.1" in a for a in args if a.startswith("http"))
        return [str(binary), *args]

    def readiness(port: int) -> str:
        return f"http://127.0.0.1:{port}/readiness"

    with server(command, readiness, tmp_path / "router.log") as (_, port, _):
        with urllib.request.urlopen(readiness(port), timeout=2) as r:
            status, body = r.status, r.read().decode()
        assert status == 200 and '"prefill":{"healthy":1,"total":1}' in body
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=2) as r:
            assert r.status == 200
        # The chart's `helm test` hook asks the router Service for /health.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            assert r.status == 200
