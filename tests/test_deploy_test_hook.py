"""The chart's `helm test` hook (templates/tests/test-router.yaml): its script, as rendered, run
here with sh and wget against a stub of the router on 127.0.0.1 (a test double that answers
/health and /v1/completions, not a router): it passes on a completion of the served model and
fails, naming why, when the router refuses it or answers without choices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import CHART, TUTORIAL_VALUES, env_of, write_values

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
needs_wget = pytest.mark.skipif(shutil.which("wget") is None, reason="wget is not installed")


class RouterStub:
    """Answers like the router: GET /health, POST /v1/completions (as `mode` says)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                self._reply(200, {"status": "ok"} if self.path == "/health" else {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(
                    {"path": self.path, "body": body, "type": self.headers["Content-Type"]}
                )
                if stub.mode == "error":
                    self._reply(503, {"error": "no decode endpoint"})
                elif stub.mode == "empty":
                    self._reply(200, {"id": "cmpl-1", "choices": []})
                else:
                    choice = {"index": 0, "text": " Hello!", "finish_reason": "length"}
                    self._reply(200, {"id": "cmpl-1", "model": body["model"], "choices": [choice]})

            def _reply(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def router() -> Iterator[RouterStub]:
    stub = RouterStub()
    yield stub
    stub.server.shutdown()


def hook(helm: Helm, values: Path = TUTORIAL_VALUES) -> dict[str, Any]:
    run = helm.run(
        ["template", "pd", str(CHART), "-f", str(values), "-s", "templates/tests/test-router.yaml"]
    )
    assert run.returncode == 0, run.stderr
    (pod,) = manifests.parse(run.stdout)
    return pod


def run_hook(pod: dict[str, Any], router: RouterStub) -> subprocess.CompletedProcess[str]:
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["sh", "-c"]
    env = {**env_of(container), "ROUTER_URL": router.url, "PATH": os.environ["PATH"]}
    return subprocess.run(
        ["sh", "-c", container["command"][2]], env=env, capture_output=True, text=True, timeout=60
    )


def test_hook_keeps_its_hardened_pod(helm: Helm) -> None:
    pod = hook(helm)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    container = pod["spec"]["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    env = env_of(container)
    assert env["ROUTER_URL"] == "http://pd-router-service:80"
    assert env["MODEL"] == MODEL
    assert json.loads(env["REQUEST"]) == {
        "model": MODEL,
        "prompt": "Say hello.",
        "max_tokens": 8,
        "temperature": 0,
    }


@needs_wget
def test_hook_passes_on_a_completion(helm4: Helm, router: RouterStub) -> None:
    run = run_hook(hook(helm4), router)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"ok: a completion of {MODEL} came back through the router" in run.stdout
    (request,) = router.requests
    assert request["path"] == "/v1/completions" and request["type"] == "application/json"
    assert request["body"]["model"] == MODEL


@needs_wget
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("error", "the router did not answer the completion"),
        ("empty", "the router's reply has no completion choices"),
    ],
)
def test_hook_fails_without_a_completion(
    helm4: Helm, router: RouterStub, mode: str, message: str
) -> None:
    router.mode = mode
    run = run_hook(hook(helm4), router)
    assert run.returncode == 1
    assert message in run.stderr


@needs_wget
def test_hook_asks_for_the_served_model_name(
    helm4: Helm, router: RouterStub, tmp_path: Path
) -> None:
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    for pool in values["servingEngineSpec"]["modelSpec"]:
        pool["vllmConfig"]["extraArgs"] = ["--served-model-name", "llama"]
    run = run_hook(hook(helm4, write_values(tmp_path, values)), router)
    assert run.returncode == 0, run.stdout + run.stderr
    assert router.requests[0]["body"]["model"] == "llama"


@needs_wget
def test_hook_without_engine_pools_checks_health_only(
    helm4: Helm, router: RouterStub, tmp_path: Path
) -> None:
    values = {"servingEngineSpec": {"enableEngine": False}}
    run = run_hook(hook(helm4, write_values(tmp_path, values)), router)
    assert run.returncode == 0, run.stdout + run.stderr
    assert router.requests == []
