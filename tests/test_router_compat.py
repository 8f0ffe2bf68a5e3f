"""production-stack's routerSpec keys beyond what the compatibility table's one-key examples show
(helm/files/production-stack.yaml, tests/test_production_stack.py): static discovery for both
routers, the router's API key (only ever through a Secret), probes, the LMCache controller's
ports, and every key at once through strict Kubernetes schemas."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests, naming, pipeline
from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    assert_kube_valid,
    container,
    env_of,
    helm_template_result,
    load_values,
    render_file,
    write_values,
)

RELEASE = naming.Release("pd")
TUTORIAL = load_values(ASSETS / "values-16-disagg-prefill.yaml")  # production-stack router
NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")  # vllm-router
LABELS = ["--prefill-model-labels", "llama-prefill", "--decode-model-labels", "llama-decode"]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def routed(base: dict[str, Any], **router: Any) -> dict[str, Any]:
    values = copy.deepcopy(base)
    values["routerSpec"].update(copy.deepcopy(router))
    return values


def errors(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = write_values(tmp_path, values, "checked.yaml")
    report = pipeline.validate([str(path)], pipeline.ValidateOptions())
    return [f"{f.rule} {f.key}" for f in report.errors]


def render(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[manifests.Manifest]:
    assert errors(tmp_path, values) == []
    return render_file(helm, write_values(tmp_path, values))


def router_of(objects: list[manifests.Manifest]) -> dict[str, Any]:
    return container(objects, RELEASE.router_deployment)


def kinds(objects: list[manifests.Manifest]) -> set[str]:
    return {obj["kind"] for obj in objects}


def refused(helm: Helm, tmp_path: Path, values: dict[str, Any], rule: str, key: str) -> str:
    """Both validate and the chart refuse the values; returns the chart's message."""
    assert errors(tmp_path, values) == [f"{rule} {key}"]
    chart = helm_template_result(helm, write_values(tmp_path, values))
    assert chart.returncode != 0
    assert f"[{rule}]" in chart.stderr, chart.stderr
    return chart.stderr


# ---- static discovery ---------------------------------------------------------------------


def test_production_stack_static_defaults_to_the_pools(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, routed(TUTORIAL, serviceDiscovery="static"))
    args = router_of(objects)["args"]
    backends = [
        f"http://{RELEASE.pool_service(pool)}:80" for pool in ("llama-prefill", "llama-decode")
    ]
    assert args[4:12] == [
        "--service-discovery",
        "static",
        "--static-backends",
        ",".join(backends),
        "--static-models",
        f"{MODEL},{MODEL}",
        "--static-model-labels",
        "llama-prefill,llama-decode",
    ]
    assert not [arg for arg in args if str(arg).startswith("--k8s-")]
    # No Kubernetes API, so no RBAC; the ServiceAccount stays (the pod runs as it).
    assert {"Role", "RoleBinding"} & kinds(objects) == set()
    assert "ServiceAccount" in kinds(objects)


def test_production_stack_static_keeps_the_users_labels(helm4: Helm, tmp_path: Path) -> None:
    extra = ["--static-model-labels=llama-prefill,llama-decode", *LABELS]
    objects = render(helm4, tmp_path, routed(TUTORIAL, serviceDiscovery="static", extraArgs=extra))
    args = router_of(objects)["args"]
    assert "--static-model-labels" not in args
    assert args[-5:] == extra


def test_production_stack_static_backends_as_given(helm4: Helm, tmp_path: Path) -> None:
    values = routed(
        TUTORIAL,
        serviceDiscovery="static",
        staticBackends="http://10.0.0.5:8000,http://10.0.0.6:8000",
        staticModels=f"{MODEL},{MODEL}",
        extraArgs=["--static-model-labels", "llama-prefill,llama-decode", *LABELS],
    )
    args = router_of(render(helm4, tmp_path, values))["args"]
    assert args.count("--static-model-labels") == 1
    assert args[args.index("--static-backends") + 1] == "http://10.0.0.5:8000,http://10.0.0.6:8000"


@pytest.mark.parametrize(
    ("router", "rule", "key", "says"),
    [
        (
            {"staticBackends": "http://10.0.0.5:8000"},
            "PD017",
            "routerSpec.staticBackends",
            "routerSpec.staticBackends: is set without routerSpec.staticModels",
        ),
        (
            {"staticModels": MODEL},
            "PD017",
            "routerSpec.staticModels",
            "routerSpec.staticModels: is set without routerSpec.staticBackends",
        ),
        (
            {
                "staticBackends": "http://10.0.0.5:8000,http://10.0.0.6:8000",
                "staticModels": MODEL,
                "extraArgs": ["--static-model-labels", "llama-prefill,llama-decode", *LABELS],
            },
            "PD017",
            "routerSpec.staticModels",
            "lists 1 model(s) but routerSpec.staticBackends 2 URL(s)",
        ),
        (
            {
                "staticBackends": "http://10.0.0.5:8000,http://10.0.0.6:8000",
                "staticModels": f"{MODEL},{MODEL}",
            },
            "PD008",
            "routerSpec.extraArgs",
            'needs "--static-model-labels"',
        ),
    ],  # fmt: skip
    ids=["backends-alone", "models-alone", "counts-differ", "pd-without-labels"],
)
def test_production_stack_static_refusals(
    helm4: Helm, tmp_path: Path, router: dict[str, Any], rule: str, key: str, says: str
) -> None:
    values = routed(TUTORIAL, serviceDiscovery="static", **router)
    assert says in refused(helm4, tmp_path, values, rule, key)


def test_static_keys_are_ignored_with_kubernetes_discovery(helm4: Helm, tmp_path: Path) -> None:
    """As in production-stack, staticBackends/staticModels only count with static discovery
    (its values.yaml defaults them to "" beside serviceDiscovery k8s)."""
    values = routed(TUTORIAL, serviceDiscovery="k8s", staticBackends="", staticModels="")
    args = router_of(render(helm4, tmp_path, values))["args"]
    assert args[args.index("--service-discovery") + 1] == "k8s"
    assert "--static-backends" not in args


def test_vllm_router_takes_the_shared_discovery_key(helm4: Helm, tmp_path: Path) -> None:
    values = routed(NIXL, serviceDiscovery="static")
    del values["routerSpec"]["vllmRouter"]["serviceDiscovery"]
    objects = render(helm4, tmp_path, values)
    args = router_of(objects)["args"]
    assert "--service-discovery" not in args
    prefill = f"http://{RELEASE.pool_service('qwen-prefill')}:80"
    decode = f"http://{RELEASE.pool_service('qwen-decode')}:80"
    assert args[args.index("--prefill") + 1] == prefill
    assert args[args.index("--decode") + 1] == decode
    assert {"Role", "RoleBinding"} & kinds(objects) == set()


def test_vllm_router_discovery_keys_must_agree(helm4: Helm, tmp_path: Path) -> None:
    values = routed(NIXL, serviceDiscovery="static")  # vllmRouter.serviceDiscovery is k8s
    stderr = refused(helm4, tmp_path, values, "PD017", "routerSpec.serviceDiscovery")
    assert "routerSpec.serviceDiscovery: is static but routerSpec.vllmRouter.serviceDiscovery" in (
        stderr
    )
    values["routerSpec"]["vllmRouter"]["serviceDiscovery"] = "static"
    assert render(helm4, tmp_path, values)


# ---- the API key ----------------------------------------------------------------------------


def secret_data(objects: list[manifests.Manifest]) -> dict[str, str]:
    secret = manifests.find(objects, "Secret", RELEASE.secret)
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


@pytest.mark.parametrize("base", [TUTORIAL, NIXL], ids=["production-stack", "vllm-router"])
def test_api_key_string_goes_through_a_secret(
    helm4: Helm, tmp_path: Path, base: dict[str, Any]
) -> None:
    key = "sk-router-0123456789"
    values = routed(base, vllmApiKey=key)
    path = write_values(tmp_path, values)
    text = helm_template_result(helm4, path).stdout
    objects = manifests.parse(text)
    assert secret_data(objects)["routerVllmApiKey"] == key
    ref = {"secretKeyRef": {"name": RELEASE.secret, "key": "routerVllmApiKey"}}
    env = env_of(router_of(objects))
    assert env["VLLM_API_KEY"] == ref and env["OPENAI_API_KEY"] == ref
    assert key not in text  # only base64 in the Secret's data


def test_api_key_falls_back_to_the_engines(helm4: Helm, tmp_path: Path) -> None:
    values = routed(TUTORIAL, vllmApiKey={"secretName": "", "secretKey": ""})
    values["servingEngineSpec"]["vllmApiKey"] = "sk-engines"
    objects = render(helm4, tmp_path, values)
    env = env_of(router_of(objects))
    assert env["VLLM_API_KEY"] == {"secretKeyRef": {"name": RELEASE.secret, "key": "vllmApiKey"}}
    assert "routerVllmApiKey" not in secret_data(objects)
    values["servingEngineSpec"]["vllmApiKey"] = {"secretName": "engine-key", "secretKey": "k"}
    env = env_of(router_of(render(helm4, tmp_path, values)))
    assert env["OPENAI_API_KEY"] == {"secretKeyRef": {"name": "engine-key", "key": "k"}}


def test_user_env_replaces_the_charts_entry(helm4: Helm, tmp_path: Path) -> None:
    mine = {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "x", "key": "token"}}}
    values = routed(NIXL, vllmApiKey={"secretName": "a", "secretKey": "b"}, env=[mine])
    env = env_of(router_of(render(helm4, tmp_path, values)))  # env_of fails on duplicates
    assert env["OPENAI_API_KEY"] == mine["valueFrom"]
    assert env["VLLM_API_KEY"] == {"secretKeyRef": {"name": "a", "key": "b"}}


@pytest.mark.parametrize(
    "key", [{"secretName": "a"}, {"secretName": "", "secretKey": "k"}, "", {"name": "a"}]
)
def test_api_key_shapes_the_schema_refuses(tmp_path: Path, key: Any) -> None:
    (error,) = errors(tmp_path, routed(NIXL, vllmApiKey=key))
    assert error.startswith("SCHEMA routerSpec.vllmApiKey")


# ---- probes, ports, pod settings -------------------------------------------------------------


def test_production_stack_probes(helm4: Helm, tmp_path: Path) -> None:
    probe = {"periodSeconds": 5, "httpGet": {"path": "/health", "port": "router-port"}}
    values = routed(TUTORIAL, startupProbe=probe, readinessProbe={"httpGet": {"path": "/ready"}})
    router = router_of(render(helm4, tmp_path, values))
    assert router["startupProbe"] == {
        "periodSeconds": 5,
        "httpGet": {"path": "/health", "port": "http"},
    }
    assert router["readinessProbe"] == {
        "periodSeconds": 10,
        "httpGet": {"path": "/ready", "port": "http"},
    }
    assert router["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}


@pytest.mark.parametrize(
    ("key", "probe"),
    [
        ("livenessProbe", {"successThreshold": 2}),
        ("startupProbe", {"successThreshold": 3}),
        ("readinessProbe", {"httpGet": {"port": 8000}}),
        ("readinessProbe", {"exec": {"command": ["true"]}}),
    ],
)
def test_probes_the_schema_refuses(tmp_path: Path, key: str, probe: dict[str, Any]) -> None:
    assert errors(tmp_path, routed(TUTORIAL, **{key: probe}))[0].startswith(
        f"SCHEMA routerSpec.{key}"
    )


def test_kvaware_exposes_the_lmcache_controller(helm4: Helm, tmp_path: Path) -> None:
    values = routed(
        TUTORIAL, routingLogic="kvaware", extraArgs=[], lmcacheControllerReplyPort="9001"
    )
    values["servingEngineSpec"]["modelSpec"] = values["servingEngineSpec"]["modelSpec"][1:]
    values["servingEngineSpec"]["modelSpec"][0]["lmcacheConfig"] = {"enabled": True}
    objects = render(helm4, tmp_path, values)
    ports = {p["name"]: p["containerPort"] for p in router_of(objects)["ports"]}
    assert ports == {"http": 8000, "lmcache-port": 9000, "lmcache-reply": 9001}
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("http", 80, "http"),
        ("lmcache-port", 9000, "lmcache-port"),
        ("lmcache-reply", 9001, "lmcache-reply"),
    ]
    args = router_of(objects)["args"]
    assert args[args.index("--lmcache-controller-reply-port") + 1] == "9001"


def test_node_port_only_with_type_node_port(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, routed(NIXL, nodePort=30080))
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert "nodePort" not in service["spec"]["ports"][0]


def test_affinity_wins_over_node_selector_terms(helm4: Helm, tmp_path: Path) -> None:
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}  # fmt: skip
    terms = [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]
    values = routed(NIXL, affinity=affinity, nodeSelectorTerms=terms)
    pod = manifests.find(render(helm4, tmp_path, values), "Deployment", RELEASE.router_deployment)
    assert pod["spec"]["template"]["spec"]["affinity"] == affinity


EVERYTHING: dict[str, Any] = {
    "serviceAccountName": "serving-router",
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000},
    "priorityClassName": "serving-critical",
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu"]}]}
    ],
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    "startupProbe": {"initialDelaySeconds": 5, "periodSeconds": 5, "failureThreshold": 12},
    "livenessProbe": {"periodSeconds": 7, "timeoutSeconds": 2},
    "readinessProbe": {"periodSeconds": 3, "successThreshold": 2},
    "extraVolumes": [{"name": "scratch", "emptyDir": {}}],
    "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    "serviceAnnotations": {"example.com/owner": "serving"},
    "serviceType": "NodePort",
    "nodePort": 30080,
    "extraPorts": [{"name": "admin", "port": 9090, "targetPort": 9090, "protocol": "TCP"}],
    "vllmApiKey": "sk-router",
}
PRODUCTION_STACK_ONLY: dict[str, Any] = {
    "serviceDiscovery": "static",
    "prefixMinMatchLength": 128,
    "rootPath": "/vllm",
    "lmcacheConfig": {"logLevel": "DEBUG"},
    "lmcacheControllerPort": 9100,
    "lmcacheControllerReplyPort": "9101",
    "lmcacheControllerHeartbeatPort": 9102,
}


@pytest.mark.parametrize("kube", ["1.29.0", "1.35.0"])
@pytest.mark.parametrize(
    "values",
    [routed(TUTORIAL, **EVERYTHING, **PRODUCTION_STACK_ONLY), routed(NIXL, **EVERYTHING)],
    ids=["production-stack", "vllm-router"],
)
def test_every_router_key_at_once_is_valid_kubernetes(
    helm4: Helm, tmp_path: Path, values: dict[str, Any], kube: str
) -> None:
    objects = render(helm4, tmp_path, values)
    assert_kube_valid(objects, kube)
    pod = manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "serving-router"
    assert "ServiceAccount" not in kinds(objects)
