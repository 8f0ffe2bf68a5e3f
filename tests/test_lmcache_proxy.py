"""LMCache's PD proxy as the release's router (routerSpec.type lmcache-proxy, tutorial 19): what the
chart renders for it, what the LMCache senders are pointed at, and what the chart and validate
refuse.

The proxy is LMCache's script examples/disagg_prefill/disagg_proxy_server.py; it is not in the
lmcache package, so it is not run here: its command line is checked against the flags of LMCache
0.3.7's script (below, read from the lmcache 0.3.7 sdist on PyPI, which carries the repository's
examples).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import manifests, naming, pipeline
from pdctl.cli.app import app
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
VALUES = ASSETS / "values-19-lmcache-pd.yaml"
BASE = load_values(VALUES)
# argparse options of LMCache 0.3.7 examples/disagg_prefill/disagg_proxy_server.py (parse_args),
# each taking one value; --proxy-host/--proxy-port are where its ZMQ PULL socket binds.
PROXY_FLAGS_0_3_7 = {
    "--port", "--host", "--prefiller-host", "--prefiller-port", "--num-prefillers",
    "--decoder-host", "--decoder-port", "--decoder-init-port", "--decoder-alloc-port",
    "--num-decoders", "--proxy-host", "--proxy-port",
}  # fmt: skip


def objects_of(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[manifests.Manifest]:
    assert errors(tmp_path, values) == []
    return render_file(helm, write_values(tmp_path, values))


def errors(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = write_values(tmp_path, values, "checked.yaml")
    return [
        f"{f.rule} {f.key}"
        for f in pipeline.validate([str(path)], pipeline.ValidateOptions()).errors
    ]


def proxy(objects: list[manifests.Manifest]) -> dict[str, Any]:
    return container(objects, RELEASE.router_deployment)


def options(args: list[str]) -> dict[str, str]:
    """The proxy's arguments as flag -> value (every flag of the script takes one value)."""
    assert len(args) % 2 == 0, args
    return dict(zip(args[::2], args[1::2], strict=True))


def test_tutorial_proxy(helm4: Helm, tmp_path: Path) -> None:
    objects = objects_of(helm4, tmp_path, BASE)
    router = proxy(objects)
    assert router["image"] == "lmcache/vllm-openai:v0.3.7"  # the engines' image
    assert router["command"] == [
        "/opt/venv/bin/python",
        "/opt/lmcache-pd-proxy/disagg_proxy_server.py",
    ]
    flags = options(router["args"])
    assert set(flags) <= PROXY_FLAGS_0_3_7
    assert flags == {
        "--host": "0.0.0.0",
        "--port": "8000",
        "--prefiller-host": RELEASE.pool_service("llama-prefill"),
        "--prefiller-port": "80",
        "--decoder-host": RELEASE.pool_service("llama-decode"),
        "--decoder-port": "80",
        "--decoder-init-port": "7300",
        "--decoder-alloc-port": "7400",
        "--proxy-host": "0.0.0.0",
        "--proxy-port": "7500",
    }
    assert {p["name"]: p["containerPort"] for p in router["ports"]} == {
        "http": 8000,
        "pd-notify": 7500,
    }
    # LMCache 0.3.7's proxy serves only POST routes: the probes connect to the port.
    assert router["readinessProbe"]["tcpSocket"] == {"port": "http"}
    assert "httpGet" not in router["livenessProbe"]
    pod = manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]["template"]
    assert pod["spec"]["volumes"] == [
        {"name": "lmcache-pd-proxy", "configMap": {"name": "lmcache-pd-proxy"}}
    ]
    assert router["volumeMounts"][0]["mountPath"] == "/opt/lmcache-pd-proxy"
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("http", 80),
        ("pd-notify", 7500),
    ]
    # The sender reports to that Service; no Kubernetes API, so no Role.
    sender = env_of(container(objects, RELEASE.pool_deployment("llama-prefill")))
    assert sender["LMCACHE_PD_PROXY_HOST"] == RELEASE.router_service
    assert sender["LMCACHE_PD_PROXY_PORT"] == "7500"
    assert not {"Role", "RoleBinding"} & {o["kind"] for o in objects}
    for kube in ("1.29.0", "1.35.0"):
        assert_kube_valid(objects, kube)


# LMCache 0.4.4 to 0.5.6 (the sdists on PyPI; none of them in 0.4.3): the script also sizes a
# semaphore over the decoder's PD buffer from the model's config.json.
PROXY_FLAGS_0_4_4 = PROXY_FLAGS_0_3_7 | {"--model", "--pd-buffer-size", "--chunk-size"}


@pytest.mark.parametrize(
    ("edit", "sized"),
    [
        ({"tag": "v0.5.6"}, True),  # lmcache/vllm-openai:vX.Y.Z carries LMCache X.Y.Z
        ({"tag": "v0.4.4"}, True),
        ({"tag": "v0.4.3"}, False),
        ({"tag": "nightly-2026-12-01"}, True),  # not known: the newest script's flags
        ({"tag": "nightly-2026-12-01", "lmcacheVersion": "0.3.7"}, False),
    ],
)
def test_the_proxys_flags_are_its_releases(
    helm4: Helm, tmp_path: Path, edit: dict[str, str], sized: bool
) -> None:
    """From LMCache 0.4.4 the chart renders --model (the pools' model, whose config.json the
    script reads: with the pool's Hugging Face token, mounted as the engines mount it),
    --pd-buffer-size (the smallest decode PD buffer: the proxy must not admit more KV than a
    receiver holds) and --chunk-size (LMCache's default, 256)."""
    values = copy.deepcopy(BASE)
    for spec in values["servingEngineSpec"]["modelSpec"]:
        spec["tag"] = edit["tag"]
    if "lmcacheVersion" in edit:
        values["routerSpec"]["lmcacheProxy"]["lmcacheVersion"] = edit["lmcacheVersion"]
    objects = objects_of(helm4, tmp_path, values)
    router = proxy(objects)
    flags = options(router["args"])
    volumes = manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]["template"][
        "spec"
    ]["volumes"]
    if not sized:
        assert set(flags) <= PROXY_FLAGS_0_3_7 and "env" not in router
        assert [v["name"] for v in volumes] == ["lmcache-pd-proxy"]
        return
    assert set(flags) <= PROXY_FLAGS_0_4_4
    assert flags["--model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert flags["--pd-buffer-size"] == "2147483648"  # the decode pool's kvBufferSize
    assert flags["--chunk-size"] == "256"
    assert env_of(router)["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    (token,) = [v for v in volumes if v["name"] == "hf-token"]
    assert token["secret"]["secretName"] == "hf-credentials"
    assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in (
        router["volumeMounts"]
    )
    for kube in ("1.29.0", "1.35.0"):
        assert_kube_valid(objects, kube)


def test_the_proxys_buffer_is_the_smallest_decoders(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(BASE)
    values["routerSpec"]["lmcacheProxy"]["lmcacheVersion"] = "0.5.6"
    second = copy.deepcopy(values["servingEngineSpec"]["modelSpec"][1])
    second.update(name="llama-decode-2", labels={"model": "llama-decode-2"})
    second["kvTransfer"]["kvBufferSize"] = 1073741824
    values["servingEngineSpec"]["modelSpec"].append(second)
    flags = options(proxy(objects_of(helm4, tmp_path, values))["args"])
    assert flags["--pd-buffer-size"] == "1073741824"


def test_helm_test_skips_health_for_the_proxy(helm4: Helm, tmp_path: Path) -> None:
    objects = objects_of(helm4, tmp_path, BASE)
    test_pod = manifests.find(objects, "Pod", RELEASE.router_test)
    script = test_pod["spec"]["containers"][0]["command"][-1]
    assert "/health" not in script.split("[ -n")[0] and "/v1/completions" in script


def test_xpyd_with_tensor_parallel_decoders(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(BASE)
    pools = values["servingEngineSpec"]["modelSpec"]
    prefill, decode = pools
    for spec in (decode,):
        spec["requestGPU"] = 2
        spec["vllmConfig"]["tensorParallelSize"] = 2
    pools.append({**copy.deepcopy(prefill), "name": "llama-prefill-2", "replicaCount": 3})
    pools.append({**copy.deepcopy(decode), "name": "llama-decode-2"})
    values["routerSpec"]["lmcacheProxy"]["notifyPort"] = 7600
    values["routerSpec"]["extraArgs"] = ["--num-prefillers", "1"]
    objects = objects_of(helm4, tmp_path, values)
    flags = options(proxy(objects)["args"])
    services = [RELEASE.pool_service(p) for p in ("llama-decode", "llama-decode-2")]
    assert flags["--decoder-host"] == ",".join(services)
    assert flags["--prefiller-host"] == ",".join(
        RELEASE.pool_service(p) for p in ("llama-prefill", "llama-prefill-2")
    )
    assert flags["--decoder-init-port"] == "7300,7301"
    assert flags["--decoder-alloc-port"] == "7400,7401"
    assert flags["--proxy-port"] == "7600" and flags["--num-prefillers"] == "1"
    for pool in ("llama-prefill", "llama-prefill-2"):
        assert (
            env_of(container(objects, RELEASE.pool_deployment(pool)))["LMCACHE_PD_PROXY_PORT"]
            == "7600"
        )


def test_script_inside_the_image(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(BASE)
    path = "/workspace/LMCache/examples/disagg_prefill/disagg_proxy_server.py"
    values["routerSpec"]["lmcacheProxy"] = {"scriptPath": path}
    for spec in values["servingEngineSpec"]["modelSpec"]:
        spec["tag"] = "nightly-2025-10-01"
        spec["imagePullSecret"] = "lmcache-registry"
    objects = objects_of(helm4, tmp_path, values)
    router = proxy(objects)
    assert router["command"] == ["/opt/venv/bin/python", path]
    assert router["image"] == "lmcache/vllm-openai:nightly-2025-10-01"
    # No script to mount; a nightly's script reads the model's config (--model): the token.
    assert [m["name"] for m in router["volumeMounts"]] == ["hf-token"]
    pod = manifests.find(objects, "Deployment", RELEASE.router_deployment)["spec"]["template"]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "lmcache-registry"}]


def test_api_key_reaches_the_proxy_as_openai_api_key(helm4: Helm, tmp_path: Path) -> None:
    """LMCache 0.3.7's proxy sends `Authorization: Bearer $OPENAI_API_KEY` to the engines."""
    values = copy.deepcopy(BASE)
    values["routerSpec"]["vllmApiKey"] = {"secretName": "vllm-api-key", "secretKey": "key"}
    env = env_of(proxy(objects_of(helm4, tmp_path, values)))
    assert env["OPENAI_API_KEY"] == {"secretKeyRef": {"name": "vllm-api-key", "key": "key"}}


def test_own_proxy_with_the_router_off(helm4: Helm, tmp_path: Path) -> None:
    """The earlier form: the router off and LMCache's proxy run beside the release."""
    values = copy.deepcopy(BASE)
    values["routerSpec"] = {"enableRouter": False}
    values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]["lmcache"] = {
        "proxyHost": "lmcache-pd-proxy",
        "proxyPort": 7500,
    }
    objects = objects_of(helm4, tmp_path, values)
    env = env_of(container(objects, RELEASE.pool_deployment("llama-prefill")))
    assert env["LMCACHE_PD_PROXY_HOST"] == "lmcache-pd-proxy"
    values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"].pop("lmcache")
    assert errors(tmp_path, values) == [
        "PD018 servingEngineSpec.modelSpec[0].kvTransfer.lmcache.proxyHost"
    ]


@pytest.mark.parametrize(
    ("edit", "finding"),
    [
        (
            lambda v: v["routerSpec"]["lmcacheProxy"].update(scriptPath="/x/p.py"),
            "PD017 routerSpec.lmcacheProxy",
        ),
        (
            lambda v: v["routerSpec"].update(serviceDiscovery="k8s"),
            "PD017 routerSpec.serviceDiscovery",
        ),
        (
            lambda v: v["servingEngineSpec"]["modelSpec"][0]["kvTransfer"].update(
                lmcache={"proxyHost": f"{RELEASE.router_service}.default.svc.cluster.local"}
            ),
            None,
        ),
        (
            lambda v: v["servingEngineSpec"]["modelSpec"][0]["kvTransfer"].update(
                lmcache={"proxyPort": 7500}
            ),
            None,
        ),
        (lambda v: v["routerSpec"].update(rootPath="/x"), "PD019 routerSpec.rootPath"),
    ],
    ids=["two-scripts", "k8s-discovery", "proxy-fqdn", "proxy-port-same", "root-path"],
)
def test_checks_agree(helm4: Helm, tmp_path: Path, edit: Any, finding: str | None) -> None:
    values = copy.deepcopy(BASE)
    edit(values)
    assert errors(tmp_path, values) == ([finding] if finding else [])
    chart = helm_template_result(helm4, write_values(tmp_path, values))
    if finding:
        assert chart.returncode != 0 and f"[{finding.split()[0]}]" in chart.stderr
    else:
        assert chart.returncode == 0, chart.stderr


def test_summary_names_the_proxy() -> None:
    result = CliRunner().invoke(app, ["template", "-f", str(VALUES), "--summary", "-o", "json"])
    assert result.exit_code == 0, result.output
    router = json.loads(result.stdout)["router"]
    assert router["name"] == RELEASE.router_deployment
    assert router["image"] == "lmcache/vllm-openai:v0.3.7"
    assert router["routing"] == "LMCache PD proxy (notifications on port 7500)"
