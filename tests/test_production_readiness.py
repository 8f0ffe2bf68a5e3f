"""Production readiness: secure defaults, probes per pool, drain and grace periods,
PodDisruptionBudgets, topology spread, image pinning; each rendered when on (or by default) and
absent when off, and every render valid for strict Kubernetes 1.29 and 1.35 schemas."""

from __future__ import annotations

import copy
import http.server
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests, naming, pipeline
from pdctl.helm import Helm
from tests.doubles import http_server
from tests.helpers import (
    ASSETS,
    KUBE_VERSIONS,
    TUTORIAL_VALUES,
    assert_kube_valid,
    env_of,
    load_values,
    render_file,
    write_values,
)

RELEASE = naming.Release("pd")
TUTORIAL = load_values(TUTORIAL_VALUES)  # production-stack router, LMCache's tutorial form
NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")  # vllm-router, NIXL, k8s discovery
MULTINODE = load_values(ASSETS / "values-22-llama405b-multinode.yaml")  # LeaderWorkerSet pools
LLMD = load_values(ASSETS / "values-25-llm-d-router.yaml")  # llm-d router: EPP, Envoy, sidecar
DIGEST = "sha256:" + "ab" * 32


def render(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[manifests.Manifest]:
    return render_file(helm, write_values(tmp_path, values))


def findings(tmp_path: Path, values: dict[str, Any]) -> list[tuple[str, str, str]]:
    path = write_values(tmp_path, values, "checked.yaml")
    report = pipeline.validate([str(path)], pipeline.ValidateOptions())
    return [(f.rule, f.key, f.severity.value) for f in report.findings]


def pod_spec(objects: list[manifests.Manifest], deployment: str) -> dict[str, Any]:
    spec: dict[str, Any] = manifests.find(objects, "Deployment", deployment)["spec"]["template"][
        "spec"
    ]
    return spec


def engine(objects: list[manifests.Manifest], pool: str) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(objects, RELEASE.pool_deployment(pool))["containers"][0]
    return container


def pools(values: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = values["servingEngineSpec"]["modelSpec"]
    return found


# ---- secure defaults -------------------------------------------------------------------------


def test_engine_pods_are_hardened_by_default(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, TUTORIAL)
    for spec in pools(TUTORIAL):
        pod = pod_spec(objects, RELEASE.pool_deployment(spec["name"]))
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        context = pod["containers"][0]["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert not {"hostIPC", "hostPID", "hostNetwork"} & set(pod)


def test_capabilities_come_back_only_by_value(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["network"] = {"ipcLock": True}
    values["servingEngineSpec"]["containerSecurityContext"] = {
        "capabilities": {"add": ["SYS_PTRACE"]}
    }
    objects = render(helm4, tmp_path, values)
    rdma, other = (engine(objects, spec["name"]) for spec in pools(values))
    # The user's keys merge with the defaults: ALL stays dropped, the named ones are added.
    assert rdma["securityContext"]["capabilities"] == {
        "add": ["SYS_PTRACE", "IPC_LOCK"],
        "drop": ["ALL"],
    }
    assert other["securityContext"]["capabilities"] == {"add": ["SYS_PTRACE"], "drop": ["ALL"]}
    assert rdma["securityContext"]["allowPrivilegeEscalation"] is False


def test_router_pod_mounts_its_api_token_only_for_discovery(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, NIXL)  # vllm-router, Kubernetes discovery
    pod = pod_spec(objects, RELEASE.router_deployment)
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    (mount,) = pod["containers"][0]["volumeMounts"]
    assert mount == {
        "name": "kube-api-access",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    }
    static = copy.deepcopy(NIXL)
    static["routerSpec"]["vllmRouter"]["serviceDiscovery"] = "static"
    pod = pod_spec(render(helm4, tmp_path, static), RELEASE.router_deployment)
    assert pod["automountServiceAccountToken"] is False
    assert "volumes" not in pod and "volumeMounts" not in pod["containers"][0]
    # llm-d: the endpoint picker watches pods and mounts the token; Envoy does not.
    pod = pod_spec(render(helm4, tmp_path, LLMD), RELEASE.router_deployment)
    assert pod["automountServiceAccountToken"] is False
    epp, envoy = pod["containers"]
    assert mount in epp["volumeMounts"]
    assert all(m["name"] != "kube-api-access" for m in envoy["volumeMounts"])
    assert "kube-api-access" in [v["name"] for v in pod["volumes"]]


def test_hf_token_is_a_file_not_env(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, TUTORIAL)  # hf_token as a string: the chart's Secret
    container = engine(objects, "llama-prefill")
    env = env_of(container)
    assert "HF_TOKEN" not in env
    assert env["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in (
        container["volumeMounts"]
    )
    volume = next(
        v
        for v in pod_spec(objects, RELEASE.pool_deployment("llama-prefill"))["volumes"]
        if v["name"] == "hf-token"
    )
    assert volume["secret"]["secretName"] == RELEASE.secret
    assert volume["secret"]["items"] == [{"key": "hf_token_llama-prefill", "path": "token"}]
    values = copy.deepcopy(NIXL)
    pools(values)[0]["hf_token"] = {"secretName": "hf", "secretKey": "token"}
    for spec in pools(values):  # a model download before the engine starts
        spec["initContainer"] = {"name": "fetch", "image": "busybox:1.36", "mountPvcStorage": True}
    objects = render(helm4, tmp_path, values)
    init = pod_spec(objects, RELEASE.pool_deployment(pools(values)[0]["name"]))["initContainers"][0]
    assert env_of(init)["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in (
        init["volumeMounts"]
    )
    init = pod_spec(objects, RELEASE.pool_deployment(pools(values)[1]["name"]))["initContainers"][0]
    assert "HF_TOKEN_PATH" not in env_of(init)
    volume = next(
        v
        for v in pod_spec(objects, RELEASE.pool_deployment(pools(values)[0]["name"]))["volumes"]
        if v["name"] == "hf-token"
    )
    assert volume["secret"]["secretName"] == "hf"
    assert volume["secret"]["items"] == [{"key": "token", "path": "token"}]
    # No token, no volume and no HF_TOKEN_PATH.
    other = engine(objects, pools(values)[1]["name"])
    assert "HF_TOKEN_PATH" not in env_of(other)
    assert all(m["name"] != "hf-token" for m in other["volumeMounts"])


def test_limits_default_to_requests(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, TUTORIAL)
    resources = engine(objects, "llama-prefill")["resources"]
    assert resources["limits"] == {"cpu": "8", "memory": "30Gi", "nvidia.com/gpu": "1"}
    assert resources["requests"] == resources["limits"]
    values = copy.deepcopy(TUTORIAL)
    pools(values)[0]["limitCPU"] = 16
    values["servingEngineSpec"]["limitsFromRequests"] = True
    resources = engine(render(helm4, tmp_path, values), "llama-prefill")["resources"]
    assert resources["limits"]["cpu"] == "16" and resources["limits"]["memory"] == "30Gi"
    values["servingEngineSpec"]["limitsFromRequests"] = False
    resources = engine(render(helm4, tmp_path, values), "llama-prefill")["resources"]
    assert resources["limits"] == {"cpu": "16", "nvidia.com/gpu": "1"}


def test_images_by_tag_are_pulled_always_and_by_digest_once(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, NIXL)
    for spec in pools(NIXL):
        assert engine(objects, spec["name"])["imagePullPolicy"] == "Always"
    router = pod_spec(objects, RELEASE.router_deployment)["containers"][0]
    assert router["imagePullPolicy"] == "Always"
    test_pod = manifests.find(objects, "Pod", RELEASE.router_test)["spec"]["containers"][0]
    assert test_pod["imagePullPolicy"] == "Always"
    values = copy.deepcopy(NIXL)
    pools(values)[0]["digest"] = DIGEST
    values["routerSpec"]["digest"] = DIGEST
    objects = render(helm4, tmp_path, values)
    pinned = engine(objects, pools(values)[0]["name"])
    assert pinned["image"] == f"vllm/vllm-openai:v0.33.0@{DIGEST}"
    assert pinned["imagePullPolicy"] == "IfNotPresent"
    assert engine(objects, pools(values)[1]["name"])["imagePullPolicy"] == "Always"
    router = pod_spec(objects, RELEASE.router_deployment)["containers"][0]
    assert router["image"].endswith(f"@{DIGEST}") and router["imagePullPolicy"] == "IfNotPresent"
    # The tag still says the vLLM version: the chart's version checks read it.
    values["servingEngineSpec"]["imagePullPolicy"] = "Never"
    assert engine(render(helm4, tmp_path, values), pools(values)[0]["name"])["imagePullPolicy"] == (
        "Never"
    )


def test_digest_must_be_a_sha256(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["digest"] = "sha256:short"
    assert ("SCHEMA", "servingEngineSpec.modelSpec[0].digest", "error") in findings(
        tmp_path, values
    )


# ---- probes, grace period, drain ------------------------------------------------------------


def test_probes_per_pool_over_the_shared_ones(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["startupProbe"] = {"failureThreshold": 300}
    pools(values)[1]["livenessProbe"] = {"periodSeconds": 30, "httpGet": {"path": "/ping"}}
    objects = render(helm4, tmp_path, values)
    first, second = (engine(objects, spec["name"]) for spec in pools(values))
    assert first["startupProbe"]["failureThreshold"] == 300
    assert first["startupProbe"]["periodSeconds"] == 10  # the shared timing stays
    assert second["startupProbe"]["failureThreshold"] == 120
    assert second["livenessProbe"]["periodSeconds"] == 30
    assert second["livenessProbe"]["httpGet"] == {"path": "/ping", "port": "http"}
    assert first["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}


def test_every_container_has_probes_and_cpu_limits(helm4: Helm, tmp_path: Path) -> None:
    for values in (TUTORIAL, NIXL, load_values(ASSETS / "values-19-lmcache-pd.yaml"), LLMD):
        objects = render(helm4, tmp_path, values)
        for obj in objects:
            if obj["kind"] != "Deployment":
                continue
            spec = obj["spec"]["template"]["spec"]
            # Native sidecars (init containers that keep running: llm-d's decode sidecar) too.
            sidecars = [c for c in spec.get("initContainers", []) if c.get("restartPolicy")]
            for container in spec["containers"] + sidecars:
                where = (obj["metadata"]["name"], container["name"])
                assert {"readinessProbe", "livenessProbe"} <= set(container), where
                assert "cpu" in container["resources"]["limits"], where


def test_engines_drain_before_they_stop(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[1]["terminationGracePeriodSeconds"] = 600
    objects = render(helm4, tmp_path, values)
    prefill, decode = (pools(values)[0]["name"], pools(values)[1]["name"])
    assert (
        pod_spec(objects, RELEASE.pool_deployment(prefill))["terminationGracePeriodSeconds"] == 120
    )
    assert (
        pod_spec(objects, RELEASE.pool_deployment(decode))["terminationGracePeriodSeconds"] == 600
    )
    command = engine(objects, prefill)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "python3" and command[1] == "-c"
    assert command[3:] == ["8000", "5", "110", "30"]  # port, delay, budget (grace - 10), hold
    command = engine(objects, decode)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[3:] == ["8000", "5", "590", "0"]  # decode holds no KV for others
    values["servingEngineSpec"]["drain"] = {"enabled": False}
    objects = render(helm4, tmp_path, values)
    assert "lifecycle" not in engine(objects, prefill)


def test_zero_seconds_are_taken_as_given(helm4: Helm, tmp_path: Path) -> None:
    """0 is a value the schema allows, not a request for the default."""
    values = copy.deepcopy(NIXL)
    values["servingEngineSpec"] |= {
        "terminationGracePeriodSeconds": 0,
        "drain": {"delaySeconds": 0},
    }
    values["routerSpec"] |= {"terminationGracePeriodSeconds": 0, "drain": {"delaySeconds": 0}}
    objects = render(helm4, tmp_path, values)
    prefill = pools(values)[0]["name"]
    assert pod_spec(objects, RELEASE.pool_deployment(prefill))["terminationGracePeriodSeconds"] == 0
    command = engine(objects, prefill)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[3:5] == ["8000", "0"]  # port, delay
    router = pod_spec(objects, RELEASE.router_deployment)
    assert router["terminationGracePeriodSeconds"] == 0
    assert router["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][-1] == "sleep 0"


def test_multinode_workers_get_no_drain_or_probes(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, MULTINODE)
    spec = pools(MULTINODE)[0]
    lws = manifests.find(objects, "LeaderWorkerSet", RELEASE.pool_leader_worker_set(spec["name"]))
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template["leaderTemplate"]["spec"]
    worker = template["workerTemplate"]["spec"]
    assert "lifecycle" in leader["containers"][0] and "startupProbe" in leader["containers"][0]
    assert not {"lifecycle", "startupProbe"} & set(worker["containers"][0])
    assert leader["terminationGracePeriodSeconds"] == worker["terminationGracePeriodSeconds"]


class MetricsDouble:
    """TEST DOUBLE of a vLLM engine's /metrics (NOT vLLM): it exports vllm:num_requests_running
    and vllm:num_requests_waiting with the values in `running` and `waiting`, after answering 503
    to the first `failures` scrapes."""

    def __init__(self) -> None:
        self.running = 2.0
        self.waiting = 1.0
        self.scrapes = 0
        self.failures = 0
        double = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                double.scrapes += 1
                if double.scrapes <= double.failures:
                    self.send_error(503)
                    return
                labels = 'engine="0",model_name="m"'
                body = (
                    "# TYPE vllm:num_requests_running gauge\n"
                    f"vllm:num_requests_running{{{labels}}} {double.running}\n"
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f"vllm:num_requests_waiting{{{labels}}} {double.waiting}\n"
                ).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http_server.start(Handler)
        self.port = self.server.server_address[1]


@pytest.fixture
def metrics_double() -> Iterator[MetricsDouble]:
    double = MetricsDouble()
    yield double
    double.server.shutdown()


def test_drain_waits_until_vllm_is_idle(
    helm4: Helm, tmp_path: Path, metrics_double: MetricsDouble
) -> None:
    """The rendered preStop script, run with this Python against a /metrics double: it returns only
    once running and waiting requests are gone, then holds `hold` seconds (prefill)."""
    objects = render(helm4, tmp_path, NIXL)
    command = engine(objects, pools(NIXL)[0]["name"])["lifecycle"]["preStop"]["exec"]["command"]
    script = command[2]
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(metrics_double.port), "0", "30", "1"]
    )
    time.sleep(1.5)
    assert proc.poll() is None, "the drain ended while requests were running"
    metrics_double.running = metrics_double.waiting = 0.0
    assert proc.wait(timeout=10) == 0
    elapsed = time.monotonic() - started
    assert metrics_double.scrapes >= 2 and elapsed >= 2.5  # idle, then the one-second hold
    # The budget bounds it: busy forever, it still ends.
    metrics_double.running = 1.0
    done = subprocess.run(
        [sys.executable, "-c", script, str(metrics_double.port), "0", "2", "0"], timeout=10
    )
    assert done.returncode == 0
    # A failed scrape (an overloaded engine) is tried again, not taken for the end.
    metrics_double.running, metrics_double.scrapes, metrics_double.failures = 0.0, 0, 2
    done = subprocess.run(
        [sys.executable, "-c", script, str(metrics_double.port), "0", "30", "0"], timeout=10
    )
    assert done.returncode == 0 and metrics_double.scrapes == 3
    # No engine answering (vLLM already gone): it ends at once.
    quiet = subprocess.run([sys.executable, "-c", script, "1", "0", "30", "0"], timeout=10)
    assert quiet.returncode == 0


def test_router_drain_and_grace(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["terminationGracePeriodSeconds"] = 45
    objects = render(helm4, tmp_path, values)
    pod = pod_spec(objects, RELEASE.router_deployment)
    assert pod["terminationGracePeriodSeconds"] == 45
    assert pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] == [
        "/bin/sh",
        "-c",
        "sleep 5",
    ]
    values["routerSpec"]["drain"] = {"enabled": False}
    del values["routerSpec"]["terminationGracePeriodSeconds"]
    pod = pod_spec(render(helm4, tmp_path, values), RELEASE.router_deployment)
    assert "lifecycle" not in pod["containers"][0]
    assert "terminationGracePeriodSeconds" not in pod


# ---- disruption budgets and topology ------------------------------------------------------------


def test_no_disruption_budget_unless_asked(helm4: Helm, tmp_path: Path) -> None:
    for values in (TUTORIAL, NIXL, MULTINODE):
        kinds = {obj["kind"] for obj in render(helm4, tmp_path, values)}
        assert "PodDisruptionBudget" not in kinds


def test_pool_disruption_budget(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["pdb"] = {"enabled": True, "labels": {"team": "a"}}
    pools(values)[1]["pdb"] = {"enabled": True, "minAvailable": "50%"}
    objects = render(helm4, tmp_path, values)
    first, second = (
        manifests.find(objects, "PodDisruptionBudget", RELEASE.pool_disruption_budget(s["name"]))
        for s in pools(values)
    )
    assert first["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": RELEASE.pool_pods_selector(pools(values)[0]["name"])},
    }
    assert first["metadata"]["labels"]["team"] == "a"
    assert second["spec"]["minAvailable"] == "50%" and "maxUnavailable" not in second["spec"]
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)


def test_multinode_budget_selects_leaders_and_workers(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(MULTINODE)
    pools(values)[0]["pdb"] = {"enabled": True}
    objects = render(helm4, tmp_path, values)
    pool = pools(values)[0]["name"]
    budget = manifests.find(objects, "PodDisruptionBudget", RELEASE.pool_disruption_budget(pool))
    selector = budget["spec"]["selector"]["matchLabels"]
    lws = manifests.find(objects, "LeaderWorkerSet", RELEASE.pool_leader_worker_set(pool))
    template = lws["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        assert selector.items() <= template[part]["metadata"]["labels"].items()


def test_both_budget_bounds_are_refused(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["pdb"] = {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}
    assert ("SCHEMA", "servingEngineSpec.modelSpec[0].pdb", "error") in findings(tmp_path, values)


def test_router_disruption_budget(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["pdb"] = {"enabled": True}
    objects = render(helm4, tmp_path, values)
    budget = manifests.find(objects, "PodDisruptionBudget", RELEASE.router_disruption_budget)
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == RELEASE.router_selector


def test_budgets_that_block_drains_are_warned(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    pools(values)[0]["pdb"] = {"enabled": True, "minAvailable": 1}  # one replica
    pools(values)[1]["pdb"] = {"enabled": True, "maxUnavailable": "0%"}
    values["routerSpec"]["pdb"] = {"enabled": True, "minAvailable": "100%"}
    found = [f for f in findings(tmp_path, values) if f[0] == "PD111"]
    assert found == [
        ("PD111", "servingEngineSpec.modelSpec[0].pdb", "warning"),
        ("PD111", "servingEngineSpec.modelSpec[1].pdb", "warning"),
        ("PD111", "routerSpec.pdb", "warning"),
    ]
    pools(values)[0]["replicaCount"] = 3
    pools(values)[1]["pdb"] = {"enabled": True}
    del values["routerSpec"]["pdb"]
    assert not [f for f in findings(tmp_path, values) if f[0] == "PD111"]
    # llm-d with leader election: only the leader is Ready, whatever the budget's bounds.
    values = copy.deepcopy(LLMD)
    values["routerSpec"] |= {"replicaCount": 2, "pdb": {"enabled": True}}
    found = [f for f in findings(tmp_path, values) if f[0] == "PD111"]
    assert found == [("PD111", "routerSpec.pdb", "warning")]
    values["routerSpec"]["replicaCount"] = 1
    assert not [f for f in findings(tmp_path, values) if f[0] == "PD111"]


def test_topology_spread_counts_the_workloads_own_pods(helm4: Helm, tmp_path: Path) -> None:
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    own = {**spread, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {}}}
    values = copy.deepcopy(NIXL)
    pools(values)[0]["topologySpreadConstraints"] = [spread, own]
    values["routerSpec"]["topologySpreadConstraints"] = [spread]
    objects = render(helm4, tmp_path, values)
    pool = pools(values)[0]["name"]
    rendered = pod_spec(objects, RELEASE.pool_deployment(pool))["topologySpreadConstraints"]
    assert rendered == [
        {**spread, "labelSelector": {"matchLabels": RELEASE.pool_pods_selector(pool)}},
        own,
    ]
    assert "topologySpreadConstraints" not in pod_spec(
        objects, RELEASE.pool_deployment(pools(values)[1]["name"])
    )
    router = pod_spec(objects, RELEASE.router_deployment)["topologySpreadConstraints"]
    assert router == [{**spread, "labelSelector": {"matchLabels": RELEASE.router_selector}}]
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)


# ---- the startup budget of known models ---------------------------------------------------------


def test_known_models_get_a_startup_budget_warning(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    for spec in pools(values):
        spec["modelURL"] = "meta-llama/Llama-3.1-70B-Instruct"
    found = [f for f in findings(tmp_path, values) if f[0] == "PD110"]
    assert found == [
        ("PD110", "servingEngineSpec.modelSpec[0].startupProbe", "warning"),
        ("PD110", "servingEngineSpec.modelSpec[1].startupProbe", "warning"),
    ]
    for spec in pools(values):
        spec["startupProbe"] = {"failureThreshold": 195}
    assert not [f for f in findings(tmp_path, values) if f[0] == "PD110"]
    # A small model fits the chart's default of 20 minutes; unknown models are not judged.
    assert not [f for f in findings(tmp_path, TUTORIAL) if f[0] == "PD110"]


def test_init_writes_the_startup_budget(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pdctl.cli.app import app

    out = tmp_path / "values.yaml"
    result = CliRunner().invoke(
        app,
        ["init", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpus", "8"]
        + ["--gpu-type", "H100-80GB", "--offline", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    written = load_values(out)
    for spec in pools(written):
        assert spec["startupProbe"] == {"failureThreshold": 195}
    assert not [f for f in findings(tmp_path, written) if f[0] == "PD110"]


# ---- everything on, against Kubernetes' schemas -------------------------------------------------


def everything_on(base: dict[str, Any], keda: bool) -> dict[str, Any]:
    values = copy.deepcopy(base)
    for spec in pools(values):
        spec["pdb"] = {"enabled": True}
        spec["digest"] = DIGEST
        spec["startupProbe"] = {"failureThreshold": 200}
        spec["terminationGracePeriodSeconds"] = 300
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
            }
        ]
        if keda:
            spec["keda"] = {"enabled": True, "maxReplicaCount": 3}
    prometheus = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}]
    values["servingEngineSpec"] |= {
        "networkPolicy": {"enabled": True, "metricsFrom": prometheus},
        "serviceMonitor": {"enabled": True},
    }
    router = values["routerSpec"]
    router |= {"pdb": {"enabled": True}, "terminationGracePeriodSeconds": 60}
    router |= {
        "autoscaling": {"enabled": True, "maxReplicas": 3},
        "serviceMonitor": {"enabled": True},
    }
    router.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "1"
    values["grafanaDashboards"] = {"enabled": True}
    return values


# The tutorial's LMCache pair is 1P1D: no autoscaler may add replicas (PD023).
@pytest.mark.parametrize(
    ("base", "keda"),
    [(TUTORIAL, False), (NIXL, True), (MULTINODE, True)],
    ids=["tutorial", "nixl", "multinode"],
)
def test_everything_on_renders_valid_objects(
    helm: Helm, tmp_path: Path, base: dict[str, Any], keda: bool
) -> None:
    values = everything_on(base, keda)
    assert [f for f in findings(tmp_path, values) if f[2] == "error"] == []
    objects = render(helm, tmp_path, values)
    kinds = {o["kind"] for o in objects}
    assert {"PodDisruptionBudget", "HorizontalPodAutoscaler"} <= kinds
    assert ("ScaledObject" in kinds) is keda
    assert {"ServiceMonitor", "NetworkPolicy", "ConfigMap"} <= kinds
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)


# ---- autoscaling ------------------------------------------------------------------------------


def assert_all_valid(objects: list[manifests.Manifest]) -> None:
    """Built-in kinds against Kubernetes 1.29 and 1.35; ScaledObjects, ServiceMonitors and
    PodMonitors against their vendored CRDs (tests/crd_schemas.py)."""
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)


def test_no_autoscaler_unless_asked(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, NIXL)
    assert not {"ScaledObject", "HorizontalPodAutoscaler"} & {o["kind"] for o in objects}
    for spec in pools(NIXL):
        assert (
            "replicas"
            in manifests.find(objects, "Deployment", RELEASE.pool_deployment(spec["name"]))["spec"]
        )
    assert "replicas" in manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]


def test_keda_scales_each_role_on_its_own_signals(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    prefill, decode = pools(values)
    prefill["keda"] = {
        "enabled": True,
        "minReplicaCount": 1,
        "maxReplicaCount": 4,
        "ttftSeconds": 2,
    }
    decode["keda"] = {"enabled": True, "maxReplicaCount": 6, "kvCacheUsage": 0.9}
    objects = render(helm4, tmp_path, values)
    assert_all_valid(objects)
    for spec in (prefill, decode):
        deployment = manifests.find(objects, "Deployment", RELEASE.pool_deployment(spec["name"]))
        assert "replicas" not in deployment["spec"]
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }
    p = manifests.find(objects, "ScaledObject", RELEASE.pool_scaled_object(prefill["name"]))
    d = manifests.find(objects, "ScaledObject", RELEASE.pool_scaled_object(decode["name"]))
    assert p["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": RELEASE.pool_deployment(prefill["name"]),
    }
    assert (p["spec"]["minReplicaCount"], p["spec"]["maxReplicaCount"]) == (1, 4)
    # Unset, the minimum is 1, not KEDA's 0: at zero the default triggers would see no metrics.
    assert (d["spec"]["minReplicaCount"], d["spec"]["maxReplicaCount"]) == (1, 6)
    series = f'namespace="default",app_kubernetes_io_instance="pd",model="{prefill["name"]}"'
    assert [(t["name"], t["metricType"], t["metadata"]) for t in p["spec"]["triggers"]] == [
        (
            "waiting-requests",
            "AverageValue",
            {
                "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                "query": f"sum(vllm:num_requests_waiting{{{series}}})",
                "threshold": "5",
            },
        ),
        (
            "ttft-p90",
            "Value",
            {
                "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                "query": "histogram_quantile(0.9, sum by (le) "
                f"(rate(vllm:time_to_first_token_seconds_bucket{{{series}}}[2m])))",
                "threshold": "2",
            },
        ),
    ]
    assert [t["name"] for t in d["spec"]["triggers"]] == ["waiting-requests", "kv-cache-usage"]
    kv = d["spec"]["triggers"][1]["metadata"]
    assert (
        kv["query"]
        == f'avg(vllm:kv_cache_usage_perc{{namespace="default",app_kubernetes_io_instance="pd",'
        f'model="{decode["name"]}"}})'
    )
    assert kv["threshold"] == "0.9"
    assert all(t["type"] == "prometheus" for t in p["spec"]["triggers"] + d["spec"]["triggers"])


def test_keda_takes_production_stacks_keys(helm4: Helm, tmp_path: Path) -> None:
    trigger = {
        "type": "prometheus",
        "metadata": {"serverAddress": "http://prom:9090", "query": "up", "threshold": "1"},
    }
    keda = {
        "enabled": True,
        "minReplicaCount": 1,
        "maxReplicaCount": 5,
        "pollingInterval": 15,
        "cooldownPeriod": 360,
        "idleReplicaCount": 0,
        "initialCooldownPeriod": 60,
        "fallback": {"failureThreshold": 3, "replicas": 2},
        "triggers": [trigger],
        "advanced": {
            "restoreToOriginalReplicaCount": False,
            # production-stack's values.yaml writes these placeholders: left out.
            "horizontalPodAutoscalerConfig": {"name": "", "behavior": {}},
            "scalingModifiers": {"target": "", "formula": "", "metricType": "AverageValue"},
        },
    }
    values = copy.deepcopy(NIXL)
    pools(values)[0]["keda"] = keda
    objects = render(helm4, tmp_path, values)
    assert_all_valid(objects)
    spec = manifests.find(
        objects, "ScaledObject", RELEASE.pool_scaled_object(pools(values)[0]["name"])
    )["spec"]
    for key in ("pollingInterval", "cooldownPeriod", "idleReplicaCount", "initialCooldownPeriod"):
        assert spec[key] == keda[key]
    assert spec["fallback"] == keda["fallback"]
    assert spec["triggers"] == [trigger]
    assert spec["advanced"] == {
        "restoreToOriginalReplicaCount": False,
        "horizontalPodAutoscalerConfig": {"behavior": {}},
    }


def test_keda_scales_a_leaderworkerset_and_a_role_scaler(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(MULTINODE)
    pools(values)[1]["keda"] = {"enabled": True, "maxReplicaCount": 2}
    objects = render(helm4, tmp_path, values)
    assert_all_valid(objects)
    pool = pools(values)[1]["name"]
    target = manifests.find(objects, "ScaledObject", RELEASE.pool_scaled_object(pool))["spec"][
        "scaleTargetRef"
    ]
    assert target == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": RELEASE.pool_leader_worker_set(pool),
    }
    lws = manifests.find(objects, "LeaderWorkerSet", RELEASE.pool_leader_worker_set(pool))
    assert "replicas" not in lws["spec"]
    other = manifests.find(
        objects, "LeaderWorkerSet", RELEASE.pool_leader_worker_set(pools(values)[0]["name"])
    )
    assert other["spec"]["replicas"] == 1
    dset = load_values(ASSETS / "values-24-disaggregatedset.yaml")
    dset["servingEngineSpec"]["disaggregatedSet"].pop("slices")  # External roles take one slice
    pools(dset)[1] |= {"scalingMode": "External", "keda": {"enabled": True, "maxReplicaCount": 3}}
    assert [f for f in findings(tmp_path, dset) if f[2] == "error"] == []
    objects = render(helm4, tmp_path, dset)
    assert_all_valid(objects)
    pool = pools(dset)[1]["name"]
    target = manifests.find(objects, "ScaledObject", RELEASE.pool_scaled_object(pool))["spec"][
        "scaleTargetRef"
    ]
    assert target == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "name": RELEASE.role_scaler(pool),
    }


def test_router_autoscaler(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600}}
    values["routerSpec"]["autoscaling"] = {"enabled": True, "maxReplicas": 5, "behavior": behavior}
    objects = render(helm4, tmp_path, values)
    assert_all_valid(objects)
    hpa = manifests.find(objects, "HorizontalPodAutoscaler", RELEASE.router_autoscaler)
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": RELEASE.router_deployment,
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 5)
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": 80,
    }
    assert hpa["spec"]["behavior"] == behavior
    assert (
        "replicas" not in manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]
    )


# ---- NetworkPolicy ----------------------------------------------------------------------------


def test_no_network_policy_unless_asked(helm4: Helm, tmp_path: Path) -> None:
    assert "NetworkPolicy" not in {o["kind"] for o in render(helm4, tmp_path, NIXL)}


def test_network_policy_admits_the_router_and_peer_pools(helm4: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-20-mooncake.yaml")  # vllm-router asks the bootstrap port
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    extra = {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 8000}]}
    values["servingEngineSpec"]["networkPolicy"] = {
        "enabled": True,
        "metricsFrom": [monitoring],
        "ingress": [extra],
    }
    objects = render(helm4, tmp_path, values)
    assert_all_valid(objects)
    policy = manifests.find(objects, "NetworkPolicy", RELEASE.engine_network_policy)["spec"]
    engines = {
        "matchLabels": {naming.INSTANCE: "pd"},
        "matchExpressions": [
            {
                "key": naming.COMPONENT,
                "operator": "In",
                "values": [naming.ENGINE, naming.ENGINE_WORKER],
            }
        ],
    }
    assert policy["podSelector"] == engines and policy["policyTypes"] == ["Ingress"]
    router, peers, metrics, given = policy["ingress"]
    assert router == {
        "from": [{"podSelector": {"matchLabels": RELEASE.router_selector}}],
        "ports": [
            {"port": "http", "protocol": "TCP"},
            {"port": "mc-bootstrap", "protocol": "TCP"},  # connectors.yaml routers.vllm-router
        ],
    }
    assert peers == {"from": [{"podSelector": engines}]}  # every port: KV transfer, NCCL, ...
    assert metrics == {"from": [monitoring], "ports": [{"port": "http", "protocol": "TCP"}]}
    assert given == extra
    # Every engine pod (of any pool, leaders and workers) is selected and selects its peers.
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] != RELEASE.router_deployment:
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert labels[naming.INSTANCE] == "pd" and labels[naming.COMPONENT] == naming.ENGINE


def test_network_policy_router_ports_follow_the_connector(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)  # NIXL: the router needs only the HTTP port
    values["servingEngineSpec"]["networkPolicy"] = {"enabled": True}
    policy = manifests.find(
        render(helm4, tmp_path, values), "NetworkPolicy", RELEASE.engine_network_policy
    )["spec"]
    assert policy["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert len(policy["ingress"]) == 2


def test_network_policy_warns_about_blocked_clients(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["servingEngineSpec"]["networkPolicy"] = {"enabled": True}
    values["servingEngineSpec"]["serviceMonitor"] = {"enabled": True}
    found = [f for f in findings(tmp_path, values) if f[0] == "PD112"]
    assert found == [("PD112", "servingEngineSpec.networkPolicy", "warning")]
    values["servingEngineSpec"]["networkPolicy"]["metricsFrom"] = [{"podSelector": {}}]
    assert not [f for f in findings(tmp_path, values) if f[0] == "PD112"]
