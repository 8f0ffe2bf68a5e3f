"""Every engine command rendered for an official vllm/vllm-openai image uses only flags and
kv-transfer-config keys that the image's vLLM version accepts.

Sources of the tables (vLLM repository):
- `vllm serve` flags: vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and
  vllm/entrypoints/openai/cli_args.py (--host, --port). --disable-hybrid-kv-cache-manager came
  with the hybrid KV cache manager (v0.10.0); --disable-log-requests was removed (PR #29402)
  and must never be rendered.
- KVTransferConfig fields: vllm/config/kv_transfer.py (commit 007c643: kv_connector, engine_id,
  kv_buffer_device, kv_buffer_size, kv_role, kv_rank, kv_parallel_size, kv_ip, kv_port,
  kv_connector_extra_config, kv_connector_module_path); kv_load_failure_policy from PR #26813
  (first in v0.11.1).
- vLLM 0.33.0, read from its PyPI wheel (vllm/engine/arg_utils.py, vllm/config/kv_transfer.py):
  every flag above is there; KVTransferConfig has kv_connector, engine_id, kv_buffer_device,
  kv_role, kv_port, kv_connector_extra_config, kv_connector_module_path,
  enable_permute_local_kv and kv_load_failure_policy, and no longer kv_buffer_size, kv_rank,
  kv_parallel_size or kv_ip (the V0 connectors' fields; the first release without them was not
  pinned down, so they count as gone from 0.33.0).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests, workloads
from pdctl.helm import Helm
from pdctl.naming import Release
from tests.helpers import VALUES_FILES, Render, load_values

RELEASE = Release("pd")

OFFICIAL_IMAGE = re.compile(r"vllm/vllm-openai:v(\d+\.\d+\.\d+)")

BASE_FLAGS = {
    "--host",
    "--port",
    "--max-model-len",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--gpu-memory-utilization",
    "--dtype",
    "--max-num-seqs",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--kv-cache-dtype",
    "--block-size",
    "--enforce-eager",
    "--kv-transfer-config",
}
KV_FIELDS = {
    "kv_connector",
    "engine_id",
    "kv_buffer_device",
    "kv_buffer_size",
    "kv_role",
    "kv_rank",
    "kv_parallel_size",
    "kv_ip",
    "kv_port",
    "kv_connector_extra_config",
    "kv_connector_module_path",
}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


# Multi-node flags (helm/files/workloads.yaml engineForms), by the first release that has them:
# all read in vLLM 0.33.0 (vllm/engine/arg_utils.py; --headless in
# vllm/entrypoints/common/cli_args.py); --distributed-executor-backend and
# --enable-expert-parallel predate every image the chart knows; the data-parallel launch flags
# with --headless from v0.9.0 (vllm-ascend RFC #649 of 2025-04-25 describes them as they landed;
# NeMo Gym runs them on v0.9.0); --nnodes/--node-rank/--master-addr/--master-port from vLLM PR
# #23691 (first release taken as v0.11.0, as the chart's table says).
MULTI_NODE_FLAGS: dict[tuple[int, int, int], set[str]] = {
    (0, 0, 0): {"--distributed-executor-backend", "--enable-expert-parallel"},
    (0, 9, 0): {
        "--headless",
        "--data-parallel-size-local",
        "--data-parallel-address",
        "--data-parallel-rpc-port",
        "--data-parallel-start-rank",
    },
    (0, 11, 0): {"--nnodes", "--node-rank", "--master-addr", "--master-port"},
}


# OpenTelemetry (servingEngineSpec.tracing): --otlp-traces-endpoint came with vLLM PR #4687 (merged
# 2024-05-28), --collect-detailed-traces with the ObservabilityConfig; both read in vLLM 0.26.0's
# and 0.33.0's vllm/engine/arg_utils.py. The first release of each was not pinned down, so they
# count from 0.26.0.
TRACING_FLAGS = {"--otlp-traces-endpoint", "--collect-detailed-traces"}


def accepted_flags(version: tuple[int, ...]) -> set[str]:
    flags = set(BASE_FLAGS)
    if version >= (0, 26, 0):
        flags |= TRACING_FLAGS
    if version >= (0, 10, 0):
        flags.add("--disable-hybrid-kv-cache-manager")
    for since, added in MULTI_NODE_FLAGS.items():
        if version >= since:
            flags |= added
    return flags


def accepted_kv_fields(version: tuple[int, ...]) -> set[str]:
    fields = set(KV_FIELDS)
    if version >= (0, 11, 1):
        fields.add("kv_load_failure_policy")
    if version >= (0, 33, 0):
        fields -= {"kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_ip"}
        fields.add("enable_permute_local_kv")
    return fields


def engine_containers(obj: manifests.Manifest) -> list[dict[str, Any]]:
    """The engine containers of a rendered pool workload: a Deployment's, or every pod template's
    of a LeaderWorkerSet or DisaggregatedSet (leaders and workers)."""
    if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-vllm"):
        return [obj["spec"]["template"]["spec"]["containers"][0]]
    return [template["spec"]["containers"][0] for _, template in workloads.pod_templates(obj)]


def serve_args(engine: dict[str, Any]) -> list[str]:
    """The `vllm serve` arguments of an engine container, whether vllm is its command or a
    shell's (/bin/sh -c '... exec "$0" "$@" <shell args>' vllm serve ...), shell args included."""
    command, args = engine["command"], list(engine.get("args", []))
    if command[0] == "/bin/sh":
        line = command[2]
        if 'exec "$0" "$@"' not in line:
            return []  # a pod that runs no vllm serve (a Ray worker)
        tail = line.split('exec "$0" "$@"', 1)[1].split()
        assert args[1] == "serve", args
        return args[1:] + tail
    return args


def official_engines(objects: list[manifests.Manifest]) -> list[tuple[str, str, dict[str, Any]]]:
    """(workload name, vLLM version, engine container) of each rendered official image."""
    found = []
    for obj in objects:
        for engine in engine_containers(obj):
            match = OFFICIAL_IMAGE.fullmatch(engine["image"])
            if match:
                found.append((obj["metadata"]["name"], match.group(1), engine))
    return found


def declared_engines() -> list[tuple[Path, str, str]]:
    """(values file, engine Deployment, vLLM version) of every pool whose values name an official
    image: read from the values files, so collection runs no helm. test_there_are_current_images
    checks that this is exactly what the chart renders."""
    found = []
    for path in VALUES_FILES:
        engine = load_values(path).get("servingEngineSpec") or {}
        in_set = bool((engine.get("disaggregatedSet") or {}).get("enabled"))
        for spec in engine.get("modelSpec") or []:
            match = OFFICIAL_IMAGE.fullmatch(f"{spec.get('repository')}:{spec.get('tag')}")
            if match:
                kind = "LeaderWorkerSet" if spec.get("multiNode") else "Deployment"
                name = RELEASE.pool_workload(spec["name"], "DisaggregatedSet" if in_set else kind)
                found.append((path, name, match.group(1)))
    return sorted(set(found))


ENGINES = declared_engines()


def test_there_are_current_images(helm4: Helm, rendered: Render) -> None:
    engines = {
        (path, name, version)
        for path in VALUES_FILES
        for name, version, _ in official_engines(rendered(helm4, path))
    }
    assert engines == set(ENGINES)  # the parametrization below covers every rendered engine
    versions = {version_tuple(v) for _, _, v in engines}
    assert any(v >= (0, 33, 0) for v in versions)  # the current release
    assert any(v <= (0, 10, 0) for v in versions)  # the PyNccl seed pair


@pytest.mark.parametrize(
    ("values_file", "deployment", "version"),
    ENGINES,
    ids=[f"{path.name}:{deployment}" for path, deployment, _ in ENGINES],
)
def test_engine_uses_only_accepted_flags(
    helm4: Helm, rendered: Render, values_file: Path, deployment: str, version: str
) -> None:
    objects = rendered(helm4, values_file)
    engines = [e for name, _, e in official_engines(objects) if name == deployment]
    assert engines
    for engine in engines:
        assert_accepted(engine, version)


def assert_accepted(engine: dict[str, Any], version: str) -> None:
    """Every flag and kv-transfer key of an engine container exists in `version`."""
    assert engine["image"].endswith(f":v{version}")
    v = version_tuple(version)
    args = serve_args(engine)
    if not args:
        return
    assert args[0] == "serve"
    if engine["command"] != ["/bin/sh", "-c", engine["command"][-1]]:
        assert engine["command"] == ["vllm"]
    flags = {a for a in args if a.startswith("--")}
    assert flags <= accepted_flags(v), flags - accepted_flags(v)
    assert "--disable-log-requests" not in args
    if "--kv-transfer-config" in args:
        config = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert set(config) <= accepted_kv_fields(v), set(config) - accepted_kv_fields(v)
        assert "engine_id" not in config  # vLLM draws one per instance
        assert config["kv_role"] in {"kv_producer", "kv_consumer", "kv_both"}
    env = {e["name"] for e in engine["env"]}
    if v >= (0, 11, 0):
        # The V0 engine is gone from v0.11.0: VLLM_USE_V1=0 would be meaningless there.
        assert "VLLM_USE_V1" not in env


def test_version_table_self_check() -> None:
    assert "kv_load_failure_policy" not in accepted_kv_fields((0, 11, 0))
    assert "kv_load_failure_policy" in accepted_kv_fields((0, 12, 0))
    assert "kv_ip" in accepted_kv_fields((0, 10, 0))
    assert "kv_ip" not in accepted_kv_fields((0, 33, 0))
