"""The llm-d router (routerSpec.type llm-d) as the chart renders it, with both Helm versions: the
EPP's arguments and EndpointPickerConfig, Envoy's configuration, the decode sidecar's arguments and
ports, the role labels, RBAC, the gateway-mode InferencePool and HTTPRoute against their CRDs'
own schemas, the release table deciding images and flags, and the refusals of chart and validate
alike. Facts checked against llm-d/llm-d-router v0.10.0 (see templates/_router-llmd.tpl)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import connectors, manifests, naming
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests import crd_schemas
from tests.helpers import (
    ASSETS,
    CI,
    KUBE_VERSIONS,
    assert_kube_valid,
    env_of,
    helm_template_result,
    load_values,
    render_file,
    write_values,
)

runner = CliRunner()
RELEASE = naming.Release("pd")
STANDALONE = ASSETS / "values-25-llm-d-router.yaml"
GATEWAY = CI / "llmd-gateway-mooncake-values.yaml"
TABLE = connectors.load().router_images["llm-d"]


def render(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[manifests.Manifest]:
    return render_file(helm, write_values(tmp_path, values))


def edited(path: Path, **router: Any) -> dict[str, Any]:
    values = copy.deepcopy(load_values(path))
    values["routerSpec"].setdefault("llmd", {}).update(router)
    return values


def pod(objects: list[manifests.Manifest], name: str) -> dict[str, Any]:
    return manifests.find(objects, "Deployment", name)["spec"]["template"]


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def epp_config(objects: list[manifests.Manifest]) -> dict[str, Any]:
    data = manifests.find(objects, "ConfigMap", RELEASE.router_config)["data"]
    return yaml.safe_load(data["epp-config.yaml"])


# ---- standalone mode ----------------------------------------------------------------------


def test_standalone_router_pod_runs_the_epp_and_envoy(helm: Helm) -> None:
    objects = render_file(helm, STANDALONE)
    spec = pod(objects, RELEASE.router_deployment)["spec"]
    epp, envoy = spec["containers"]
    row = TABLE["releases"][TABLE["default"]]
    assert epp["image"] == "{repository}:{tag}".format(**row["images"]["epp"])
    assert envoy["image"] == "docker.io/envoyproxy/envoy:distroless-v1.33.2"
    args = epp["args"]
    selector = naming.selector_text(RELEASE.engine_selector)
    assert args[:4] == ["--endpoint-selector", selector, "--endpoint-target-ports", "8000"]
    assert "--pool-name" not in args and "--ha-enable-leader-election" not in args
    assert {"--metrics-endpoint-auth=false", "--tracing=false"} <= set(args)
    assert args[args.index("--config-file") + 1] == "/config/epp-config.yaml"
    ports = {p["name"]: p["containerPort"] for p in epp["ports"]}
    assert ports == {"grpc": 9002, "grpc-health": 9003, "metrics": 9090}
    assert epp["readinessProbe"]["grpc"] == {"port": 9003, "service": "inference-extension"}
    assert {"NAMESPACE", "POD_NAME"} <= set(env_of(epp))
    assert {p["name"]: p["containerPort"] for p in envoy["ports"]}["http"] == 8000
    # No InferencePool, no HTTPRoute, no CRD of any kind: the EPP selects pods by label.
    assert not {o["kind"] for o in objects} & {"InferencePool", "HTTPRoute"}
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("http", 80),
        ("grpc-ext-proc", 9002),
        ("metrics", 9090),
    ]


def test_envoy_hands_every_request_to_the_epp_and_sends_it_where_the_epp_says(helm: Helm) -> None:
    objects = render_file(helm, STANDALONE)
    data = manifests.find(objects, "ConfigMap", RELEASE.router_config)["data"]
    envoy = yaml.safe_load(data["envoy.yaml"])
    listeners = by_name(envoy["static_resources"]["listeners"])
    manager = listeners["llm"]["filter_chains"][0]["filters"][0]["typed_config"]
    assert listeners["llm"]["address"]["socket_address"]["port_value"] == 8000
    for listener in listeners.values():  # IPv4 and IPv6, as llm-d's standalone preset
        port = listener["address"]["socket_address"]["port_value"]
        (also,) = listener["additional_addresses"]
        assert also["address"]["socket_address"] == {"address": "::", "port_value": port}
    # Envoy's default circuit breakers (1024) would answer 503 above 1024 requests in flight.
    clusters = by_name(envoy["static_resources"]["clusters"])
    for cluster in clusters.values():
        assert cluster["circuit_breakers"]["thresholds"][0]["max_requests"] == 40000
    ext_proc = manager["http_filters"][0]["typed_config"]
    assert ext_proc["processing_mode"]["request_body_mode"] == "FULL_DUPLEX_STREAMED"
    assert ext_proc["grpc_service"]["envoy_grpc"]["cluster_name"] == "ext_proc"
    clusters = by_name(envoy["static_resources"]["clusters"])
    assert clusters["original_destination_cluster"]["original_dst_lb_config"] == {
        "use_http_header": True,
        "http_header_name": "x-gateway-destination-endpoint",
    }
    epp = clusters["ext_proc"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert epp["endpoint"]["address"]["socket_address"] == {
        "address": "127.0.0.1",
        "port_value": 9002,
    }
    assert "transport_socket" in clusters["ext_proc"]  # the EPP serves TLS by default
    template = pod(objects, RELEASE.router_deployment)
    assert template["metadata"]["annotations"]["pd-stack.io/config-checksum"]


def test_the_pd_preset_filters_by_our_role_label(helm: Helm) -> None:
    config = epp_config(render_file(helm, STANDALONE))
    assert config["apiVersion"] == "llm-d.ai/v1alpha1"
    assert config["kind"] == "EndpointPickerConfig"
    plugins = {p.get("name", p["type"]): p for p in config["plugins"]}
    for profile, roles in (("prefill", ["prefill"]), ("decode", ["decode", "both"])):
        plugin = plugins[f"{profile}-pods"]
        assert plugin["type"] == "label-selector-filter"
        expression = {"key": naming.ROLE, "operator": "In", "values": roles}
        assert plugin["parameters"] == {"matchExpressions": [expression]}
    handler = plugins["disagg-profile-handler"]["parameters"]
    assert handler == {"deciders": {"prefill": "always-disagg-pd-decider"}}
    assert "always-disagg-pd-decider" in plugins
    profiles = {
        p["name"]: [r["pluginRef"] for r in p["plugins"]] for p in config["schedulingProfiles"]
    }
    assert profiles["prefill"][0] == "prefill-pods" and profiles["decode"][0] == "decode-pods"
    assert all("max-score-picker" in refs for refs in profiles.values())


def test_prefix_based_decider_and_raw_config(helm4: Helm, tmp_path: Path) -> None:
    scheduler = {"decider": "prefix-based", "nonCachedTokens": 48, "promptTokens": 256}
    scheduler["stageOrder"] = "decode-first"
    config = epp_config(render(helm4, tmp_path, edited(STANDALONE, scheduler=scheduler)))
    plugins = {p.get("name", p["type"]): p for p in config["plugins"]}
    assert plugins["prefix-based-pd-decider"]["parameters"] == {
        "nonCachedTokens": 48,
        "promptTokens": 256,
    }
    assert plugins["disagg-profile-handler"]["parameters"] == {
        "deciders": {"prefill": "prefix-based-pd-decider"},
        "stageOrder": "decode-first",
    }
    # v0.9.0's decider knows only nonCachedTokens (strict parameters: another stops the EPP).
    scheduler = {"decider": "prefix-based"}
    config = epp_config(
        render(helm4, tmp_path, edited(STANDALONE, version="v0.9.0", scheduler=scheduler))
    )
    plugins = {p.get("name", p["type"]): p for p in config["plugins"]}
    assert plugins["prefix-based-pd-decider"]["parameters"] == {"nonCachedTokens": 16}
    # prefill-first prefills every request and takes no decider (v0.10.0 refuses one).
    scheduler = {"stageOrder": "prefill-first"}
    config = epp_config(render(helm4, tmp_path, edited(STANDALONE, scheduler=scheduler)))
    types = [p["type"] for p in config["plugins"]]
    assert not [t for t in types if t.endswith("-pd-decider")]
    (handler,) = [p for p in config["plugins"] if p["type"] == "disagg-profile-handler"]
    assert handler["parameters"] == {"stageOrder": "prefill-first"}
    own = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\n"
    objects = render(helm4, tmp_path, edited(STANDALONE, scheduler={"config": own}))
    data = manifests.find(objects, "ConfigMap", RELEASE.router_config)["data"]
    assert data["epp-config.yaml"] == own


def test_decode_pods_run_the_sidecar_and_vllm_moves(helm: Helm) -> None:
    objects = render_file(helm, STANDALONE)
    decode = pod(objects, RELEASE.pool_deployment("qwen-decode"))
    (sidecar,) = decode["spec"]["initContainers"]
    assert sidecar["name"] == "llm-d-routing-sidecar" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
    assert sidecar["args"] == [
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]
    vllm = decode["spec"]["containers"][0]
    assert vllm["args"][vllm["args"].index("--port") + 1] == "8200"
    ports = {p["name"]: p["containerPort"] for p in vllm["ports"]}
    assert (ports["http"], ports[naming.VLLM_PORT]) == (8000, 8200)  # the sidecar's, vLLM's own
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert vllm[probe]["httpGet"]["port"] == naming.VLLM_PORT
    assert env_of(vllm)["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"] == "120"
    # Prefill pods serve vLLM on the engine port directly and have no sidecar.
    prefill = pod(objects, RELEASE.pool_deployment("qwen-prefill"))
    assert "initContainers" not in prefill["spec"]
    engine = prefill["spec"]["containers"][0]
    assert engine["args"][engine["args"].index("--port") + 1] == "8000"
    assert engine["readinessProbe"]["httpGet"]["port"] == "http"
    # Every engine pod carries its role label, which the EPP's filters select on.
    for pool, role in (("qwen-prefill", "prefill"), ("qwen-decode", "decode")):
        labels = pod(objects, RELEASE.pool_deployment(pool))["metadata"]["labels"]
        assert RELEASE.role_selector(role).items() <= labels.items()


def test_rbac_reads_pods_only_in_standalone_mode(helm4: Helm) -> None:
    objects = render_file(helm4, STANDALONE)
    role = manifests.find(objects, "Role", RELEASE.router_role)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    binding = manifests.find(objects, "RoleBinding", RELEASE.router_role_binding)
    assert binding["subjects"][0]["name"] == RELEASE.router_service_account


# ---- gateway mode ---------------------------------------------------------------------------


def test_gateway_mode_renders_an_inference_pool_and_a_route(helm: Helm) -> None:
    objects = render_file(helm, GATEWAY)
    pool = manifests.find(objects, "InferencePool", RELEASE.inference_pool)
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["spec"]["selector"]["matchLabels"] == RELEASE.engine_selector
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["endpointPickerRef"] == {
        "kind": "Service",
        "name": RELEASE.router_service,
        "port": {"number": 9002},
        "failureMode": "FailClose",
    }
    route = manifests.find(objects, "HTTPRoute", RELEASE.http_route)
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "inference-gateway",
            "namespace": "gateway-system",
        }
    ]
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [
        {
            "group": "inference.networking.k8s.io",
            "kind": "InferencePool",
            "name": RELEASE.inference_pool,
        }
    ]
    assert rule["timeouts"] == {"request": "600s"}
    spec = pod(objects, RELEASE.router_deployment)["spec"]
    assert [c["name"] for c in spec["containers"]] == ["epp"]  # the Gateway is the proxy
    args = spec["containers"][0]["args"]
    assert args[:4] == ["--pool-name", RELEASE.inference_pool, "--pool-namespace", "default"]
    assert "--ha-enable-leader-election" in args  # two replicas
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert [p["name"] for p in service["spec"]["ports"]] == ["grpc-ext-proc", "metrics"]
    assert not [o for o in objects if o["kind"] == "Pod"]  # no helm test through the router
    # Only the elected leader is Ready: a budget would keep drains from ever evicting it.
    assert not [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    rules = manifests.find(objects, "Role", RELEASE.router_role)["rules"]
    resources = {(tuple(r["apiGroups"]), tuple(r["resources"])): r["verbs"] for r in rules}
    assert resources[(("inference.networking.k8s.io",), ("inferencepools",))] == [
        "get",
        "list",
        "watch",
    ]
    assert "create" in resources[(("coordination.k8s.io",), ("leases",))]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_object_passes_strict_schemas_and_crds(helm: Helm, kube_version: str) -> None:
    """Built-in kinds against Kubernetes' schemas, InferencePool and HTTPRoute against their own
    CRDs (gateway-api-inference-extension v1.6.0, gateway-api v1.5.1)."""
    for path in (STANDALONE, GATEWAY):
        assert_kube_valid(render_file(helm, path), kube_version)
    objects = render_file(helm, GATEWAY)
    for kind in ("InferencePool", "HTTPRoute"):
        (obj,) = [o for o in objects if o["kind"] == kind]
        assert crd_schemas.is_custom(obj)
        assert crd_schemas.errors(obj, kube_version) == []


def test_the_crd_check_catches_a_misspelled_failure_mode() -> None:
    """The trap of llm-d's chart README: FailClosed is not in the CRD's enum."""
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {
                "name": "epp",
                "port": {"number": 9002},
                "failureMode": "FailClosed",
            },
        },
    }
    assert any("FailClosed" in e for e in crd_schemas.errors(pool, "1.35.0"))


def test_mooncake_sidecar_asks_prefill_on_its_bootstrap_port(helm4: Helm) -> None:
    objects = render_file(helm4, GATEWAY)
    decode = pod(objects, RELEASE.pool_deployment("mc-decode"))
    (sidecar,) = decode["spec"]["initContainers"]
    assert sidecar["args"] == [
        "--port=8000",
        "--model-server-port=8300",
        "--kv-connector=mooncake",
        "--secure-proxy=false",
        "--mooncake-bootstrap-port=9998",
        "--prefill-max-retries=2",
    ]


def test_the_release_table_decides_images_and_flags(helm4: Helm, tmp_path: Path) -> None:
    objects = render(helm4, tmp_path, edited(STANDALONE, version="v0.9.0"))
    images = {
        c["name"]: c["image"] for c in pod(objects, RELEASE.router_deployment)["spec"]["containers"]
    }
    assert images["epp"] == "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"
    (sidecar,) = pod(objects, RELEASE.pool_deployment("qwen-decode"))["spec"]["initContainers"]
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"
    assert "--vllm-port=8200" in sidecar["args"]  # v0.9.0 has no --model-server-port
    mirror = edited(STANDALONE, epp={"repository": "registry.example.com/llm-d/epp"})
    spec = pod(render(helm4, tmp_path, mirror), RELEASE.router_deployment)["spec"]
    assert spec["containers"][0]["image"] == f"registry.example.com/llm-d/epp:{TABLE['default']}"


def test_names_are_the_naming_modules(helm4: Helm) -> None:
    objects = render_file(helm4, GATEWAY)
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {
        ("ConfigMap", RELEASE.router_config),
        ("InferencePool", RELEASE.inference_pool),
        ("HTTPRoute", RELEASE.http_route),
        ("Deployment", RELEASE.router_deployment),
        ("Service", RELEASE.router_service),
    } <= names


def test_other_routers_render_no_llmd_objects(helm4: Helm) -> None:
    objects = render_file(helm4, ASSETS / "values-17-nixl-vllm-router.yaml")
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"ConfigMap", "InferencePool", "HTTPRoute", "PodDisruptionBudget"}
    decode = pod(objects, RELEASE.pool_deployment("qwen-decode"))
    assert "initContainers" not in decode["spec"]
    assert "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" not in env_of(decode["spec"]["containers"][0])


# ---- refusals: chart and validate alike -----------------------------------------------------

REFUSED = {
    "lmcache": (
        ASSETS / "values-19-lmcache-pd.yaml",
        {},
        "PD017",
        "does not speak LMCache's PD protocol",
    ),
    "pynccl": (ASSETS / "values-21-pynccl-seed.yaml", {}, "PD017", "has no PyNccl protocol"),
    "tutorial-lmcache": (
        ASSETS / "values-16-disagg-prefill.yaml",
        {},
        "PD017",
        "does not speak the tutorial's LMCache form",
    ),
    "gateway-without-name": (
        STANDALONE,
        {"mode": "gateway"},
        "PD022",
        "is required with routerSpec.llmd.mode gateway",
    ),
    "gateway-name-in-standalone": (
        STANDALONE,
        {"gateway": {"name": "gw"}},
        "PD022",
        "mode is standalone",
    ),
    "port-clash": (STANDALONE, {"sidecar": {"modelServerPort": 8000}}, "PD022", "modelServerPort"),
    "stage-order-on-v0.9": (
        STANDALONE,
        {"version": "v0.9.0", "scheduler": {"stageOrder": "prefill-first"}},
        "PD022",
        "needs llm-d-router v0.10.0",
    ),
    "raw-config-api-version": (
        STANDALONE,
        {"scheduler": {"config": "apiVersion: llm-d.ai/v1\nkind: EndpointPickerConfig\n"}},
        "PD022",
        "apiVersion",
    ),
}


def _refused_values(name: str) -> dict[str, Any]:
    path, llmd, _, _ = REFUSED[name]
    values = copy.deepcopy(load_values(path))
    router = values.setdefault("routerSpec", {})
    for key in ("vllmRouter", "lmcacheProxy", "routingLogic", "extraArgs", "repository", "tag"):
        router.pop(key, None)
    router["type"] = "llm-d"
    router["llmd"] = llmd
    if name == "lmcache":  # LMCache's senders report to a proxy (PD018 without one)
        sender = values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]
        sender.setdefault("lmcache", {})["proxyHost"] = "lmcache-proxy"
    return values


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_by_chart_and_validate(helm: Helm, tmp_path: Path, name: str) -> None:
    _, _, rule, text = REFUSED[name]
    path = write_values(tmp_path, _refused_values(name))
    result = helm_template_result(helm, path)
    assert result.returncode != 0 and f"[{rule}]" in result.stderr and text in result.stderr, (
        result.stderr
    )
    checked = runner.invoke(app, ["validate", str(path), "-o", "json"])
    assert checked.exit_code == 1, checked.output
    assert f'"{rule}"' in checked.stdout and text in checked.stdout


def test_tensor_parallelism_llm_d_requires(helm4: Helm, tmp_path: Path) -> None:
    """NIXL: decode TP >= prefill TP; Mooncake: equal TP (llm-d's P/D guide), chart and validate."""
    for path, prefill_tp, decode_tp in ((STANDALONE, 2, 1), (GATEWAY, 1, 2)):
        values = copy.deepcopy(load_values(path))
        for spec, tp in zip(
            values["servingEngineSpec"]["modelSpec"], (prefill_tp, decode_tp), strict=True
        ):
            spec.setdefault("vllmConfig", {})["tensorParallelSize"] = tp
            spec["requestGPU"] = tp
        file = write_values(tmp_path, values)
        result = helm_template_result(helm4, file)
        assert "[PD022]" in result.stderr and "tensorParallelSize" in result.stderr
        checked = runner.invoke(app, ["validate", str(file), "-o", "json"])
        assert checked.exit_code == 1 and '"PD022"' in checked.stdout
    # NIXL with more decode TP than prefill TP is fine.
    values = copy.deepcopy(load_values(STANDALONE))
    decode = values["servingEngineSpec"]["modelSpec"][1]
    decode["vllmConfig"]["tensorParallelSize"], decode["requestGPU"] = 2, 2
    assert helm_template_result(helm4, write_values(tmp_path, values)).returncode == 0


def test_epp_flags_and_plain_grpc(helm4: Helm, tmp_path: Path) -> None:
    """epp.flags are rendered --name=value; secure-serving false takes TLS off Envoy's hop too."""
    values = edited(STANDALONE, epp={"flags": {"secure-serving": False, "v": 3}})
    objects = render(helm4, tmp_path, values)
    args = pod(objects, RELEASE.router_deployment)["spec"]["containers"][0]["args"]
    assert {"--secure-serving=false", "--v=3"} <= set(args)
    data = manifests.find(objects, "ConfigMap", RELEASE.router_config)["data"]
    clusters = by_name(yaml.safe_load(data["envoy.yaml"])["static_resources"]["clusters"])
    assert "transport_socket" not in clusters["ext_proc"]
    refused = write_values(tmp_path, edited(STANDALONE, epp={"flags": {"pool-name": "x"}}))
    assert "pool-name" in helm_template_result(helm4, refused).stderr  # the chart's own flag
