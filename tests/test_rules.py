"""PD rules on plain dicts (including keys the schema gains later): the chart's refusals and
pdctl's own rules, as `pdctl validate` gives them (check_values: the schema, helm template of
the chart, the Python warnings)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pdctl.findings import Finding, Severity
from pdctl.helm import find_helm
from pdctl.rules import RULES, run_rules
from pdctl.validation.schema_and_rules import check_values
from tests.helpers import ASSETS, CHART, TUTORIAL_VALUES, load_values


def findings(values: dict[str, Any], release: str = "pd") -> list[Finding]:
    """What validate finds in the values: the schema's, the chart's refusals, the warnings."""
    return check_values(find_helm(), values, release, CHART)


def pool(name: str, role: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "repository": "vllm/vllm-openai",
        "tag": "v0.11.0",
        "modelURL": "Qwen/Qwen2.5-7B-Instruct",
        "requestGPU": 1,
        "vllmConfig": {"maxModelLen": 32768},
    }
    if role:
        spec["role"] = role
    spec.update(extra)
    return spec


def nixl(
    prefill: dict[str, Any] | None = None, decode: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A NIXL 1P1D deployment with vllm-router; overrides merged into each pool."""
    p = pool(
        "prefill", "prefill", kvTransfer={"connector": "NixlConnector", "kvRole": "kv_producer"}
    )
    d = pool("decode", "decode", kvTransfer={"connector": "NixlConnector", "kvRole": "kv_consumer"})
    for spec, extra in ((p, prefill), (d, decode)):
        for key, value in (extra or {}).items():
            if isinstance(value, dict) and isinstance(spec.get(key), dict):
                spec[key] = {**spec[key], **value}
            else:
                spec[key] = value
    return {
        "servingEngineSpec": {"modelSpec": [p, d]},
        "routerSpec": {"type": "vllm-router"},
    }


def ids(values: dict[str, Any], release: str = "pd", severity: Severity | None = None) -> set[str]:
    return {f.rule for f in findings(values, release) if severity is None or f.severity is severity}


def paths(values: dict[str, Any], rule: str) -> list[str]:
    return [f.key for f in findings(values) if f.rule == rule]


def test_registry_has_ids_titles_and_severities() -> None:
    run_rules({}, None)
    assert len(RULES) >= 18
    for rule_id, registered in RULES.items():
        assert rule_id.startswith("PD") and registered.title and registered.severity


def test_clean_nixl_deployment() -> None:
    assert ids(nixl()) == set()


def test_tolerates_garbage() -> None:
    # No crash, and no finding about what the rules cannot read (pools that are not mappings):
    # refusing those shapes is the schema's job. Whatever is found is a registered rule's.
    garbage: list[dict[str, Any]] = [
        {},
        {"servingEngineSpec": []},
        {"servingEngineSpec": {"modelSpec": [1, None]}},
    ]
    for values in garbage:
        for finding in run_rules(values, None):
            assert finding.rule in RULES and finding.message, finding
            assert not finding.key.startswith("servingEngineSpec.modelSpec["), finding
    # Garbage beside readable pools does not stop the rules from checking those pools.
    values = nixl(decode={"vllmConfig": {"gpuMemoryUtilization": 0.97}})
    values["servingEngineSpec"]["modelSpec"][:0] = [1, None]
    findings = run_rules(values, None)
    assert [f.key for f in findings if f.rule == "PD011"] == [
        "servingEngineSpec.modelSpec[3].vllmConfig.gpuMemoryUtilization"
    ]
    shifted = ("servingEngineSpec.modelSpec[0]", "servingEngineSpec.modelSpec[1]")
    assert not [f for f in findings if f.key.startswith(shifted)], findings


def test_role_derived_from_kv_role_when_absent() -> None:
    values = nixl()
    for spec in values["servingEngineSpec"]["modelSpec"]:
        del spec["role"]
    assert ids(values) == set()


def test_explicit_role_disagrees_with_kv_role() -> None:
    values = nixl(prefill={"kvTransfer": {"kvRole": "kv_consumer"}})
    assert "servingEngineSpec.modelSpec[0].kvTransfer.kvRole" in paths(values, "PD001")


def test_peer_pool_must_be_opposite_role() -> None:
    values = nixl(prefill={"kvTransfer": {"peerPool": "prefill"}})
    assert paths(values, "PD003") == ["servingEngineSpec.modelSpec[0].kvTransfer.peerPool"]
    assert ids(nixl(prefill={"kvTransfer": {"peerPool": "decode"}})) == set()


@pytest.mark.parametrize(
    "host",
    [
        "pd-decode-engine-service",
        "pd-decode-engine-service.llm",
        "pd-decode-engine-service.llm.svc",
        "pd-decode-engine-service.llm.svc.cluster.local",
    ],
)
def test_legacy_peer_host_forms(host: str) -> None:
    lm = {"enabled": True, "enableNixl": True, "nixlPeerPort": 55555}
    values = nixl(
        prefill={
            "kvTransfer": {},
            "lmcacheConfig": {
                **lm,
                "kvRole": "kv_producer",
                "nixlRole": "sender",
                "nixlPeerHost": host,
            },
        },
        decode={
            "kvTransfer": {},
            "lmcacheConfig": {
                **lm,
                "kvRole": "kv_consumer",
                "nixlRole": "receiver",
                "nixlPeerHost": "0.0.0.0",
            },
        },
    )
    assert "PD003" not in ids(values)
    assert "PD003" in ids(values, release="other")


def test_model_dtype_and_block_size_agree() -> None:
    assert "PD005" in ids(nixl(decode={"vllmConfig": {"kvCacheDtype": "fp8"}}))
    # NIXL allows a smaller prefill block size, not a larger one.
    assert "PD005" not in ids(
        nixl(prefill={"vllmConfig": {"blockSize": 16}}, decode={"vllmConfig": {"blockSize": 32}})
    )
    assert "PD005" in ids(
        nixl(prefill={"vllmConfig": {"blockSize": 64}}, decode={"vllmConfig": {"blockSize": 32}})
    )
    # An unset block size is vLLM's default, helm/files/vllm-image.yaml's blockSize (16).
    assert "PD005" in ids(nixl(decode={"vllmConfig": {"blockSize": 8}}))
    assert "PD005" not in ids(nixl(decode={"vllmConfig": {"blockSize": 16}}))


def test_gpus_match_tp_times_pp() -> None:
    values = nixl(decode={"vllmConfig": {"tensorParallelSize": 2, "pipelineParallelSize": 2}})
    assert paths(values, "PD010") == ["servingEngineSpec.modelSpec[1].requestGPU"]
    assert "PD010" not in ids(
        nixl(
            decode={
                "requestGPU": 4,
                "vllmConfig": {"tensorParallelSize": 2, "pipelineParallelSize": 2},
            }
        )
    )


@pytest.mark.parametrize("value", [0.97, 0.3])
def test_memory_utilization_warns(value: float) -> None:
    values = nixl(decode={"vllmConfig": {"gpuMemoryUtilization": value}})
    assert "PD011" in ids(values, severity=Severity.warning)
    assert "PD011" not in ids(nixl(decode={"vllmConfig": {"gpuMemoryUtilization": 0.9}}))


@pytest.mark.parametrize("value", [0, 1.2])
def test_memory_utilization_out_of_range_is_the_schemas(value: float) -> None:
    values = nixl(decode={"vllmConfig": {"gpuMemoryUtilization": value}})
    found = findings(values)
    assert [f.rule for f in found if f.key.endswith("gpuMemoryUtilization")] == ["SCHEMA"]


def test_pynccl_only_up_to_0_10_0() -> None:
    conn = {"kvTransfer": {"connector": "PyNcclConnector"}}
    old = nixl(prefill={**conn, "vllmVersion": "0.10.0"}, decode={**conn, "vllmVersion": "0.10.0"})
    assert "PD012" not in ids(old)
    new = nixl(prefill={**conn, "tag": "v0.11.0"}, decode={**conn, "tag": "v0.11.0"})
    assert paths(new, "PD012")[0] == "servingEngineSpec.modelSpec[0].tag"


def test_p2p_nccl_window() -> None:
    conn = {"kvTransfer": {"connector": "P2pNcclConnector"}}
    assert "PD012" not in ids(
        nixl(prefill={**conn, "vllmVersion": "0.12.0"}, decode={**conn, "vllmVersion": "0.12.0"})
    )
    assert "PD012" in ids(
        nixl(prefill={**conn, "vllmVersion": "0.23.0"}, decode={**conn, "vllmVersion": "0.23.0"})
    )
    assert "PD012" in ids(
        nixl(prefill={**conn, "vllmVersion": "0.9.0"}, decode={**conn, "vllmVersion": "0.9.0"})
    )


def test_tp_constraints_by_connector() -> None:
    hetero = {"requestGPU": 2, "vllmConfig": {"tensorParallelSize": 2}}
    assert "PD013" not in ids(nixl(decode=hetero))
    conn = {"kvTransfer": {"connector": "P2pNcclConnector"}}
    values = nixl(prefill=conn, decode={**conn, **hetero})
    assert "PD013" in ids(values)


def test_connectors_must_match() -> None:
    values = nixl(decode={"kvTransfer": {"connector": "MooncakeConnector"}})
    assert paths(values, "PD013") == ["servingEngineSpec.modelSpec[1].kvTransfer.connector"]


def test_pd_routing_with_one_role() -> None:
    values = nixl()
    del values["servingEngineSpec"]["modelSpec"][1]
    assert {"PD009", "PD001"} <= ids(values)


def test_router_labels_comma_lists_and_inline() -> None:
    values = nixl()
    values["routerSpec"] = {
        "routingLogic": "disaggregated_prefill",
        "extraArgs": ["--prefill-model-labels=prefill", "--decode-model-labels", "decode,nope"],
    }
    assert paths(values, "PD008") == ["routerSpec.extraArgs[2]"]


def test_long_names_with_release() -> None:
    assert "PD007" in ids(nixl(), release="r" * 40)


@pytest.mark.parametrize(
    ("override", "rule"),
    [
        ({"hostIPC": True}, "PD102"),
        ({"hf_token": "<your-hf-token>"}, "PD103"),
        ({"repository": "registry.example.com/team/vllm"}, "PD105"),
        ({"replicaCount": 2, "pvcStorage": "100Gi"}, "PD106"),
        ({"network": {"ucxTls": "cuda_ipc,cuda_copy,tcp"}}, "PD107"),
        ({"env": [{"name": "UCX_TLS", "value": "rc,cuda_ipc"}]}, "PD107"),
    ],
)
def test_warnings(override: dict[str, Any], rule: str) -> None:
    values = nixl(decode=copy.deepcopy(override))
    assert rule in ids(values, severity=Severity.warning)
    assert not ids(values, severity=Severity.error)


def test_production_stack_router_with_several_pods_per_role_warns() -> None:
    values = load_values(TUTORIAL_VALUES)  # the production-stack router, disaggregated_prefill
    for spec in values["servingEngineSpec"]["modelSpec"]:  # LMCache without NIXL: not 1P1D
        spec["lmcacheConfig"] = {"enabled": True, "kvRole": spec["lmcacheConfig"]["kvRole"]}
    values["servingEngineSpec"]["modelSpec"][1]["replicaCount"] = 2
    assert paths(values, "PD104") == ["routerSpec.routingLogic"]
    assert "PD104" not in ids(nixl(decode={"replicaCount": 2}))  # vllm-router balances


def test_the_warnings_that_read_the_chart_s_facts_are_silent_where_it_refuses() -> None:
    """The facts (here the pools' roles) are the render's summary: values the chart refuses
    (production-stack cannot route NIXL, PD017) render nothing, and its refusal is the answer."""
    values = nixl(decode={"replicaCount": 2})
    values["routerSpec"] = {"routingLogic": "disaggregated_prefill"}
    assert "PD017" in ids(values) and "PD104" not in ids(values)
    assert [f.rule for f in run_rules(values, None)] == []


def test_small_pd_warns() -> None:
    values = nixl(
        prefill={"vllmConfig": {"maxModelLen": 1024}}, decode={"vllmConfig": {"maxModelLen": 1024}}
    )
    assert "PD101" in ids(values, severity=Severity.warning)


@pytest.mark.parametrize(
    ("override", "rule"),
    [
        ({"hostIPC": True, "network": {"ucxTls": "cuda_ipc,cuda_copy"}}, "PD107"),
        ({"replicaCount": 2, "pvcStorage": "100Gi", "pvcAccessMode": ["ReadWriteMany"]}, "PD106"),
        ({"replicaCount": 1, "pvcStorage": "100Gi"}, "PD106"),
        ({"modelURL": "meta-llama/Llama-3.1-8B-Instruct", "hf_token": {"secretName": "hf",
          "secretKey": "token"}}, "PD108"),
        ({"modelURL": "Qwen/Qwen2.5-7B-Instruct"}, "PD108"),
    ],
)  # fmt: skip
def test_warnings_stay_quiet_when_fine(override: dict[str, Any], rule: str) -> None:
    assert rule not in ids(nixl(decode=override))


def test_gpu_hint_offers_both_directions() -> None:
    """Wanting 4 GPUs per engine (requestGPU: 4, no TP) is answered with TP 4 first."""
    values = nixl(decode={"requestGPU": 4})
    (finding,) = [f for f in findings(values) if f.rule == "PD010"]
    assert finding.hint is not None
    assert finding.hint.startswith("to use 4 GPUs per engine set vllmConfig.tensorParallelSize: 4")
    assert finding.hint.endswith("or set requestGPU: 1")


def test_swapped_roles_point_at_the_role_keys_and_never_at_the_pool_itself() -> None:

    values = load_values(TUTORIAL_VALUES)
    prefill, decode = values["servingEngineSpec"]["modelSpec"]
    prefill["lmcacheConfig"]["kvRole"], decode["lmcacheConfig"]["kvRole"] = (
        "kv_consumer",
        "kv_producer",
    )
    found = [f for f in findings(values) if f.severity is Severity.error]
    assert found[0].rule == "PD001"
    assert found[0].key == "servingEngineSpec.modelSpec[0].lmcacheConfig.kvRole"
    assert "swap them back" in (found[0].hint or "")
    for finding in found:
        hint = finding.hint or ""
        assert "pd-llama-prefill-engine-service" not in hint, finding  # the sender's own Service
    labels = [f for f in found if f.rule == "PD008"]
    assert labels and all(" pool; list " in f.message for f in labels)  # a pool of the other role


def test_gated_model_without_token_warns() -> None:
    llama = {"modelURL": "meta-llama/Llama-3.1-8B-Instruct"}
    values = nixl(prefill=llama, decode=llama)
    assert paths(values, "PD108") == [
        "servingEngineSpec.modelSpec[0].modelURL",
        "servingEngineSpec.modelSpec[1].modelURL",
    ]
    assert not ids(values, severity=Severity.error)


def test_known_model_larger_than_its_volume_and_memory_warns() -> None:
    """A 70B model (131 GiB of BF16 weights, the planner's catalog) on a 50Gi volume and 48Gi."""
    big: dict[str, Any] = {"modelURL": "meta-llama/Llama-3.1-70B-Instruct", "pvcStorage": "50Gi"}
    big |= {"requestMemory": "48Gi", "hf_token": {"secretName": "hf", "secretKey": "token"}}
    findings = [f for f in run_rules(nixl(prefill=big, decode=big), None) if f.rule == "PD109"]
    assert [f.key for f in findings[:2]] == [
        "servingEngineSpec.modelSpec[0].pvcStorage",
        "servingEngineSpec.modelSpec[0].requestMemory",
    ]
    assert "131 GiB" in findings[0].message and findings[0].severity is Severity.warning
    assert findings[0].hint == "pvcStorage: 150Gi (what `pdctl plan` sizes)"
    # Enough room, an unknown model, an existing claim: quiet.
    fine = big | {"pvcStorage": "200G", "requestMemory": "0.25Ti"}
    assert "PD109" not in ids(nixl(prefill=fine, decode=fine))
    unknown = big | {"modelURL": "my-org/private-70b"}
    assert "PD109" not in ids(nixl(prefill=unknown, decode=unknown))
    claimed = big | {"pvcExistingClaimName": "weights", "requestMemory": "256Gi"}
    assert "PD109" not in ids(nixl(prefill=claimed, decode=claimed))


@pytest.mark.parametrize(
    ("tag", "warned"), [("v0.33.0", True), ("v0.23.0", True), ("v0.22.0", False), ("dev", True)]
)
def test_pd113_a_declared_kv_both_that_vllm_deprecates_for_nixl_warns(
    tag: str, warned: bool
) -> None:
    """vLLM deprecates kv_both for NixlConnector from 0.23.0 (the connector table's
    kvBothDeprecated); an image of unknown version is taken as current."""
    values = nixl(prefill={"tag": tag, "kvTransfer": {"kvRole": "kv_both"}}, decode={"tag": tag})
    found = [f for f in findings(values) if f.rule == "PD113"]
    assert bool(found) is warned, found
    if warned:
        assert found[0].key == "servingEngineSpec.modelSpec[0].kvTransfer.kvRole"
        assert found[0].hint and "kv_producer" in found[0].hint
    assert not [f for f in findings(nixl()) if f.rule == "PD113"]  # roles given: no warning


@pytest.mark.parametrize(
    ("version", "warned"), [("0.26.0", True), ("0.25.1", False), (None, False)]
)
def test_a_connector_that_failed_on_a_real_run_with_the_image_s_vllm_is_warned_about(
    version: str | None, warned: bool
) -> None:
    """PD118: tutorial 19's LMCache pair with its images stating vLLM 0.26.0 (the connector
    table's failsWith: the H200 runs that failed at 16 in flight) warns at each pool's
    connector, naming the record; another vLLM, or none stated, is silent."""
    values = load_values(ASSETS / "values-19-lmcache-pd.yaml")
    for spec in values["servingEngineSpec"]["modelSpec"]:
        if version:
            spec["vllmVersion"] = version
    found = [f for f in findings(values) if f.rule == "PD118"]
    assert [f.key for f in found] == (
        [f"servingEngineSpec.modelSpec[{i}].kvTransfer.connector" for i in (0, 1)] if warned else []
    )
    if warned:
        assert "lmcache-h200-1gpu-equal-buffers.json" in found[0].message
        assert "0.26.0" in found[0].message
        assert found[0].hint and "NixlConnector" in found[0].hint


@pytest.mark.parametrize(
    ("sender", "warned"), [(1073741824, True), (None, True), (2147483648, False), (4 << 30, False)]
)
def test_an_lmcache_sender_s_buffer_smaller_than_what_the_proxy_admits_is_warned_about(
    sender: int | None, warned: bool
) -> None:
    """PD119: LMCache's proxy admits prompts while their KV fits the smallest decode buffer
    (2 GiB in tutorial 19); a sender's buffer (1 GiB unless set, the chart's default) below it
    fills under load. The hint gives the decode's size."""
    values = load_values(ASSETS / "values-19-lmcache-pd.yaml")
    kv_transfer = values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]
    kv_transfer.pop("kvBufferSize")
    if sender is not None:
        kv_transfer["kvBufferSize"] = sender
    found = [f for f in findings(values) if f.rule == "PD119"]
    assert [f.key for f in found] == (
        ["servingEngineSpec.modelSpec[0].kvTransfer.kvBufferSize"] if warned else []
    )
    if warned:
        assert "1,073,741,824" in found[0].message and "2,147,483,648" in found[0].message
        assert found[0].hint == "set kvTransfer.kvBufferSize: 2147483648 on 'llama-prefill'"


def test_an_lmcache_sender_is_not_compared_without_lmcache_s_proxy() -> None:
    """PD119 compares LMCache pools only: the tutorial's own file (2 GiB both) and a NIXL
    release say nothing; the tutorial with a 1 GiB sender does."""
    values = load_values(ASSETS / "values-19-lmcache-pd.yaml")
    assert "PD119" not in ids(values)
    values["servingEngineSpec"]["modelSpec"][0]["kvTransfer"]["kvBufferSize"] = 1 << 30
    assert "PD119" in ids(values)
    assert "PD119" not in ids(nixl())


def test_a_config_file_in_extra_args_is_warned_about() -> None:
    """PD117: --config can set any flag, the chart's too; the flags the chart renders are
    refused (PD026: tests/test_chart_owned_flags.py), those it does not are the user's."""
    extra = ["--enforce-eager", "--config=c.yaml"]
    values = nixl(prefill={"vllmConfig": {"extraArgs": extra, "gpuMemoryUtilization": 0.8}})
    assert paths(values, "PD117") == ["servingEngineSpec.modelSpec[0].vllmConfig.extraArgs[1]"]
    assert "PD117" not in ids(nixl(prefill={"vllmConfig": {"extraArgs": ["--enforce-eager"]}}))


@pytest.mark.parametrize(
    "extra",
    [["--port", "9000"], ["--host=::"], ["--kv_transfer_config", "{}"], ["--max_model_len=4096"]],
)
def test_extra_args_may_not_set_the_chart_s_own_flags(extra: list[str]) -> None:
    values = nixl(decode={"vllmConfig": {"extraArgs": ["--enforce-eager", *extra]}})
    assert paths(values, "PD026") == ["servingEngineSpec.modelSpec[1].vllmConfig.extraArgs[1]"]


def test_max_model_len_is_the_chart_s_only_when_max_model_len_is_set() -> None:
    values = nixl(decode={"vllmConfig": {"extraArgs": ["--max-model-len", "4096"]}})
    del values["servingEngineSpec"]["modelSpec"][1]["vllmConfig"]["maxModelLen"]
    del values["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["maxModelLen"]
    assert "PD026" not in ids(values)


def test_env_the_chart_owns_is_refused_and_ucx_lmcache_env_is_the_users() -> None:
    env = [{"name": "UCX_TLS", "value": "all"}, {"name": "LMCACHE_CHUNK_SIZE", "value": "256"}]
    assert "PD026" not in ids(nixl(decode={"env": env}))
    owned = [*env, {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "x"}]
    assert paths(nixl(decode={"env": owned}), "PD026") == [
        "servingEngineSpec.modelSpec[1].env[2].name"
    ]


def test_router_extra_args_may_not_set_the_router_s_port() -> None:
    values = nixl()
    values["routerSpec"]["extraArgs"] = ["--port=9000"]
    assert paths(values, "PD026") == ["routerSpec.extraArgs[0]"]
