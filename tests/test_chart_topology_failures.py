"""Combinations the chart refuses (Helm `fail` or the strict schema), with messages that name
the key path; plus the golden render of the PD tutorial."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import (
    CHART,
    ROOT,
    TUTORIAL_VALUES,
    helm_template_result,
    pinned_helm,
    write_values,
)

ASSETS = ROOT / "tutorials" / "assets"
NIXL = yaml.safe_load((ASSETS / "values-17-nixl-vllm-router.yaml").read_text())
SEED = yaml.safe_load((ASSETS / "values-21-pynccl-seed.yaml").read_text())
LMCACHE = yaml.safe_load((ASSETS / "values-19-lmcache-pd.yaml").read_text())
MOONCAKE = yaml.safe_load((ASSETS / "values-20-mooncake.yaml").read_text())
TUTORIAL = yaml.safe_load(TUTORIAL_VALUES.read_text())


def change(base: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    values = copy.deepcopy(base)
    edit(values)
    return values


def pool(values: dict[str, Any], i: int) -> dict[str, Any]:
    return values["servingEngineSpec"]["modelSpec"][i]


def _set(i: int, path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(values: dict[str, Any]) -> None:
        target = pool(values, i)
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return edit


def _both(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(values: dict[str, Any]) -> None:
        for e in edits:
            e(values)

    return edit


REFUSED = {
    "requestGPU below TP": (
        NIXL,
        _set(0, "vllmConfig.tensorParallelSize", 2),
        "servingEngineSpec.modelSpec[0].requestGPU is 1 but the pool's parallelism needs 2 GPUs",
    ),
    "requestGPU below TP x PP x DP": (
        NIXL,
        _both(
            _set(1, "vllmConfig.pipelineParallelSize", 2),
            _set(1, "vllmConfig.dataParallelSize", 2),
            _set(1, "requestGPU", 2),
        ),
        "servingEngineSpec.modelSpec[1].requestGPU is 2 but the pool's parallelism needs 4 GPUs",
    ),
    "lmcacheConfig with kvTransfer": (
        TUTORIAL,
        _set(0, "kvTransfer", {"connector": "NixlConnector"}),
        "servingEngineSpec.modelSpec[0]: lmcacheConfig (the tutorial's LMCache form) and "
        "kvTransfer are mutually exclusive",
    ),
    "role contradicting lmcacheConfig.kvRole": (
        TUTORIAL,
        _set(0, "role", "decode"),
        'servingEngineSpec.modelSpec[0].role is "decode" but lmcacheConfig.kvRole',
    ),
    "role contradicting kvTransfer.kvRole": (
        NIXL,
        _set(0, "kvTransfer.kvRole", "kv_consumer"),
        'servingEngineSpec.modelSpec[0].kvTransfer.kvRole "kv_consumer" contradicts',
    ),
    "PyNccl on a vLLM without it": (
        SEED,
        _both(_set(0, "tag", "v0.11.0"), _set(1, "tag", "v0.11.0")),
        "servingEngineSpec.modelSpec[0].kvTransfer.connector PyNcclConnector is not in vLLM 0.11.0",
    ),
    "PyNccl on a custom image stated too new": (
        SEED,
        _both(
            _set(0, "repository", "registry.example.com/vllm"),
            _set(0, "tag", "latest"),
            _set(0, "vllmVersion", "0.10.1"),
        ),
        "PyNcclConnector is not in vLLM 0.10.1",
    ),
    "PyNccl with the V1 engine": (
        SEED,
        _set(1, "vllmConfig.v1", 1),
        "servingEngineSpec.modelSpec[1].vllmConfig.v1 is 1 but PyNcclConnector runs only on the V0",
    ),
    "PyNccl with two replicas": (
        SEED,
        _set(0, "replicaCount", 2),
        "servingEngineSpec.modelSpec[0].replicaCount must be 1 with PyNcclConnector",
    ),
    "PyNccl decode without peerPool": (
        SEED,
        lambda v: pool(v, 1)["kvTransfer"].pop("peerPool"),
        "servingEngineSpec.modelSpec[1].kvTransfer.peerPool is required",
    ),
    "peerPool naming no pool": (
        SEED,
        _set(1, "kvTransfer.peerPool", "nope"),
        'servingEngineSpec.modelSpec[1].kvTransfer.peerPool "nope" names no pool',
    ),
    "P2pNccl after its removal": (
        NIXL,
        _both(
            _set(0, "tag", "v0.23.0"),
            _set(0, "kvTransfer", {"connector": "P2pNcclConnector"}),
            lambda v: v["routerSpec"]["vllmRouter"].pop("kvConnector"),
        ),
        "servingEngineSpec.modelSpec[0].kvTransfer.connector P2pNcclConnector is not in vLLM "
        "0.23.0",
    ),
    "P2pNccl before it existed": (
        NIXL,
        _both(_set(0, "tag", "v0.9.1"), _set(0, "kvTransfer", {"connector": "P2pNcclConnector"})),
        "P2pNcclConnector is not in vLLM 0.9.1",
    ),
    "loadFailurePolicy on a vLLM without the field": (
        NIXL,
        _both(_set(0, "tag", "v0.11.0"), _set(0, "kvTransfer.loadFailurePolicy", "fail")),
        "servingEngineSpec.modelSpec[0].kvTransfer.loadFailurePolicy: vLLM 0.11.0 has no "
        "kv_load_failure_policy",
    ),
    "Mooncake on an aggregated pool": (
        MOONCAKE,
        _set(0, "role", "both"),
        "servingEngineSpec.modelSpec[0].kvTransfer.connector MooncakeConnector needs a prefill "
        "or a decode pool",
    ),
    "LMCache on an aggregated pool": (
        LMCACHE,
        _set(1, "role", "both"),
        "servingEngineSpec.modelSpec[1].kvTransfer.connector LMCacheConnectorV1 needs a prefill",
    ),
    "LMCache sender without a proxy": (
        LMCACHE,
        lambda v: pool(v, 0)["kvTransfer"].pop("lmcache"),
        "servingEngineSpec.modelSpec[0].kvTransfer.lmcache.proxyHost is required",
    ),
    "vllm-router with Mooncake engines but nixl": (
        MOONCAKE,
        lambda v: v["routerSpec"]["vllmRouter"].__setitem__("kvConnector", "nixl"),
        "routerSpec.vllmRouter.kvConnector must be mooncake",
    ),
    "vllm-router mooncake with NIXL engines": (
        NIXL,
        lambda v: v["routerSpec"]["vllmRouter"].__setitem__("kvConnector", "mooncake"),
        "routerSpec.vllmRouter.kvConnector is mooncake but no engine pool uses",
    ),
    "vllm-router with LMCache engines": (
        LMCACHE,
        lambda v: v.__setitem__(
            "routerSpec",
            {"type": "vllm-router", "repository": "registry.example.com/r", "tag": "1"},
        ),
        "routerSpec.type vllm-router cannot route LMCacheConnectorV1 pools",
    ),
    "vllm-router with the tutorial's LMCache": (
        TUTORIAL,
        lambda v: v["routerSpec"].__setitem__("type", "vllm-router"),
        "routerSpec.type vllm-router cannot route the tutorial's LMCache pools",
    ),
    "static vllm-router without decode pools": (
        NIXL,
        _both(
            lambda v: v["routerSpec"]["vllmRouter"].__setitem__("serviceDiscovery", "static"),
            lambda v: v["servingEngineSpec"]["modelSpec"].pop(1),
        ),
        "routerSpec.vllmRouter.serviceDiscovery static needs at least one prefill and one decode",
    ),
    # The strict schema.
    "unknown connector": (
        NIXL,
        _set(0, "kvTransfer.connector", "SharedStorageConnector"),
        "connector",
    ),
    "unknown key in kvTransfer": (NIXL, _set(0, "kvTransfer.engineId", "x"), "engineId"),
    "unknown key in network": (NIXL, _set(0, "network.rdma", True), "rdma"),
    "bad role": (NIXL, _set(0, "role", "prefiller"), "role"),
    "bad vllmVersion": (NIXL, _set(0, "vllmVersion", "v0.12"), "vllmVersion"),
    "bad kvCacheDtype": (NIXL, _set(0, "vllmConfig.kvCacheDtype", "int8"), "kvCacheDtype"),
    "bad router policy": (
        NIXL,
        lambda v: v["routerSpec"]["vllmRouter"].__setitem__("decodePolicy", "least_load"),
        "decodePolicy",
    ),
    "bad router type": (
        NIXL,
        lambda v: v["routerSpec"].__setitem__("type", "sglang"),
        "type",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(tmp_path: Path, case: str) -> None:
    base, edit, message = REFUSED[case]
    result = helm_template_result(pinned_helm("4.1.4"), write_values(tmp_path, change(base, edit)))
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"{case}: rendered although it should fail"
    assert message in output, output


def test_refused_with_helm3_too(tmp_path: Path) -> None:
    base, edit, message = REFUSED["PyNccl on a vLLM without it"]
    result = helm_template_result(pinned_helm("3.17.2"), write_values(tmp_path, change(base, edit)))
    assert result.returncode != 0 and message in result.stderr


def test_unknown_version_renders_without_gates(tmp_path: Path) -> None:
    """A tag that names no vLLM version (and no vllmVersion) is not second-guessed."""
    values = change(
        SEED,
        _both(
            _set(0, "repository", "registry.example.com/vllm"),
            _set(0, "tag", "latest"),
            _set(1, "repository", "registry.example.com/vllm"),
            _set(1, "tag", "latest"),
        ),
    )
    result = helm_template_result(pinned_helm("4.1.4"), write_values(tmp_path, values))
    assert result.returncode == 0, result.stderr


def test_nixl_without_known_version_leaves_the_policy_out(tmp_path: Path) -> None:
    import json

    from pdctl import manifests
    from tests.conftest import container, render_file

    values = change(
        NIXL, _both(_set(0, "repository", "registry.example.com/vllm"), _set(0, "tag", "dev"))
    )
    objects = render_file(pinned_helm("4.1.4"), write_values(tmp_path, values))
    args = container(objects, "pd-qwen-prefill-deployment-vllm")["args"]
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert "kv_load_failure_policy" not in config
    assert manifests.find(objects, "Deployment", "pd-qwen-decode-deployment-vllm")


@pytest.mark.parametrize("version", ["3.17.2", "4.1.4"])
def test_tutorial_render_is_unchanged(version: str) -> None:
    """The PD tutorial renders byte for byte as before issue 3 (golden: the skeleton's output)."""
    golden = (ROOT / "tests" / "golden" / "values-16-disagg-prefill.yaml").read_text()
    result = pinned_helm(version).run(["template", "pd", str(CHART), "-f", str(TUTORIAL_VALUES)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == golden
