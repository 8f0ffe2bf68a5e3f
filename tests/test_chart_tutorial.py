"""The PD tutorial's values render into what its pinned images and commands rely on."""

from __future__ import annotations

import json

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import CHART, TUTORIAL_VALUES, Render, container, env_of

PREFILL = "pd-llama-prefill-deployment-vllm"
DECODE = "pd-llama-decode-deployment-vllm"


@pytest.fixture
def objects(helm: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm, TUTORIAL_VALUES)


def test_helm_lint_strict(helm: Helm) -> None:
    result = helm.run(["lint", "--strict", str(CHART), "--values", str(TUTORIAL_VALUES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_router_service(objects: list[manifests.Manifest]) -> None:
    service = manifests.find(objects, "Service", "pd-router-service")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80 and port["targetPort"] == "http"
    router = container(objects, "pd-deployment-router")
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in router["ports"]
    pod_labels = manifests.find(objects, "Deployment", "pd-deployment-router")["spec"]["template"][
        "metadata"
    ]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_decode_service_exposes_nixl_port(objects: list[manifests.Manifest]) -> None:
    service = manifests.find(objects, "Service", "pd-llama-decode-engine-service")
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert ports["nixl-0"]["port"] == 55555
    decode_pod = manifests.find(objects, "Deployment", DECODE)["spec"]["template"]
    assert service["spec"]["selector"].items() <= decode_pod["metadata"]["labels"].items()
    prefill_pod = manifests.find(objects, "Deployment", PREFILL)["spec"]["template"]
    assert not service["spec"]["selector"].items() <= prefill_pod["metadata"]["labels"].items()
    assert {"name": "nixl-0", "containerPort": 55555, "protocol": "TCP"} in container(
        objects, DECODE
    )["ports"]


@pytest.mark.parametrize(
    ("deployment", "role"), [(PREFILL, "kv_producer"), (DECODE, "kv_consumer")]
)
def test_engine_command(objects: list[manifests.Manifest], deployment: str, role: str) -> None:
    engine = container(objects, deployment)
    assert engine["image"] == "lmcache/vllm-openai:2025-05-17-v1"
    assert engine["command"] == ["/opt/venv/bin/vllm"]
    args = engine["args"]
    assert args[:2] == ["serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert args[args.index("--port") + 1] == "8000"
    assert args[args.index("--max-model-len") + 1] == "32000"
    assert "--no-enable-chunked-prefill" in args and "--no-enable-prefix-caching" in args
    assert "--enable-prefix-caching" not in args and "--enable-chunked-prefill" not in args
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "LMCacheConnectorV1"
    assert config["kv_role"] == role


@pytest.mark.parametrize(
    ("deployment", "nixl_role", "receiver_host"),
    [(PREFILL, "sender", "pd-llama-decode-engine-service"), (DECODE, "receiver", "0.0.0.0")],
)
def test_engine_lmcache_nixl_env(
    objects: list[manifests.Manifest], deployment: str, nixl_role: str, receiver_host: str
) -> None:
    env = env_of(container(objects, deployment))
    assert env["LMCACHE_USE_EXPERIMENTAL"] == "True"
    assert env["LMCACHE_ENABLE_NIXL"] == "True"
    assert env["LMCACHE_NIXL_ROLE"] == nixl_role
    assert env["LMCACHE_NIXL_RECEIVER_HOST"] == receiver_host
    assert env["LMCACHE_NIXL_RECEIVER_PORT"] == "55555"
    assert env["LMCACHE_NIXL_BUFFER_SIZE"] == "1073741824"
    assert env["LMCACHE_NIXL_BUFFER_DEVICE"] == "cuda"
    assert env["LMCACHE_NIXL_ENABLE_GC"] == "True"
    # NIXL in that LMCache refuses a local CPU backend.
    assert env["LMCACHE_LOCAL_CPU"] == "False" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "0"


@pytest.mark.parametrize(
    ("deployment", "pool"), [(PREFILL, "llama-prefill"), (DECODE, "llama-decode")]
)
def test_hf_token_only_from_secret(
    objects: list[manifests.Manifest], deployment: str, pool: str
) -> None:
    env = env_of(container(objects, deployment))
    # A file of a Secret volume that huggingface_hub reads (HF_TOKEN_PATH), never a value in env.
    assert "HF_TOKEN" not in env
    assert env["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    pod = manifests.find(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "hf-token")
    assert volume["secret"]["secretName"] == "pd-secrets"
    assert volume["secret"]["items"] == [{"key": f"hf_token_{pool}", "path": "token"}]
    secret = manifests.find(objects, "Secret", "pd-secrets")
    assert f"hf_token_{pool}" in secret["data"]
    rendered_values = [entry.get("value", "") for entry in container(objects, deployment)["env"]]
    assert "<your-hf-token>" not in rendered_values


@pytest.mark.parametrize(
    ("deployment", "pool"), [(PREFILL, "llama-prefill"), (DECODE, "llama-decode")]
)
def test_engine_resources_and_cache(
    objects: list[manifests.Manifest], deployment: str, pool: str
) -> None:
    engine = container(objects, deployment)
    assert engine["resources"]["requests"] == {"cpu": "8", "memory": "30Gi", "nvidia.com/gpu": "1"}
    # The limits are the requests (servingEngineSpec.limitsFromRequests): Guaranteed QoS.
    assert engine["resources"]["limits"] == engine["resources"]["requests"]
    claim = manifests.find(objects, "PersistentVolumeClaim", f"pd-{pool}-storage-claim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    pod = manifests.find(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "hf-cache")
    assert volume["persistentVolumeClaim"]["claimName"] == f"pd-{pool}-storage-claim"
    mount = next(m for m in engine["volumeMounts"] if m["name"] == "hf-cache")
    assert env_of(engine)["HF_HOME"] == mount["mountPath"] == "/data"


def test_engine_pods_carry_model_label(objects: list[manifests.Manifest]) -> None:
    for deployment, pool in [(PREFILL, "llama-prefill"), (DECODE, "llama-decode")]:
        labels = manifests.find(objects, "Deployment", deployment)["spec"]["template"]["metadata"][
            "labels"
        ]
        assert labels["model"] == pool


def test_router_arguments(objects: list[manifests.Manifest]) -> None:
    router = container(objects, "pd-deployment-router")
    assert router["image"] == "lmcache/lmstack-router:pd-05-26"
    args = router["args"]
    assert args[args.index("--routing-logic") + 1] == "disaggregated_prefill"
    assert args[-4:] == [
        "--prefill-model-labels",
        "llama-prefill",
        "--decode-model-labels",
        "llama-decode",
    ]
    assert args[args.index("--service-discovery") + 1] == "k8s"
    assert args[args.index("--k8s-namespace") + 1] == "default"
    # The pinned router image predates --k8s-service-discovery-type (production-stack #746).
    assert "--k8s-service-discovery-type" not in args
    assert router["resources"] == {
        "requests": {"cpu": "4", "memory": "16G"},
        "limits": {"cpu": "4", "memory": "32G"},
    }


def test_router_selector_matches_both_engine_pools(objects: list[manifests.Manifest]) -> None:
    args = container(objects, "pd-deployment-router")["args"]
    selector = dict(
        pair.split("=", 1) for pair in args[args.index("--k8s-label-selector") + 1].split(",")
    )
    for deployment in (PREFILL, DECODE):
        labels = manifests.find(objects, "Deployment", deployment)["spec"]["template"]["metadata"][
            "labels"
        ]
        assert selector.items() <= labels.items()
    router_labels = manifests.find(objects, "Deployment", "pd-deployment-router")["spec"][
        "template"
    ]["metadata"]["labels"]
    assert not selector.items() <= router_labels.items()


def test_router_rbac_is_least_privilege(objects: list[manifests.Manifest]) -> None:
    role = manifests.find(objects, "Role", "pd-pod-reader")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    binding = manifests.find(objects, "RoleBinding", "pd-router-pod-reader")
    assert binding["roleRef"]["name"] == "pd-pod-reader"
    assert binding["subjects"][0]["name"] == "pd-router-service-account"
    router_pod = manifests.find(objects, "Deployment", "pd-deployment-router")["spec"]["template"]
    assert router_pod["spec"]["serviceAccountName"] == "pd-router-service-account"
    manifests.find(objects, "ServiceAccount", "pd-router-service-account")


def test_no_host_level_settings_by_default(objects: list[manifests.Manifest]) -> None:
    for obj in objects:
        if obj["kind"] != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        assert not pod.get("hostIPC") and not pod.get("hostPID") and not pod.get("hostNetwork")
        for c in pod["containers"]:
            assert not c.get("securityContext", {}).get("privileged")
            assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_engine_rollout_never_surges_gpus(objects: list[manifests.Manifest]) -> None:
    # One-replica pools: Recreate (tests/test_deploy_rollout.py has the other cases).
    for deployment in (PREFILL, DECODE):
        strategy = manifests.find(objects, "Deployment", deployment)["spec"]["strategy"]
        assert strategy == {"type": "Recreate"}


def test_helm_test_hook_checks_router(objects: list[manifests.Manifest]) -> None:
    pod = manifests.find(objects, "Pod", "pd-test-router")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    smoke = pod["spec"]["containers"][0]
    assert env_of(smoke)["ROUTER_URL"] == "http://pd-router-service:80"
    assert "$ROUTER_URL/health" in smoke["command"][-1]
    assert "$ROUTER_URL/v1/completions" in smoke["command"][-1]


def test_both_helm_versions_render_identically(helm3: Helm, helm4: Helm) -> None:
    texts = [
        manifests.parse(helm.run(["template", "pd", str(CHART), "-f", str(TUTORIAL_VALUES)]).stdout)
        for helm in (helm3, helm4)
    ]
    assert texts[0] == texts[1]
