"""What each KV connector renders per role: the exact kv-transfer JSON, env, ports and Services.

Each values file is rendered once per session with Helm 4 (the `rendered` fixture);
test_chart_assets.py renders every file with both Helm versions and checks the Kubernetes schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from pdctl.naming import Release
from tests.helpers import (
    ASSETS,
    CI,
    TUTORIAL_VALUES,
    Render,
    container,
    env_of,
    extended,
    load_values,
    render_file,
    write_values,
)

POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def engine(objects: list[manifests.Manifest], pool: str) -> dict[str, Any]:
    return container(objects, f"pd-{pool}-deployment-vllm")


def pod(objects: list[manifests.Manifest], pool: str) -> dict[str, Any]:
    return manifests.find(objects, "Deployment", f"pd-{pool}-deployment-vllm")["spec"]["template"]


def kv_config(objects: list[manifests.Manifest], pool: str) -> dict[str, Any]:
    args = engine(objects, pool)["args"]
    return json.loads(args[args.index("--kv-transfer-config") + 1])


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def ports(objects: list[manifests.Manifest], pool: str) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in engine(objects, pool)["ports"]}


def service_ports(objects: list[manifests.Manifest], pool: str) -> dict[str, int]:
    service = manifests.find(objects, "Service", f"pd-{pool}-engine-service")
    return {p["name"]: p["port"] for p in service["spec"]["ports"]}


def role_label(objects: list[manifests.Manifest], pool: str) -> str:
    return pod(objects, pool)["metadata"]["labels"]["pd-stack.io/role"]


# ---- NIXL 1P1D (tutorial 17) -------------------------------------------------------------


@pytest.fixture(scope="module")
def nixl(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, ASSETS / "values-17-nixl-vllm-router.yaml")


@pytest.mark.parametrize(
    ("pool", "role", "kv_role"),
    [("qwen-prefill", "prefill", "kv_producer"), ("qwen-decode", "decode", "kv_consumer")],
)
def test_nixl_per_role(nixl: list[manifests.Manifest], pool: str, role: str, kv_role: str) -> None:
    # vLLM deprecates kv_both for NixlConnector (PR #43874): prefill kv_producer, decode
    # kv_consumer. v0.33.0 has kv_load_failure_policy (PR #26813), so the chart states it.
    assert kv_config(nixl, pool) == {
        "kv_connector": "NixlConnector",
        "kv_role": kv_role,
        "kv_load_failure_policy": "fail",
    }
    env = env_of(engine(nixl, pool))
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == POD_IP
    assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
    assert "engine_id" not in kv_config(nixl, pool)
    assert ports(nixl, pool) == {"http": 8000, "nixl-side-0": 5600}
    assert service_ports(nixl, pool) == {"http": 80, "nixl-side-0": 5600}
    assert role_label(nixl, pool) == role
    engine_spec = engine(nixl, pool)
    assert engine_spec["image"] == "vllm/vllm-openai:v0.33.0"
    assert engine_spec["command"] == ["vllm"]
    assert engine_spec["args"][:6] == [
        "serve",
        "Qwen/Qwen2.5-7B-Instruct",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    ]


def test_nixl_has_no_host_level_settings_by_default(nixl: list[manifests.Manifest]) -> None:
    for pool in ("qwen-prefill", "qwen-decode"):
        spec = pod(nixl, pool)["spec"]
        assert not spec.get("hostIPC")
        # Every capability dropped (the chart's default), none added back.
        assert engine(nixl, pool)["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        env = env_of(engine(nixl, pool))
        assert "UCX_TLS" not in env and "UCX_NET_DEVICES" not in env
        assert set(extended(engine(nixl, pool)["resources"]["limits"])) == {"nvidia.com/gpu"}


# ---- NIXL xPyD (tutorial 18) -------------------------------------------------------------


@pytest.fixture(scope="module")
def xpyd(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, ASSETS / "values-18-nixl-xpyd.yaml")


def test_xpyd_pools(xpyd: list[manifests.Manifest]) -> None:
    prefill = manifests.find(xpyd, "Deployment", "pd-llama-prefill-deployment-vllm")
    decode = manifests.find(xpyd, "Deployment", "pd-llama-decode-deployment-vllm")
    assert prefill["spec"]["replicas"] == 2 and decode["spec"]["replicas"] == 1
    assert arg(engine(xpyd, "llama-prefill")["args"], "--tensor-parallel-size") == "1"
    assert arg(engine(xpyd, "llama-decode")["args"], "--tensor-parallel-size") == "2"
    assert extended(engine(xpyd, "llama-decode")["resources"]["limits"]) == {"nvidia.com/gpu": "2"}
    # Two TP workers: /dev/shm is memory-backed; side-channel ports cover both TP ranks.
    volumes = {v["name"]: v for v in pod(xpyd, "llama-decode")["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert ports(xpyd, "llama-decode") == {"http": 8000, "nixl-side-0": 5600, "nixl-side-1": 5601}
    assert ports(xpyd, "llama-prefill") == {"http": 8000, "nixl-side-0": 5600}
    assert "dshm" not in {v["name"] for v in pod(xpyd, "llama-prefill")["spec"]["volumes"]}


# ---- LMCache current (tutorial 19) -------------------------------------------------------


@pytest.fixture(scope="module")
def lmcache(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, ASSETS / "values-19-lmcache-pd.yaml")


def test_lmcache_sender(lmcache: list[manifests.Manifest]) -> None:
    assert kv_config(lmcache, "llama-prefill") == {
        "kv_connector": "LMCacheConnectorV1",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {
            "discard_partial_chunks": False,
            "lmcache_rpc_port": "llama-prefill",
        },
    }
    env = env_of(engine(lmcache, "llama-prefill"))
    expected = {
        "PYTHONHASHSEED": "123",
        "LMCACHE_LOCAL_CPU": "False",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "0",
        "LMCACHE_ENABLE_PD": "True",
        "LMCACHE_TRANSFER_CHANNEL": "nixl",
        "LMCACHE_NIXL_BACKENDS": "UCX",
        "LMCACHE_PD_ROLE": "sender",
        "LMCACHE_PD_BUFFER_SIZE": "2147483648",  # the decode's (PD119)
        "LMCACHE_PD_BUFFER_DEVICE": "cuda",
        # vLLM's V1 model runner: on 0.26's V2 the decode loaded nothing (the leak record).
        "VLLM_USE_V2_MODEL_RUNNER": "0",
        # The LMCache proxy the chart deploys (routerSpec.type lmcache-proxy): the router Service.
        "LMCACHE_PD_PROXY_HOST": Release("pd").router_service,
        "LMCACHE_PD_PROXY_PORT": "7500",
        "UCX_TLS": "cuda_copy,tcp",
    }
    assert {k: env[k] for k in expected} == expected
    assert not any(k.startswith("LMCACHE_PD_PEER") for k in env)
    # The May-2025 keys are not rendered in the current form (enable_nixl is unknown to it).
    assert "LMCACHE_ENABLE_NIXL" not in env and "LMCACHE_USE_EXPERIMENTAL" not in env
    assert ports(lmcache, "llama-prefill") == {"http": 8000}


def test_lmcache_receiver(lmcache: list[manifests.Manifest]) -> None:
    assert kv_config(lmcache, "llama-decode")["kv_connector_extra_config"] == {
        "discard_partial_chunks": False,
        "lmcache_rpc_port": "llama-decode",
        "skip_last_n_tokens": 1,
    }
    env = env_of(engine(lmcache, "llama-decode"))
    assert env["LMCACHE_PD_ROLE"] == "receiver"
    assert env["LMCACHE_PD_PEER_HOST"] == POD_IP
    assert env["LMCACHE_PD_PEER_INIT_PORT"] == "7300"
    assert env["LMCACHE_PD_PEER_ALLOC_PORT"] == "7400"
    assert env["LMCACHE_PD_BUFFER_SIZE"] == "2147483648"
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert "LMCACHE_PD_PROXY_HOST" not in env
    assert ports(lmcache, "llama-decode") == {"http": 8000, "lmc-init-0": 7300, "lmc-alloc-0": 7400}
    assert service_ports(lmcache, "llama-decode")["lmc-init-0"] == 7300


def test_lmcache_receiver_ports_per_tp_rank(helm4: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-19-lmcache-pd.yaml")
    decode = values["servingEngineSpec"]["modelSpec"][1]
    decode["vllmConfig"]["tensorParallelSize"] = 2
    decode["requestGPU"] = 2
    objects = render_file(helm4, write_values(tmp_path, values, "v.yaml"))
    env = env_of(engine(objects, "llama-decode"))
    assert env["LMCACHE_PD_PEER_INIT_PORT"] == "7300,7301"
    assert env["LMCACHE_PD_PEER_ALLOC_PORT"] == "7400,7401"
    assert {"lmc-init-1", "lmc-alloc-1"} <= set(service_ports(objects, "llama-decode"))


def _multiproc(objects: list[manifests.Manifest], pool: str) -> tuple[Any, list[Any], list[Any]]:
    """The engine's PROMETHEUS_MULTIPROC_DIR, the mounts at it, and the volumes named for it."""
    env = env_of(engine(objects, pool)).get("PROMETHEUS_MULTIPROC_DIR")
    mounts = [m for m in engine(objects, pool)["volumeMounts"] if m["mountPath"] == env]
    volumes = [
        v for v in pod(objects, pool)["spec"]["volumes"] if v["name"] == "prometheus-multiproc"
    ]
    return env, mounts, volumes


def test_lmcache_engines_count_in_a_prometheus_multiproc_dir_of_their_own(
    lmcache: list[manifests.Manifest],
) -> None:
    """LMCache counts in vLLM's engine core: its metrics reach /metrics only with
    PROMETHEUS_MULTIPROC_DIR, an empty folder of the pod's own (an emptyDir)."""
    for pool in ("llama-prefill", "llama-decode"):
        env, mounts, volumes = _multiproc(lmcache, pool)
        assert env == "/tmp/prometheus"
        assert mounts == [{"name": "prometheus-multiproc", "mountPath": "/tmp/prometheus"}]
        assert volumes == [{"name": "prometheus-multiproc", "emptyDir": {}}]


def test_prometheus_multiproc_dir_is_a_value(helm4: Helm, tmp_path: Path) -> None:
    """Off with "", elsewhere with a path (any pool), a volume of the user's own where
    extraVolumeMounts mount one there; not on other connectors' pools by default."""
    values = load_values(ASSETS / "values-19-lmcache-pd.yaml")
    prefill, decode = values["servingEngineSpec"]["modelSpec"]
    prefill["vllmConfig"]["prometheusMultiprocDir"] = ""
    decode["vllmConfig"]["prometheusMultiprocDir"] = "/run/prom"
    decode["extraVolumes"] = [{"name": "mine", "emptyDir": {"medium": "Memory"}}]
    decode["extraVolumeMounts"] = [{"name": "mine", "mountPath": "/run/prom"}]
    objects = render_file(helm4, write_values(tmp_path, values, "v.yaml"))
    assert _multiproc(objects, "llama-prefill") == (None, [], [])
    env, mounts, volumes = _multiproc(objects, "llama-decode")
    assert env == "/run/prom" and mounts == [{"name": "mine", "mountPath": "/run/prom"}]
    assert volumes == []
    nixl = render_file(helm4, ASSETS / "values-17-nixl-vllm-router.yaml")
    assert _multiproc(nixl, "qwen-prefill") == (None, [], [])


# ---- Mooncake (tutorial 20 and a static-router scenario) ---------------------------------


@pytest.fixture(scope="module")
def mooncake(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, ASSETS / "values-20-mooncake.yaml")


def test_mooncake_per_role(mooncake: list[manifests.Manifest]) -> None:
    extra = {"mooncake_protocol": "rdma", "device_name": "mlx5_0"}
    assert kv_config(mooncake, "qwen-prefill") == {
        "kv_connector": "MooncakeConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": extra,
    }
    assert kv_config(mooncake, "qwen-decode") == {
        "kv_connector": "MooncakeConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": extra,
    }
    prefill_env = env_of(engine(mooncake, "qwen-prefill"))
    decode_env = env_of(engine(mooncake, "qwen-decode"))
    assert prefill_env["VLLM_MOONCAKE_BOOTSTRAP_PORT"] == "8998"
    assert "VLLM_MOONCAKE_BOOTSTRAP_PORT" not in decode_env
    assert prefill_env["VLLM_HOST_IP"] == decode_env["VLLM_HOST_IP"] == POD_IP
    assert ports(mooncake, "qwen-prefill") == {"http": 8000, "mc-bootstrap": 8998}
    assert ports(mooncake, "qwen-decode") == {"http": 8000}
    annotations = pod(mooncake, "qwen-prefill")["metadata"]["annotations"]
    assert annotations == {"vllm.ai/bootstrap-port": "8998"}
    assert "annotations" not in pod(mooncake, "qwen-decode")["metadata"]


def test_mooncake_rdma_options(mooncake: list[manifests.Manifest]) -> None:
    for pool in ("qwen-prefill", "qwen-decode"):
        c = engine(mooncake, pool)
        assert extended(c["resources"]["limits"]) == {"nvidia.com/gpu": "1", "rdma/ib": "1"}
        assert c["resources"]["requests"]["rdma/ib"] == "1"
        assert c["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
        assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_mooncake_static_router_passes_bootstrap_port(helm4: Helm, rendered: Render) -> None:
    objects = rendered(helm4, CI / "mooncake-static-values.yaml")
    assert kv_config(objects, "mc-prefill")["kv_connector_extra_config"] == {
        "mooncake_protocol": "tcp"
    }
    assert env_of(engine(objects, "mc-prefill"))["VLLM_MOONCAKE_BOOTSTRAP_PORT"] == "9998"
    args = container(objects, "pd-deployment-router")["args"]
    i = args.index("--prefill")
    assert args[i : i + 3] == ["--prefill", "http://pd-mc-prefill-engine-service:80", "9998"]
    assert arg(args, "--kv-connector") == "mooncake"


# ---- P2pNccl (scenario) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def p2p(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, CI / "p2pnccl-static-router-values.yaml")


def test_p2pnccl_per_role(p2p: list[manifests.Manifest]) -> None:
    extra = {
        "proxy_ip": "pd-router-service",
        "proxy_port": "30001",
        "http_port": "8000",
        "send_type": "PUT_ASYNC",
        "nccl_num_channels": "16",
    }
    assert kv_config(p2p, "p") == {
        "kv_connector": "P2pNcclConnector",
        "kv_role": "kv_producer",
        "kv_port": 21001,
        "kv_buffer_size": 1,
        "kv_connector_extra_config": extra,
    }
    assert kv_config(p2p, "d") == {
        "kv_connector": "P2pNcclConnector",
        "kv_role": "kv_consumer",
        "kv_port": 22001,
        "kv_buffer_size": 8e9,
        "kv_connector_extra_config": extra,
    }
    for pool, port in (("p", 21001), ("d", 22001)):
        env = env_of(engine(p2p, pool))
        assert env["VLLM_HOST_IP"] == POD_IP
        # v0.15.1 >= v0.14.0: request-id randomisation must be off for P2pNccl (PR #34415).
        assert env["VLLM_DISABLE_REQUEST_ID_RANDOMIZATION"] == "1"
        assert ports(p2p, pool) == {"http": 8000, "p2p-zmq-0": port}


def test_p2pnccl_router_registration_port(p2p: list[manifests.Manifest]) -> None:
    router = container(p2p, "pd-deployment-router")
    assert arg(router["args"], "--vllm-discovery-address") == "0.0.0.0:30001"
    assert {"name": "discovery", "containerPort": 30001, "protocol": "TCP"} in router["ports"]
    service = manifests.find(p2p, "Service", "pd-router-service")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "http": 80,
        "metrics": 29000,
        "discovery": 30001,
    }


# ---- PyNccl: the seed example (tutorial 21) ----------------------------------------------


@pytest.fixture(scope="module")
def seed(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, ASSETS / "values-21-pynccl-seed.yaml")


def test_pynccl_seed_pair(seed: list[manifests.Manifest]) -> None:
    # examples/offline_inference/disaggregated_prefill.py: rank 0 producer, rank 1 consumer.
    assert kv_config(seed, "seed-prefill") == {
        "kv_connector": "PyNcclConnector",
        "kv_role": "kv_producer",
        "kv_rank": 0,
        "kv_parallel_size": 2,
        "kv_ip": "$(POD_IP)",
        "kv_port": 14579,
    }
    assert kv_config(seed, "seed-decode") == {
        "kv_connector": "PyNcclConnector",
        "kv_role": "kv_consumer",
        "kv_rank": 1,
        "kv_parallel_size": 2,
        "kv_ip": "pd-seed-prefill-engine-service",
        "kv_port": 14579,
    }
    for pool in ("seed-prefill", "seed-decode"):
        c = engine(seed, pool)
        assert c["image"] == "vllm/vllm-openai:v0.9.2"
        assert c["args"][:2] == ["serve", "meta-llama/Meta-Llama-3.1-8B-Instruct"]
        assert arg(c["args"], "--max-model-len") == "2000"
        assert arg(c["args"], "--gpu-memory-utilization") == "0.8"
        assert extended(c["resources"]["limits"]) == {"nvidia.com/gpu": "1"}
        env = env_of(c)
        assert env["VLLM_USE_V1"] == "0"
        # $(POD_IP) in the prefill's args is expanded by Kubernetes from this env entry.
        assert env["POD_IP"] == POD_IP


def test_pynccl_decode_reaches_prefill_ports(seed: list[manifests.Manifest]) -> None:
    # TP 1: the data pipe on kv_port and the signal pipe on kv_port + 1 (pynccl_pipe.py).
    assert ports(seed, "seed-prefill") == {"http": 8000, "pynccl-0": 14579, "pynccl-1": 14580}
    assert ports(seed, "seed-decode") == {"http": 8000}
    kv_ip = kv_config(seed, "seed-decode")["kv_ip"]
    service = manifests.find(seed, "Service", kv_ip)
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        "http": (80, "http"),
        "pynccl-0": (14579, "pynccl-0"),
        "pynccl-1": (14580, "pynccl-1"),
    }
    labels = pod(seed, "seed-prefill")["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert (
        not service["spec"]["selector"].items()
        <= pod(seed, "seed-decode")["metadata"]["labels"].items()
    )


def test_pynccl_router_is_the_tutorial_router(seed: list[manifests.Manifest]) -> None:
    args = container(seed, "pd-deployment-router")["args"]
    assert arg(args, "--routing-logic") == "disaggregated_prefill"
    assert args[-4:] == [
        "--prefill-model-labels",
        "seed-prefill",
        "--decode-model-labels",
        "seed-decode",
    ]


# ---- Scenarios: RDMA + hetero TP, DP + custom image --------------------------------------


@pytest.fixture(scope="module")
def rdma(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, CI / "nixl-rdma-hetero-tp-values.yaml")


def test_rdma_hetero_tp(rdma: list[manifests.Manifest]) -> None:
    prefill, decode = engine(rdma, "prefill-tp2"), engine(rdma, "decode-tp4")
    assert kv_config(rdma, "prefill-tp2") == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
        "kv_load_failure_policy": "fail",
    }
    assert kv_config(rdma, "decode-tp4")["kv_role"] == "kv_consumer"
    for c in (prefill, decode):
        assert arg(c["args"], "--kv-cache-dtype") == "fp8"
        assert arg(c["args"], "--block-size") == "128"
        assert "--enforce-eager" not in c["args"]
        env = env_of(c)
        assert env["UCX_TLS"] == "rc,cuda_copy,cuda_ipc"
        assert env["UCX_NET_DEVICES"] == "mlx5_0:1"
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert arg(prefill["args"], "--pipeline-parallel-size") == "1"
    assert extended(prefill["resources"]["limits"]) == {"nvidia.com/gpu": "2", "rdma/ib": "1"}
    assert extended(decode["resources"]["limits"]) == {"nvidia.com/gpu": "4", "rdma/ib": "1"}
    assert set(ports(rdma, "decode-tp4")) == {"http"} | {f"nixl-side-{i}" for i in range(4)}
    prefill_pod = pod(rdma, "prefill-tp2")["spec"]
    assert prefill_pod["hostIPC"] is True
    assert prefill_pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert prefill_pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "podAntiAffinity" in prefill_pod["affinity"]
    assert pod(rdma, "decode-tp4")["spec"]["hostIPC"] is True  # it lists cuda_ipc too


@pytest.fixture(scope="module")
def dp(helm4: Helm, rendered: Render) -> list[manifests.Manifest]:
    return rendered(helm4, CI / "nixl-dp-recompute-values.yaml")


def test_dp_and_stated_version(dp: list[manifests.Manifest]) -> None:
    decode = engine(dp, "decode-dp")
    assert arg(decode["args"], "--data-parallel-size") == "2"
    assert extended(decode["resources"]["limits"]) == {"nvidia.com/gpu": "2"}
    # One side-channel port per DP rank (base 6600).
    assert ports(dp, "decode-dp") == {"http": 8000, "nixl-side-0": 6600, "nixl-side-1": 6601}
    assert env_of(decode)["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "6600"
    assert kv_config(dp, "decode-dp")["kv_load_failure_policy"] == "recompute"
    assert kv_config(dp, "prefill") == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
        "kv_buffer_device": "cpu",
        "kv_load_failure_policy": "recompute",
    }
    assert "--disable-hybrid-kv-cache-manager" in engine(dp, "prefill")["args"]
    # Roles: implied by kvTransfer.kvRole, or stated.
    assert role_label(dp, "prefill") == "prefill"
    assert role_label(dp, "decode-dp") == "decode"
    assert role_label(dp, "aggregated") == "both"
    assert "--kv-transfer-config" not in engine(dp, "aggregated")["args"]


def test_tutorial_lmcache_pools_keep_their_implied_role(helm4: Helm, rendered: Render) -> None:
    objects = rendered(helm4, TUTORIAL_VALUES)
    assert role_label(objects, "llama-prefill") == "prefill"
    assert role_label(objects, "llama-decode") == "decode"


def test_extra_config_is_merged_and_wins(helm4: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-20-mooncake.yaml")
    kt = values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]
    kt["extraConfig"] = {"num_workers": 4, "mooncake_protocol": "tcp"}
    values["servingEngineSpec"]["modelSpec"][1]["kvTransfer"]["mooncake"]["protocol"] = "tcp"
    nixl_values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    nixl_values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]["extraConfig"] = {
        "backends": ["UCX", "GDS"]
    }
    mc = render_file(helm4, write_values(tmp_path, values, "mc.yaml"))
    assert kv_config(mc, "qwen-prefill")["kv_connector_extra_config"] == {
        "mooncake_protocol": "tcp",
        "device_name": "mlx5_0",
        "num_workers": 4,
    }
    nixl_objects = render_file(helm4, write_values(tmp_path, nixl_values, "nixl.yaml"))
    assert kv_config(nixl_objects, "qwen-prefill")["kv_connector_extra_config"] == {
        "backends": ["UCX", "GDS"]
    }
    assert "kv_connector_extra_config" not in kv_config(nixl_objects, "qwen-decode")


def test_summary_names_the_vllm_router(nixl: list[manifests.Manifest]) -> None:
    summary = manifests.summarize(nixl)
    assert summary.router["routing"] == "vllm-router PD (nixl)"
    assert {p.name: p.role for p in summary.pools} == {
        "qwen-prefill": "prefill",
        "qwen-decode": "decode",
    }
