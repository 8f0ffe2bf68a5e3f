# ruff: noqa: E501
"""Generator of tests/corpus/bad: shipped values files, one defect each (`make corpus`).

The files are committed; rerun this (from the repository root) only to change the corpus. Each
file starts with
    # expect: RULE path        what `pdctl validate` reports (or `RULE line N` for YAML errors)
    # args: ...                extra command-line arguments (optional; --release for both sides)
    # chart: text              what `helm template` of the chart fails with (a refusal with the
                               rule of `expect`: that id and key path; absent: the chart
                               accepts the file; tests/test_corpus.py lists each such
                               file with the reason)
Text edits of the PD tutorial keep its lines (so YAML errors have stable line numbers); the other
cases edit a parsed tutorial asset and dump it.
"""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ASSETS = Path("tutorials/assets")
OUT = Path("tests/corpus/bad")
TUTORIAL = (ASSETS / "values-16-disagg-prefill.yaml").read_text()
BASE = TUTORIAL.replace(
    "hf_token: <your-hf-token>", "hf_token: {secretName: hf-token, secretKey: token}"
)
P = "servingEngineSpec.modelSpec"
cases: dict[str, str] = {}


def nth_replace(text: str, old: str, new: str, n: int = 1) -> str:
    idx = -1
    for _ in range(n):
        idx = text.index(old, idx + 1)
    return text[:idx] + new + text[idx + len(old) :]


def case(
    name: str,
    expect: str,
    text: str,
    chart: str | None,
    args: str | None = None,
    line_of: str | None = None,
) -> None:
    rule, _, target = expect.partition(" ")
    if chart and chart.startswith(f"[{rule}] ") and target:
        chart = f"[{rule}] {target}:"  # the chart's refusal: validate's id and key path
    headers = [f"# args: {args}"] if args else []
    headers += [f"# chart: {chart}"] if chart else []
    if line_of is not None:  # the line in the final file, after the header lines
        expect = f"{expect} line {text[: text.index(line_of)].count(chr(10)) + 2 + len(headers)}"
    assert name not in cases, name
    cases[name] = "\n".join([f"# expect: {expect}", *headers, text])


Edit = Callable[[dict[str, Any]], Any]


def edited(asset: str, *edits: Edit) -> str:
    values = yaml.safe_load((ASSETS / asset).read_text())
    for edit in edits:
        edit(values)
    return yaml.safe_dump(values, sort_keys=False)


def pool(values: dict[str, Any], i: int) -> dict[str, Any]:
    return values["servingEngineSpec"]["modelSpec"][i]


def put(i: int, path: str, value: Any) -> Edit:
    def edit(values: dict[str, Any]) -> None:
        target = pool(values, i)
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = copy.deepcopy(value)

    return edit


def drop(i: int, path: str) -> Edit:
    def edit(values: dict[str, Any]) -> None:
        target = pool(values, i)
        *parents, last = path.split(".")
        for key in parents:
            target = target[key]
        del target[last]

    return edit


def router(key: str, value: Any) -> Edit:
    def edit(values: dict[str, Any]) -> None:
        target = values["routerSpec"]
        *parents, last = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value

    return edit


NIXL = "values-17-nixl-vllm-router.yaml"
XPYD = "values-18-nixl-xpyd.yaml"
LMCACHE = "values-19-lmcache-pd.yaml"
MOONCAKE = "values-20-mooncake.yaml"
SEED = "values-21-pynccl-seed.yaml"

# ---- YAML (the safe loader; helm's parser refuses most of these too)
case(
    "yaml-unclosed-bracket",
    "YAML001",
    BASE.replace(
        '  extraArgs:\n    - "--prefill-model-labels"',
        '  extraArgs: ["--prefill-model-labels"\n    - "x"',
        1,
    ),
    chart="yaml: line",
    line_of='    - "x"',
)
case(
    "yaml-duplicate-key",
    "YAML002",
    nth_replace(
        BASE, "      replicaCount: 1\n", "      replicaCount: 1\n      replicaCount: 2\n", 2
    ),
    chart="[PD014]",  # helm keeps the last duplicate, which the chart refuses for its own reason
    line_of="      replicaCount: 2",
)
case(
    "yaml-tab-indent",
    "YAML004",
    BASE.replace('  tag: "pd-05-26"', '\ttag: "pd-05-26"'),
    chart="found character that cannot start any token",
    line_of='\ttag: "pd-05-26"',
)
bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(8)
)
case("yaml-alias-bomb", "YAML003", bomb, chart="excessive aliasing")
case("yaml-empty", "YAML006", "", chart="[PD016]")
case(
    "yaml-top-level-list",
    "YAML006",
    "- servingEngineSpec: {}\n",
    chart="cannot unmarshal array",
    line_of="- servingEngineSpec",
)
case(
    "yaml-two-documents",
    "YAML001",
    BASE + "---\nrouterSpec: {}\n",
    chart=None,
    line_of="---\nrouterSpec",
)
case(
    "yaml-bad-indent",
    "YAML001",
    BASE.replace("  containerPort: 8000\n  modelSpec:", "  containerPort: 8000\n   modelSpec:", 1),
    chart="mapping values are not allowed",
    line_of="   modelSpec:",
)
# ---- The values schema (the same file for helm and validate)
case(
    "pd019-cache-server",
    "PD019 cacheserverSpec",
    BASE + "cacheserverSpec:\n  enabled: true\n  repository: lmcache/vllm-openai\n",
    chart="[PD019] cacheserverSpec:",
)
case(
    "pd019-ray-spec",
    f"PD019 {P}[1].raySpec",
    edited(NIXL, put(1, "raySpec", {"enabled": True})),
    chart=f"[PD019] {P}[1].raySpec:",
)
# production-stack's routerSpec keys: static discovery, and the production-stack router's own
# flags with vllm-router.
TUTORIAL_STATIC = "values-16-disagg-prefill.yaml"
case(
    "pd017-static-backends-without-models",
    "PD017 routerSpec.staticBackends",
    edited(TUTORIAL_STATIC, router("serviceDiscovery", "static"),
           router("staticBackends", "http://10.0.0.5:8000,http://10.0.0.6:8000")),
    chart="[PD017] routerSpec.staticBackends:",
)  # fmt: skip
case(
    "pd008-static-backends-without-labels",
    "PD008 routerSpec.extraArgs",
    edited(TUTORIAL_STATIC, router("serviceDiscovery", "static"),
           router("staticBackends", "http://10.0.0.5:8000,http://10.0.0.6:8000"),
           router("staticModels", "meta-llama/Llama-3.1-8B-Instruct,meta-llama/Llama-3.1-8B-Instruct")),
    chart='[PD008] routerSpec.extraArgs: routingLogic disaggregated_prefill with routerSpec.staticBackends needs "--static-model-labels"',
)  # fmt: skip
case(
    "pd017-discovery-keys-disagree",
    "PD017 routerSpec.serviceDiscovery",
    edited(NIXL, router("serviceDiscovery", "static")),
    chart="[PD017] routerSpec.serviceDiscovery:",
)
case(
    "pd019-vllm-router-root-path",
    "PD019 routerSpec.rootPath",
    edited(NIXL, router("rootPath", "/vllm")),
    chart="[PD019] routerSpec.rootPath:",
)
case(
    "schema-unknown-key",
    f"SCHEMA {P}[0].replicCount",
    nth_replace(BASE, "replicaCount: 1", "replicCount: 1"),
    chart="replicCount",
)
case(
    "schema-enum",
    "SCHEMA routerSpec.routingLogic",
    BASE.replace('routingLogic: "disaggregated_prefill"', 'routingLogic: "disaggregated"'),
    chart="routingLogic",
)
case(
    "schema-type",
    f"SCHEMA {P}[1].replicaCount",
    nth_replace(BASE, "replicaCount: 1", 'replicaCount: "one"', 2),
    chart="replicaCount",
)
case(
    "schema-port-range",
    f"SCHEMA {P}[1].lmcacheConfig.nixlPeerPort",
    nth_replace(BASE, 'nixlPeerPort: "55555"', "nixlPeerPort: 70000", 2),
    chart="nixlPeerPort",
)
case(
    "schema-pattern-name",
    f"SCHEMA {P}[0].name",
    BASE.replace('name: "llama-prefill"', 'name: "Llama_Prefill"'),
    chart="name",
)
case(
    "schema-required-model",
    f"SCHEMA {P}[0].modelURL",
    nth_replace(BASE, '      modelURL: "meta-llama/Llama-3.1-8B-Instruct"\n', ""),
    chart="modelURL",
)
case(
    "schema-memory-utilization",
    f"SCHEMA {P}[0].vllmConfig.gpuMemoryUtilization",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        gpuMemoryUtilization: 1.5\n",
    ),
    chart="gpuMemoryUtilization",
)
case(
    "schema-unknown-top-level",
    "SCHEMA routerSpecs",
    BASE.replace("routerSpec:", "routerSpecs:"),
    chart="routerSpecs",
)
case(
    "schema-nixl-needs-peer",
    f"SCHEMA {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace('        nixlPeerHost: "pd-llama-decode-engine-service"\n', ""),
    chart="nixlPeerHost",
)
case(
    "schema-tp-zero",
    f"SCHEMA {P}[1].vllmConfig.tensorParallelSize",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        tensorParallelSize: 0\n",
        2,
    ),
    chart="tensorParallelSize",
)
case(
    "schema-kvrole-enum",
    f"SCHEMA {P}[1].lmcacheConfig.kvRole",
    BASE.replace('kvRole: "kv_consumer"', 'kvRole: "consumer"'),
    chart="kvRole",
)
case(
    "schema-unknown-connector",
    f"SCHEMA {P}[0].kvTransfer.connector",
    edited(NIXL, put(0, "kvTransfer.connector", "SharedStorageConnector")),
    chart="connector",
)
case(
    "schema-unknown-kvtransfer-key",
    f"SCHEMA {P}[0].kvTransfer.engineId",
    edited(NIXL, put(0, "kvTransfer.engineId", "x")),
    chart="engineId",
)
case(
    "schema-unknown-network-key",
    f"SCHEMA {P}[0].network.rdma",
    edited(NIXL, put(0, "network.rdma", True)),
    chart="rdma",
)
case(
    "schema-bad-role",
    f"SCHEMA {P}[0].role",
    edited(NIXL, put(0, "role", "prefiller")),
    chart="role",
)
case(
    "schema-bad-vllm-version",
    f"SCHEMA {P}[0].vllmVersion",
    edited(NIXL, put(0, "vllmVersion", "v0.12")),
    chart="vllmVersion",
)
case(
    "schema-bad-kv-cache-dtype",
    f"SCHEMA {P}[0].vllmConfig.kvCacheDtype",
    edited(NIXL, put(0, "vllmConfig.kvCacheDtype", "int8")),
    chart="kvCacheDtype",
)
case(
    "schema-bad-router-policy",
    "SCHEMA routerSpec.vllmRouter.decodePolicy",
    edited(NIXL, router("vllmRouter.decodePolicy", "least_load")),
    chart="decodePolicy",
)
case(
    "schema-bad-router-type",
    "SCHEMA routerSpec.type",
    edited(NIXL, router("type", "sglang")),
    chart="type",
)
case(
    "schema-affinity-type",
    f"SCHEMA {P}[0].affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
    edited(
        NIXL,
        put(
            0,
            "affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "gpu"}
                }
            },
        ),
    ),
    chart="nodeSelectorTerms",
)
# ---- PD rules: the tutorial's LMCache form
case(
    "pd001-sender-role",
    f"PD001 {P}[0].lmcacheConfig.kvRole",
    BASE.replace('nixlRole: "sender"', 'nixlRole: "receiver"'),
    chart=f'[PD001] {P}[0] is a prefill pool by its role keys (role, lmcacheConfig.kvRole) but lmcacheConfig.nixlRole "receiver"',
)
case(
    "pd001-nixl-without-lmcache",
    f"PD001 {P}[1].lmcacheConfig.enableNixl",
    nth_replace(BASE, "        enabled: true\n", "        enabled: false\n", 2),
    chart=f"[PD001] {P}[1].lmcacheConfig.enableNixl:",
)
case(
    "pd001-no-consumer",
    f"PD001 {P}[0]",
    BASE.replace('kvRole: "kv_consumer"', 'kvRole: "kv_producer"'),
    chart="[PD001]",
)
case(
    "pd001-role-contradicts-kv-role",
    f"PD001 {P}[0].lmcacheConfig.kvRole",
    edited("values-16-disagg-prefill.yaml", put(0, "role", "decode")),
    chart=f'[PD001] {P}[0].lmcacheConfig.kvRole "kv_producer" contradicts',
)
case(
    "pd001-roles-swapped",
    f"PD001 {P}[0].kvTransfer.kvRole",
    edited(
        NIXL, put(0, "kvTransfer.kvRole", "kv_consumer"), put(1, "kvTransfer.kvRole", "kv_producer")
    ),
    chart=f'[PD001] {P}[0].kvTransfer.kvRole "kv_consumer" contradicts',
)
case(
    "pd003-unknown-service",
    f"PD003 {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace('"pd-llama-decode-engine-service"', '"pd-llama-decoder-engine-service"'),
    chart=f"[PD003] {P}[0].lmcacheConfig.nixlPeerHost:",
)
case(
    "pd003-points-at-prefill",
    f"PD003 {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace(
        '"pd-llama-decode-engine-service"', '"pd-llama-prefill-engine-service.default.svc"'
    ),
    chart=f"[PD003] {P}[0].lmcacheConfig.nixlPeerHost:",
)
case(
    "pd003-other-release",
    f"PD003 {P}[0].lmcacheConfig.nixlPeerHost",
    BASE,
    chart=f'[PD003] {P}[0].lmcacheConfig.nixlPeerHost "pd-llama-decode-engine-service" is not',
    args="--release prod",
)
case(
    "pd003-peer-pool-missing",
    f"PD003 {P}[1].kvTransfer.peerPool",
    edited(SEED, put(1, "kvTransfer.peerPool", "nope")),
    chart=f'[PD003] {P}[1].kvTransfer.peerPool "nope" names no pool',
)
case(
    "pd003-peer-pool-same-role",
    f"PD003 {P}[1].kvTransfer.peerPool",
    edited(SEED, put(1, "kvTransfer.peerPool", "seed-decode")),
    chart=f'[PD003] {P}[1].kvTransfer.peerPool "seed-decode" is not a prefill pool',
)
case(
    "pd004-port-mismatch",
    f"PD004 {P}[0].lmcacheConfig.nixlPeerPort",
    nth_replace(BASE, 'nixlPeerPort: "55555"', 'nixlPeerPort: "55556"', 2),
    chart=f"[PD004] {P}[0].lmcacheConfig.nixlPeerPort:",
)
case(
    "pd005-model-mismatch",
    f"PD005 {P}[1].modelURL",
    nth_replace(
        BASE,
        'modelURL: "meta-llama/Llama-3.1-8B-Instruct"',
        'modelURL: "meta-llama/Llama-3.1-70B-Instruct"',
        2,
    ),
    chart=f"[PD005] {P}[1].modelURL:",
)
case(
    "pd005-max-model-len",
    f"PD005 {P}[1].vllmConfig.maxModelLen",
    nth_replace(BASE, "maxModelLen: 32000", "maxModelLen: 16000", 2),
    chart=f"[PD005] {P}[1].vllmConfig.maxModelLen:",
)
case(
    "pd005-kv-cache-dtype",
    f"PD005 {P}[1].vllmConfig.kvCacheDtype",
    edited(NIXL, put(0, "vllmConfig.kvCacheDtype", "fp8")),
    chart=f"[PD005] {P}[1].vllmConfig.kvCacheDtype:",
)
case(
    "pd005-block-size",
    f"PD005 {P}[1].vllmConfig.blockSize",
    edited(NIXL, put(0, "vllmConfig.blockSize", 64), put(1, "vllmConfig.blockSize", 32)),
    chart=f"[PD005] {P}[1].vllmConfig.blockSize:",
)
case(
    "pd006-duplicate-pool",
    f"PD006 {P}[1].name",
    BASE.replace('name: "llama-decode"', 'name: "llama-prefill"'),
    chart=f'[PD006] {P}[1].name "llama-prefill" is used twice',
)
case(
    "pd007-name-too-long",
    f"PD007 {P}[0].name",
    BASE.replace(
        '"pd-llama-decode-engine-service"',
        '"a-rather-long-release-name-for-this-cluster-llama-decode-engine-service"',
    ),
    chart=None,
    args="--release a-rather-long-release-name-for-this-cluster",
)
case(
    "pd008-unknown-label",
    "PD008 routerSpec.extraArgs[3]",
    BASE.replace('    - "llama-decode"', '    - "llama-decoder"'),
    chart='[PD008] routerSpec.extraArgs[3]: --decode-model-labels names "llama-decoder"',
)
case(
    "pd008-wrong-role",
    "PD008 routerSpec.extraArgs[1]",
    BASE.replace('    - "llama-prefill"\n', '    - "llama-decode"\n'),
    chart='[PD008] routerSpec.extraArgs[1]: --prefill-model-labels names "llama-decode", a decode pool',
)
case(
    "pd008-missing-decode-labels",
    "PD008 routerSpec.extraArgs",
    BASE.replace('    - "--decode-model-labels"\n    - "llama-decode"\n', ""),
    chart="[PD008] routerSpec.extraArgs:",
)
case(
    "pd009-roundrobin-with-pd",
    "PD009 routerSpec.routingLogic",
    BASE.replace('"disaggregated_prefill"', '"roundrobin"'),
    chart="[PD009] prefill:",
)
case(
    "pd009-pd-routing-without-decode",
    "PD009 routerSpec.type",
    edited(NIXL, put(1, "role", "both"), drop(1, "kvTransfer"), put(0, "role", "both")),
    chart="[PD009] routerSpec.type:",
)
case(
    "pd010-gpus-vs-tp",
    f"PD010 {P}[1].requestGPU",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        tensorParallelSize: 2\n",
        2,
    ),
    chart=f"[PD010] {P}[1].requestGPU:",
)
case(
    "pd010-gpus-vs-tp-pp-dp",
    f"PD010 {P}[1].requestGPU",
    edited(
        NIXL,
        put(1, "vllmConfig.pipelineParallelSize", 2),
        put(1, "vllmConfig.dataParallelSize", 2),
        put(1, "requestGPU", 2),
    ),
    chart=f"[PD010] {P}[1].requestGPU:",
)
case(
    "pd010-tp-without-gpus",
    f"PD010 {P}[1].requestGPU",
    edited(NIXL, put(1, "vllmConfig.tensorParallelSize", 2), drop(1, "requestGPU")),
    chart=f"[PD010] {P}[1].requestGPU:",
)
case(
    "pd012-v0-engine",
    f"PD012 {P}[1].vllmConfig.v1",
    nth_replace(BASE, "        v1: 1\n", "        v1: 0\n", 2),
    chart=f"[PD012] {P}[1].vllmConfig.v1:",
)
case(
    "pd012-v0-engine-removed",
    f"PD012 {P}[1].vllmConfig.v0",
    edited(NIXL, put(1, "vllmConfig.v0", "1")),
    chart=f"[PD012] {P}[1].vllmConfig.v0:",
)
case(
    "pd012-pynccl-too-new",
    f"PD012 {P}[0].tag",
    edited(SEED, put(0, "tag", "v0.11.0"), put(1, "tag", "v0.11.0")),
    chart=f"[PD012] {P}[0].kvTransfer.connector:",
)
case(
    "pd012-pynccl-stated-version",
    f"PD012 {P}[0].vllmVersion",
    edited(
        SEED,
        put(0, "repository", "registry.example.com/vllm"),
        put(0, "tag", "latest"),
        put(0, "vllmVersion", "0.10.1"),
    ),
    chart="PyNcclConnector is not in vLLM 0.10.1",
)
case(
    "pd012-pynccl-v1-engine",
    f"PD012 {P}[1].vllmConfig.v1",
    edited(SEED, put(1, "vllmConfig.v1", 1)),
    chart=f"[PD012] {P}[1].vllmConfig.v1:",
)
p2p_after = [put(i, "kvTransfer", {"connector": "P2pNcclConnector"}) for i in (0, 1)]
case(
    "pd012-p2pnccl-removed",
    f"PD012 {P}[0].tag",
    edited(
        NIXL,
        *p2p_after,
        put(0, "tag", "v0.23.0"),
        put(1, "tag", "v0.23.0"),
        router("vllmRouter", {}),
    ),
    chart=f"[PD012] {P}[0].kvTransfer.connector:",
)
case(
    "pd012-p2pnccl-too-old",
    f"PD012 {P}[0].tag",
    edited(
        NIXL, *p2p_after, put(0, "tag", "v0.9.1"), put(1, "tag", "v0.9.1"), router("vllmRouter", {})
    ),
    chart="P2pNcclConnector is not in vLLM 0.9.1",
)
case(
    "pd012-load-failure-policy",
    f"PD012 {P}[0].kvTransfer.loadFailurePolicy",
    edited(
        NIXL,
        put(0, "tag", "v0.11.0"),
        put(1, "tag", "v0.11.0"),
        put(0, "kvTransfer.loadFailurePolicy", "fail"),
    ),
    chart=f"[PD012] {P}[0].kvTransfer.loadFailurePolicy:",
)
case(
    "pd013-tp-pynccl",
    f"PD013 {P}[1].vllmConfig.tensorParallelSize",
    edited(SEED, put(1, "vllmConfig.tensorParallelSize", 2), put(1, "requestGPU", 2)),
    chart=f"[PD013] {P}[1].vllmConfig.tensorParallelSize:",
)
case(
    "pd013-connector-mismatch",
    f"PD013 {P}[1].kvTransfer.connector",
    edited(MOONCAKE, put(1, "kvTransfer", {"connector": "NixlConnector"})),
    chart=f"[PD013] {P}[1]:",
)
case(
    "pd014-legacy-replicas",
    f"PD014 {P}[1].replicaCount",
    nth_replace(BASE, "replicaCount: 1", "replicaCount: 2", 2),
    chart=f"[PD014] {P}[1].replicaCount:",
)
case(
    "pd014-pynccl-replicas",
    f"PD014 {P}[0].replicaCount",
    edited(SEED, put(0, "replicaCount", 2)),
    chart=f"[PD014] {P}[0].replicaCount:",
)
case(
    "pd015-model-label",
    f"PD015 {P}[1].labels.model",
    BASE.replace('        model: "llama-decode"', '        model: "decode"'),
    chart=f'[PD015] {P}[1].labels.model is "decode"',
)
case(
    "pd015-pod-label",
    f"PD015 {P}[0].podLabels.model",
    edited(NIXL, put(0, "podLabels", {"model": "qwen"})),
    chart=f'[PD015] {P}[0].podLabels.model is "qwen"',
)
case(
    "pd016-every-pool-disabled",
    f"PD016 {P}",
    edited(NIXL, put(0, "enabled", False), put(1, "enabled", False)),
    chart="[PD016] servingEngineSpec.modelSpec:",
)
case(
    "pd016-no-pools",
    f"PD016 {P}",
    edited(NIXL, lambda v: v["servingEngineSpec"].pop("modelSpec")),
    chart="[PD016] servingEngineSpec.modelSpec:",
)
case(
    "pd017-vllm-router-lmcache",
    "PD017 routerSpec.type",
    edited(
        LMCACHE,
        lambda v: v.__setitem__(
            "routerSpec",
            {"type": "vllm-router", "repository": "registry.example.com/r", "tag": "1"},
        ),
        put(0, "kvTransfer.lmcache", {"proxyHost": "lmcache-pd-proxy"}),
    ),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-vllm-router-tutorial-lmcache",
    "PD017 routerSpec.type",
    BASE.replace("routerSpec:\n", 'routerSpec:\n  type: "vllm-router"\n'),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-production-stack-nixl",
    "PD017 routerSpec.type",
    edited(
        NIXL,
        lambda v: v.__setitem__(
            "routerSpec",
            {
                "routingLogic": "disaggregated_prefill",
                "extraArgs": [
                    "--prefill-model-labels",
                    "qwen-prefill",
                    "--decode-model-labels",
                    "qwen-decode",
                ],
            },
        ),
    ),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-kv-connector-nixl-for-mooncake",
    "PD017 routerSpec.vllmRouter.kvConnector",
    edited(MOONCAKE, router("vllmRouter.kvConnector", "nixl")),
    chart="[PD017] routerSpec.vllmRouter.kvConnector:",
)
case(
    "pd017-kv-connector-mooncake-for-nixl",
    "PD017 routerSpec.vllmRouter.kvConnector",
    edited(NIXL, router("vllmRouter.kvConnector", "mooncake")),
    chart="[PD017] routerSpec.vllmRouter.kvConnector:",
)
case(
    "pd017-static-without-workers",
    "PD017 routerSpec.vllmRouter.prefillUrls",
    edited(
        NIXL,
        router("vllmRouter.serviceDiscovery", "static"),
        lambda v: v["servingEngineSpec"].__setitem__("enableEngine", False),
    ),
    chart="[PD017] routerSpec.vllmRouter.serviceDiscovery:",
)
case(
    "pd018-lmcache-and-kv-transfer",
    f"PD018 {P}[0].kvTransfer",
    edited("values-16-disagg-prefill.yaml", put(0, "kvTransfer", {"connector": "NixlConnector"})),
    chart=f"[PD018] {P}[0]:",
)
case(
    "pd018-mooncake-aggregated",
    f"PD018 {P}[0].kvTransfer.connector",
    edited(MOONCAKE, put(0, "role", "both"), put(1, "role", "both")),
    chart=f"[PD018] {P}[0].kvTransfer.connector:",
)
case(
    "pd018-lmcache-aggregated",
    f"PD018 {P}[1].kvTransfer.connector",
    edited(LMCACHE, put(1, "role", "both")),
    chart=f"[PD018] {P}[1].kvTransfer.connector:",
)
case(
    "pd018-lmcache-sender-without-proxy",
    f"PD018 {P}[0].kvTransfer.lmcache.proxyHost",
    edited(LMCACHE, router("enableRouter", False)),
    chart=f"[PD018] {P}[0].kvTransfer.lmcache.proxyHost:",
)
# LMCache's PD proxy as the router (routerSpec.type lmcache-proxy, tutorial 19)
case(
    "pd017-lmcache-proxy-without-script",
    "PD017 routerSpec.lmcacheProxy",
    edited(LMCACHE, router("lmcacheProxy", {})),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-lmcache-proxy-nixl",
    "PD017 routerSpec.type",
    edited(NIXL, router("type", "lmcache-proxy"), router("lmcacheProxy.scriptConfigMap", "p")),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-lmcache-proxy-decode-ports",
    f"PD017 {P}[2].kvTransfer.lmcache",
    edited(LMCACHE, lambda v: v["servingEngineSpec"]["modelSpec"].append(
        {**copy.deepcopy(pool(v, 1)), "name": "llama-decode-2"}),
        put(2, "kvTransfer.lmcache", {"peerInitPort": 7310, "peerAllocPort": 7410})),
    chart=f"[PD017] {P}[2]:",
)  # fmt: skip
case(
    "pd014-lmcache-proxy-decode-replicas",
    f"PD014 {P}[1].replicaCount",
    edited(LMCACHE, put(1, "replicaCount", 2)),
    chart=f"[PD014] {P}[1].replicaCount:",
)
case(
    "pd003-lmcache-proxy-host",
    f"PD003 {P}[0].kvTransfer.lmcache.proxyHost",
    edited(LMCACHE, put(0, "kvTransfer.lmcache", {"proxyHost": "lmcache-pd-proxy"})),
    chart=f'[PD003] {P}[0].kvTransfer.lmcache.proxyHost "lmcache-pd-proxy" is not the LMCache proxy',
)
case(
    "pd004-lmcache-proxy-port",
    f"PD004 {P}[0].kvTransfer.lmcache.proxyPort",
    edited(LMCACHE, put(0, "kvTransfer.lmcache", {"proxyPort": 7600})),
    chart=f"[PD004] {P}[0].kvTransfer.lmcache.proxyPort:",
)
case(
    "pd018-pynccl-decode-without-peer",
    f"PD018 {P}[1].kvTransfer.peerPool",
    edited(SEED, drop(1, "kvTransfer.peerPool")),
    chart=f"[PD018] {P}[1].kvTransfer.peerPool:",
)
case(
    "pd018-decode-without-connector",
    f"PD018 {P}[1]",
    edited(NIXL, drop(1, "kvTransfer"), drop(0, "kvTransfer")),
    chart=f"[PD018] {P}[0]:",
)

# ---- engines over several pods (LeaderWorkerSet) and the DisaggregatedSet
MULTI = "values-22-llama405b-multinode.yaml"
WIDE_EP = "values-23-deepseek-wide-ep.yaml"
DSET = "values-24-disaggregatedset.yaml"


def engine(key: str, value: Any) -> Edit:
    def edit(values: dict[str, Any]) -> None:
        values["servingEngineSpec"][key] = copy.deepcopy(value)

    return edit


def dset(key: str, value: Any) -> Edit:
    def edit(values: dict[str, Any]) -> None:
        values["servingEngineSpec"]["disaggregatedSet"][key] = copy.deepcopy(value)

    return edit


case(
    "pd010-multinode-gpus",
    f"PD010 {P}[0].requestGPU",
    edited(MULTI, put(0, "requestGPU", 4)),
    chart=f"[PD010] {P}[0].requestGPU:",
)
case(
    "pd020-dp-over-nodes",
    f"PD020 {P}[1].vllmConfig.dataParallelSize",
    edited(
        WIDE_EP,
        put(1, "vllmConfig.dataParallelSize", 6),
        put(1, "vllmConfig.tensorParallelSize", 2),
        put(1, "multiNode.nodes", 4),
        put(1, "requestGPU", 3),
    ),
    chart=f"[PD020] {P}[1].vllmConfig.dataParallelSize:",
)
case(
    "pd020-no-multinode-form",
    f"PD020 {P}[0].tag",
    edited(MULTI, put(0, "tag", "v0.8.4"), put(1, "tag", "v0.8.4")),
    chart=f"[PD020] {P}[0].multiNode:",
)
case(
    "pd020-pynccl-multinode",
    f"PD020 {P}[0].kvTransfer.connector",
    edited(
        SEED,
        *[put(i, "multiNode", {"nodes": 2}) for i in (0, 1)],
        *[put(i, "vllmConfig.tensorParallelSize", 2) for i in (0, 1)],
    ),
    chart=f"[PD020] {P}[0].multiNode:",
)
case(
    "pd021-lws-without-disaggregatedset",
    "PD021 servingEngineSpec.disaggregatedSet.enabled",
    edited(DSET, engine("lwsVersion", "0.8.0")),
    chart="[PD021] servingEngineSpec.disaggregatedSet.enabled:",
)
case(
    "pd021-placement-needs-lws-0-10",
    "PD021 servingEngineSpec.disaggregatedSet.placementPolicy",
    edited(DSET, engine("lwsVersion", "0.9.0")),
    chart="[PD021] servingEngineSpec.disaggregatedSet.placementPolicy:",
)
case(
    "pd021-replicas-all-or-none",
    f"PD021 {P}[1].replicaCount",
    edited(DSET, put(1, "replicaCount", 0)),
    chart=f"[PD021] {P}[1].replicaCount:",
)
case(
    "pd021-placement-without-topology",
    "PD021 servingEngineSpec.disaggregatedSet.placementPolicy.topology",
    edited(DSET, dset("placementPolicy", {"type": "ExclusiveTopology"})),
    chart="[PD021] servingEngineSpec.disaggregatedSet.placementPolicy.topology:",
)
case(
    "pd021-exclusive-topology-with-placement",
    f"PD021 {P}[0].multiNode.exclusiveTopology",
    edited(DSET, put(0, "multiNode", {"nodes": 1, "exclusiveTopology": "kubernetes.io/hostname"})),
    chart=f"[PD021] {P}[0].multiNode.exclusiveTopology:",
)
case(
    "pd021-external-with-slices",
    "PD021 servingEngineSpec.disaggregatedSet.slices",
    edited(DSET, put(1, "scalingMode", "External")),
    chart="[PD021] servingEngineSpec.disaggregatedSet.slices:",
)
case(
    "pd021-scaling-mode-without-set",
    f"PD021 {P}[0].scalingMode",
    edited(MULTI, put(0, "scalingMode", "External")),
    chart=f"[PD021] {P}[0].scalingMode:",
)

# The llm-d router (routerSpec.type llm-d, tutorial 25)
LLMD = "values-25-llm-d-router.yaml"


def llmd_router(values: dict[str, Any]) -> None:
    """Another asset's pools behind the llm-d router (its own router keys dropped)."""
    router_spec = values["routerSpec"]
    for key in ("vllmRouter", "lmcacheProxy", "routingLogic", "extraArgs", "repository", "tag"):
        router_spec.pop(key, None)
    router_spec["type"] = "llm-d"


case(
    "pd017-llmd-lmcache",
    "PD017 routerSpec.type",
    edited(LMCACHE, llmd_router, put(0, "kvTransfer.lmcache.proxyHost", "lmcache-proxy")),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd017-llmd-pynccl",
    "PD017 routerSpec.type",
    edited(SEED, llmd_router),
    chart="[PD017] routerSpec.type:",
)
case(
    "pd022-llmd-gateway-without-name",
    "PD022 routerSpec.llmd.gateway.name",
    edited(LLMD, router("llmd.mode", "gateway")),
    chart="[PD022] routerSpec.llmd.gateway.name:",
)
case(
    "pd022-llmd-gateway-in-standalone",
    "PD022 routerSpec.llmd.gateway.name",
    edited(LLMD, router("llmd.gateway", {"name": "inference-gateway"})),
    chart="[PD022] routerSpec.llmd.gateway:",
)
case(
    "pd022-llmd-nixl-decode-tp",
    f"PD022 {P}[1].vllmConfig.tensorParallelSize",
    edited(LLMD, put(0, "vllmConfig.tensorParallelSize", 2), put(0, "requestGPU", 2)),
    chart=f"[PD022] {P}[1].vllmConfig.tensorParallelSize:",
)
case(
    "pd022-llmd-model-server-port",
    "PD022 routerSpec.llmd.sidecar.modelServerPort",
    edited(LLMD, router("llmd.sidecar", {"modelServerPort": 5600})),
    chart="[PD022] routerSpec.llmd.sidecar.modelServerPort:",
)
case(
    "pd022-llmd-static-discovery",
    "PD022 routerSpec.serviceDiscovery",
    edited(LLMD, router("serviceDiscovery", "static")),
    chart="[PD022] routerSpec.serviceDiscovery:",
)
case(
    "pd022-llmd-stage-order-v0-9",
    "PD022 routerSpec.llmd.scheduler.stageOrder",
    edited(
        LLMD, router("llmd.version", "v0.9.0"), router("llmd.scheduler.stageOrder", "prefill-first")
    ),
    chart="[PD022] routerSpec.llmd.scheduler.stageOrder:",
)
case(
    "pd022-llmd-prompt-tokens-v0-9",
    "PD022 routerSpec.llmd.scheduler.promptTokens",
    edited(
        LLMD,
        router("llmd.version", "v0.9.0"),
        router("llmd.scheduler.decider", "prefix-based"),
        router("llmd.scheduler.promptTokens", 512),
    ),
    chart="[PD022] routerSpec.llmd.scheduler.promptTokens:",
)
case(
    "pd022-llmd-prefill-first-with-prefix-decider",
    "PD022 routerSpec.llmd.scheduler.decider",
    edited(
        LLMD,
        router("llmd.scheduler.decider", "prefix-based"),
        router("llmd.scheduler.stageOrder", "prefill-first"),
    ),
    chart="[PD022] routerSpec.llmd.scheduler.decider:",
)
case(
    "schema-llmd-failure-mode-failclosed",
    "SCHEMA routerSpec.llmd.gateway.failureMode",
    edited(
        LLMD,
        router("llmd.mode", "gateway"),
        router("llmd.gateway", {"name": "gw", "failureMode": "FailClosed"}),
    ),
    chart="failureMode",
)
case(
    "schema-llmd-non-cached-tokens-zero",
    "SCHEMA routerSpec.llmd.scheduler.nonCachedTokens",
    edited(
        LLMD,
        router("llmd.scheduler.decider", "prefix-based"),
        router("llmd.scheduler.nonCachedTokens", 0),
    ),
    chart="nonCachedTokens",
)

# Autoscalers: KEDA ScaledObjects per pool, the router's HPA
KEDA = {"enabled": True, "minReplicaCount": 1, "maxReplicaCount": 3}
case(
    "pd023-keda-on-a-1p1d-connector",
    f"PD023 {P}[0].keda",
    edited(SEED, put(0, "keda", KEDA)),
    chart=f"[PD023] {P}[0].keda:",
)
case(
    "pd023-keda-min-above-max",
    f"PD023 {P}[1].keda.minReplicaCount",
    edited(NIXL, put(1, "keda", {"enabled": True, "minReplicaCount": 4, "maxReplicaCount": 2})),
    chart=f"[PD023] {P}[1].keda.minReplicaCount:",
)
case(
    "pd023-keda-idle-not-below-min",
    f"PD023 {P}[0].keda.idleReplicaCount",
    edited(NIXL, put(0, "keda", {"enabled": True, "minReplicaCount": 2, "idleReplicaCount": 2})),
    chart=f"[PD023] {P}[0].keda.idleReplicaCount:",
)
case(
    "pd023-keda-to-zero-on-its-own-metrics",
    f"PD023 {P}[0].keda",
    edited(NIXL, put(0, "keda", {"enabled": True, "minReplicaCount": 0})),
    chart=f"[PD023] {P}[0].keda:",
)
case(
    "pd023-keda-without-triggers",
    f"PD023 {P}[0].keda",
    edited(NIXL, put(0, "keda", {"enabled": True, "waitingRequests": 0})),
    chart=f"[PD023] {P}[0].keda:",
)
case(
    "pd023-keda-on-a-static-role",
    f"PD023 {P}[0].keda",
    edited(DSET, put(0, "keda", KEDA)),
    chart=f"[PD023] {P}[0].keda:",
)
case(
    "pd023-keda-on-lmcache-proxy-decode",
    f"PD023 {P}[1].keda",
    edited(LMCACHE, put(1, "keda", KEDA)),
    chart=f"[PD023] {P}[1].keda:",
)
case(
    "pd023-router-autoscaling-lmcache-proxy",
    "PD023 routerSpec.autoscaling",
    edited(LMCACHE, router("autoscaling", {"enabled": True})),
    chart="[PD023] routerSpec.autoscaling:",
)
case(
    "pd023-router-autoscaling-without-cpu-request",
    "PD023 routerSpec.autoscaling",
    edited(
        NIXL,
        router("autoscaling", {"enabled": True}),
        router("resources", {"requests": {"cpu": None}}),
    ),
    chart="[PD023] routerSpec.autoscaling:",
)
case(
    "pd023-router-autoscaling-min-above-max",
    "PD023 routerSpec.autoscaling.minReplicas",
    edited(NIXL, router("autoscaling", {"enabled": True, "minReplicas": 5, "maxReplicas": 2})),
    chart="[PD023] routerSpec.autoscaling.minReplicas:",
)
case(
    "pd024-service-and-pod-monitor",
    "PD024 servingEngineSpec.podMonitor",
    edited(
        NIXL,
        lambda v: v["servingEngineSpec"].update(
            serviceMonitor={"enabled": True}, podMonitor={"enabled": True}
        ),
    ),
    chart="[PD024] servingEngineSpec.serviceMonitor:",
)
case(
    "pd024-lmcache-proxy-monitor",
    "PD024 routerSpec.serviceMonitor",
    edited(LMCACHE, router("serviceMonitor", {"enabled": True})),
    chart="[PD024] routerSpec.serviceMonitor:",
)
# The PD canary (canary.enabled)
case(
    "pd025-canary-aggregated",
    "PD025 canary.enabled",
    Path("helm/ci/aggregated-values.yaml").read_text() + "canary:\n  enabled: true\n",
    chart="[PD025] canary.enabled:",
)
case(
    "pd025-canary-gateway-without-url",
    "PD025 canary.routerUrl",
    Path("helm/ci/llmd-gateway-mooncake-values.yaml").read_text() + "canary:\n  enabled: true\n",
    chart="[PD025] canary.routerUrl:",
)

# Flags and env the chart sets itself (PD026), in vLLM's spellings: --flag=value, underscores
case(
    "pd026-engine-port",
    f"PD026 {P}[0].vllmConfig.extraArgs[0]",
    edited(NIXL, put(0, "vllmConfig.extraArgs", ["--port=9000"])),
    chart=f"[PD026] {P}[0].vllmConfig.extraArgs[0]:",
)
case(
    "pd026-engine-max-model-len-underscore",
    f"PD026 {P}[1].vllmConfig.extraArgs[1]",
    edited(NIXL, put(1, "vllmConfig.extraArgs", ["--enforce-eager", "--max_model_len", "2048"])),
    chart=f"[PD026] {P}[1].vllmConfig.extraArgs[1]:",
)
case(
    "pd026-engine-kv-transfer-config",
    f"PD026 {P}[0].vllmConfig.extraArgs[0]",
    edited(NIXL, put(0, "vllmConfig.extraArgs", ['--kv_transfer_config={"kv_connector":"x"}'])),
    chart=f"[PD026] {P}[0].vllmConfig.extraArgs[0]:",
)
case(
    "pd026-nixl-side-channel-env",
    f"PD026 {P}[1].env[0].name",
    edited(NIXL, put(1, "env", [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}])),
    chart=f"[PD026] {P}[1].env[0].name:",
)
case(
    "pd026-router-host",
    "PD026 routerSpec.extraArgs[0]",
    edited(NIXL, router("extraArgs", ["--host", "127.0.0.1"])),
    chart="[PD026] routerSpec.extraArgs[0]:",
)
# Every form argparse takes (issue 39): a prefix, `=value`, `_`; the routers' flags too
case(
    "pd026-engine-host-prefix",
    f"PD026 {P}[0].vllmConfig.extraArgs[0]",
    edited(NIXL, put(0, "vllmConfig.extraArgs", ["--hos", "0.0.0.0"])),
    chart=f"[PD026] {P}[0].vllmConfig.extraArgs[0]: --hos sets --host,",
)
case(
    "pd026-engine-max-model-len-prefix",
    f"PD026 {P}[1].vllmConfig.extraArgs[0]",
    edited(NIXL, put(1, "vllmConfig.extraArgs", ["--max_model=4096"])),
    chart=f"[PD026] {P}[1].vllmConfig.extraArgs[0]: --max_model=4096 sets --max-model-len,",
)
case(
    "pd026-router-prometheus-host-underscore",
    "PD026 routerSpec.extraArgs[0]",
    edited(NIXL, router("extraArgs", ["--prometheus_host", "0.0.0.0"])),
    chart="[PD026] routerSpec.extraArgs[0]: --prometheus_host sets --prometheus-host,",
)
case(
    "pd026-lmcache-proxy-host-equals",
    "PD026 routerSpec.extraArgs[0]",
    edited(LMCACHE, router("extraArgs", ["--proxy-h=0.0.0.0"])),
    chart="[PD026] routerSpec.extraArgs[0]: --proxy-h=0.0.0.0 sets --proxy-host,",
)

if __name__ == "__main__":
    for old in OUT.glob("*.yaml"):
        old.unlink()
    for name, text in cases.items():
        (OUT / f"{name}.yaml").write_text(text)
    print(f"wrote {len(cases)} files to {OUT}")
