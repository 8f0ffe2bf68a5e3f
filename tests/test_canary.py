"""The PD canary (canary.enabled): what the chart renders for it, and its script, taken from the
rendered ConfigMap and run by python3 as a subprocess (as the Job runs it), against the REAL
vllm-router 0.1.17 in front of engine TEST DOUBLES (tests/doubles/vllm_engine.py: not vLLM),
finding the engine pods through the Kubernetes API TEST DOUBLE (tests/doubles/kube_api.py).

The pods listed by the API double carry the chart's labels and point at the engine doubles on
127.0.0.1 (podIP 127.0.0.1, each double's port as the named container port `http`)."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pdctl import connectors, manifests, naming
from pdctl.helm import Helm
from pdctl.models import links
from pdctl.verify import judge
from tests.doubles.kube_api import KubeAPIDouble
from tests.doubles.router_stack import Stack, free_port, pd_stack
from tests.doubles.vllm_engine import VllmEngineDouble
from tests.helpers import ASSETS, CHART, CI, assert_kube_valid, render_file, write_values

CANARY_VALUES = CI / "nixl-dp-recompute-values.yaml"  # PD pools, a both pool, the canary
RELEASE = naming.Release("pd")
SCRIPT = CHART / "files" / "canary" / "pd_canary.py"
KINDS = {"CronJob", "ConfigMap", "ServiceAccount", "Role", "RoleBinding"}


def canary_objects(objects: list[manifests.Manifest]) -> dict[str, manifests.Manifest]:
    return {o["kind"]: o for o in objects if o["metadata"]["name"] == RELEASE.canary}


# ---- the chart ------------------------------------------------------------------------------


def test_off_by_default(helm4: Helm) -> None:
    objects = render_file(helm4, ASSETS / "values-18-nixl-xpyd.yaml")
    assert not canary_objects(objects)
    assert not [o for o in objects if o["kind"] == "CronJob"]


def test_rendered_objects_pass_kubernetes_and_are_locked_down(helm: Helm) -> None:
    found = canary_objects(render_file(helm, CANARY_VALUES))
    assert set(found) == KINDS
    for version in ("1.29.0", "1.35.0"):
        assert_kube_valid(list(found.values()), version)
    # Least privilege: read pods in the namespace, nothing else.
    assert found["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    ]
    assert found["ServiceAccount"]["automountServiceAccountToken"] is False
    cron = found["CronJob"]["spec"]
    assert cron["schedule"] == "*/5 * * * *" and cron["concurrencyPolicy"] == "Forbid"
    job = cron["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0  # a retry would hide a failed run from kube_job_failed
    pod = job["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["readOnlyRootFilesystem"]
    assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
    assert container["image"] == "vllm/vllm-openai:v0.14.1"  # the prefill pool's
    assert container["command"] == ["python3", "/etc/pd-canary/pd_canary.py"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/etc/pd-canary", "/var/run/secrets/kubernetes.io/serviceaccount"}


def test_config_comes_from_the_tables_and_the_values(helm4: Helm) -> None:
    data = canary_objects(render_file(helm4, CANARY_VALUES))["ConfigMap"]["data"]
    assert data["pd_canary.py"] == SCRIPT.read_text().strip()
    config = json.loads(data["config.json"])
    nixl = connectors.load().connectors["NixlConnector"].metrics
    assert config["connector"] == {
        "name": "NixlConnector",
        "transfer": list(nixl["transfer"]),
        "failures": list(nixl["failures"]),
        "bandwidth": list(nixl["bandwidth"]),
    }
    rule = connectors.load().transfer_evidence
    ((label, value),) = rule["labels"].items()
    assert config["evidence"] == {
        "metric": rule["metric"],
        "label": label,
        "value": value,
        "role": rule["poolRole"],
    }
    # The PD pools only (not the both-role pool), selected as naming selects them.
    assert config["pools"] == [
        {"name": p, "role": r, "selector": naming.selector_text(RELEASE.pool_selector(p))}
        for p, r in (("prefill", "prefill"), ("decode-dp", "decode"))
    ]
    assert config["router"] == f"http://{RELEASE.router_service}:80"
    assert config["model"] == "Qwen/Qwen3-8B" and config["minKvGbps"] == 10


def test_floor_defaults_to_the_link_table(helm4: Helm, tmp_path: Path) -> None:
    text = (ASSETS / "values-18-nixl-xpyd.yaml").read_text() + "canary:\n  enabled: true\n"
    objects = render_file(helm4, write_values(tmp_path, text))
    config = json.loads(canary_objects(objects)["ConfigMap"]["data"]["config.json"])
    assert config["minKvGbps"] == pytest.approx(links.load().minimum_gbps)
    assert config["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_script_names_vllm_counters_as_pdctl_does() -> None:
    spec = importlib.util.spec_from_file_location("pd_canary", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PROMPT_TOKENS == judge.PROMPT_TOKENS
    assert module.GENERATION_TOKENS == judge.GENERATION_TOKENS
    assert (module.LOCAL_COMPUTE, module.LOCAL_CACHE_HIT) == (
        judge.LOCAL_COMPUTE,
        judge.LOCAL_CACHE_HIT,
    )


# ---- the script against the real router, engine doubles and the API double ------------------


@dataclass
class Canary:
    stack: Stack
    kube: KubeAPIDouble
    config: dict[str, Any]
    tmp: Path

    def pod(self, name: str, pool: str, engine: VllmEngineDouble, ready: bool = True) -> None:
        """An engine pod in the API double, as the chart labels it, serving at `engine`."""
        selector = next(p["selector"] for p in self.config["pools"] if p["name"] == pool)
        labels = dict(pair.split("=", 1) for pair in selector.split(","))
        port = int(engine.url.rsplit(":", 1)[1])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "nodeName": "node-1",  # bound already: the double's scheduler leaves it alone
                "containers": [
                    {
                        "name": "vllm",
                        "image": "x",
                        "ports": [{"name": "http", "containerPort": port}],
                    }
                ],
            },
        }
        state = self.kube.state
        with state.lock:
            state.create("pods", "default", pod, reconcile=False)
            conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
            status = {"phase": "Running", "podIP": "127.0.0.1", "conditions": conditions}
            state.set_status("pods", state.objects[("pods", "default", name)], status)

    def run(self, **config: Any) -> tuple[int, dict[str, Any]]:
        path = self.tmp / "config.json"
        path.write_text(json.dumps({**self.config, **config}))
        env = {
            "PD_CANARY_CONFIG": str(path),
            "PD_CANARY_KUBE_API": self.kube.url,
            "PD_CANARY_SA_DIR": str(self.tmp),
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(
            [sys.executable, "-I", str(self.tmp / "pd_canary.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stdout.splitlines()
        assert len(lines) == 1, (done.stdout, done.stderr)
        return done.returncode, json.loads(lines[0])


@pytest.fixture(scope="module")
def rendered_canary(helm4: Helm) -> dict[str, str]:
    data = canary_objects(render_file(helm4, CANARY_VALUES))["ConfigMap"]["data"]
    return {"pd_canary.py": data["pd_canary.py"], "config.json": data["config.json"]}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, KubeAPIDouble]]:
    with pd_stack(tmp_path_factory.mktemp("pd")) as stack, KubeAPIDouble() as kube:
        yield stack, kube


@pytest.fixture
def canary(
    shared: tuple[Stack, KubeAPIDouble], rendered_canary: dict[str, str], tmp_path: Path
) -> Iterator[Canary]:
    stack, kube = shared
    stack.reset()
    for name, text in rendered_canary.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "token").write_text("test-double-token\n")
    config = json.loads(rendered_canary["config.json"])
    # Moved to loopback: the real router's URL and the doubles' model; a fixed floor.
    config.update(router=stack.router, model=stack.decode.model, minKvGbps=3.125)
    config.update(settleSeconds=0, promptWords=200)
    runner = Canary(stack, kube, config, tmp_path)
    runner.pod("prefill-0", "prefill", stack.prefill)
    runner.pod("decode-dp-0", "decode-dp", stack.decode)
    yield runner
    with kube.state.lock:
        for pod in kube.state.list("pods", "default"):
            kube.state.delete("pods", "default", pod["metadata"]["name"])
    assert not kube.problems()
    stack.reset()


def test_healthy_pair_passes(canary: Canary) -> None:
    code, line = canary.run()
    assert (code, line["verdict"]) == (0, "pass"), line
    assert line["canary"] == "pd-stack" and line["release"] == "pd"
    assert line["usage"]["prompt_tokens"] == 200  # the double counts one token per word
    assert line["by_source"]["external_kv_transfer"] == 200
    assert line["kv"]["gbps"] == pytest.approx(300.0, rel=0.01)  # the double's rate
    assert set(line["engines"]) == {"prefill-0", "decode-dp-0"}
    assert any("labelSelector" in r and "model%3Ddecode-dp" in r for r in canary.kube.requests)


def test_every_ready_replica_is_read(canary: Canary) -> None:
    """A second decode replica (idle) and a decode pod that is not ready: the canary reads every
    ready pod of the pool, not one pod behind a Service."""
    spare = VllmEngineDouble("decode-2", canary.stack.prefill.registry).up()
    try:
        canary.pod("decode-dp-1", "decode-dp", spare)
        canary.pod("decode-dp-2", "decode-dp", canary.stack.decode, ready=False)
        code, line = canary.run()
    finally:
        spare.down()
    assert (code, line["verdict"]) == (0, "pass"), line
    assert set(line["engines"]) == {"prefill-0", "decode-dp-0", "decode-dp-1"}
    assert line["engines"]["decode-dp-1"]["generation_tokens"] == 0


def test_decode_recomputing_the_prompt_is_recomputed(canary: Canary) -> None:
    canary.stack.decode.behaviour.recompute = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (2, "recomputed"), line
    assert "decode computed 200 of the 200 prompt tokens itself" in line["reason"]


def test_lost_transfers_are_recomputed_with_the_failures_shown(canary: Canary) -> None:
    canary.stack.decode.behaviour.lose_transfers = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (2, "recomputed"), line
    assert line["failures"] == {"vllm:nixl_num_failed_transfers on decode-dp-0": 1.0}


def test_kv_at_tcp_speed_is_slow(canary: Canary) -> None:
    canary.stack.decode.behaviour.kv_gbps = 0.43
    code, line = canary.run()
    assert (code, line["verdict"]) == (3, "slow"), line
    assert line["kv"]["gbps"] == pytest.approx(0.43, rel=0.01)
    assert "below minKvGbps 3.125" in line["reason"]


def test_without_by_source_the_connector_metrics_decide(canary: Canary) -> None:
    canary.stack.decode.behaviour.prompt_sources = False
    assert canary.run()[1]["verdict"] == "pass"
    canary.stack.decode.behaviour.lose_transfers = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (1, "fail") and "no evidence of a KV transfer" in line[
        "reason"
    ]


def test_router_that_bypasses_prefill_fails(canary: Canary) -> None:
    """The router sends straight to decode (here: the canary's probe goes to decode itself)."""
    code, line = canary.run(router=canary.stack.decode.url)
    assert (code, line["verdict"]) == (1, "fail"), line
    assert "the router did not send the request through prefill" in line["reason"]


def test_unreachable_router_and_missing_pods_fail(canary: Canary) -> None:
    code, line = canary.run(router=f"http://127.0.0.1:{free_port()}")
    assert (code, line["verdict"]) == (1, "fail") and "/v1/completions" in line["reason"]
    pools = copy.deepcopy(canary.config["pools"])
    pools[1]["selector"] += "-gone"
    code, line = canary.run(pools=pools)
    assert (code, line["verdict"]) == (1, "fail")
    assert "no ready pod of pool decode-dp" in line["reason"]


def test_an_aggregated_release_has_no_pd_pair_for_the_canary(tmp_path: Path) -> None:
    """Pools of role both only: canary.enabled is refused by the chart (PD025), as there is no KV
    transfer to prove; validate --render reports it."""
    from typer.testing import CliRunner

    from pdctl.cli.app import app
    from tests.helpers import load_values

    values = load_values(CI / "aggregated-values.yaml")
    values["canary"] = {"enabled": True}
    result = CliRunner().invoke(app, ["validate", "--render", str(write_values(tmp_path, values))])
    assert result.exit_code == 1, result.output
    assert "error PD025 [canary.enabled]" in result.output and "no prefill pool" in result.output
