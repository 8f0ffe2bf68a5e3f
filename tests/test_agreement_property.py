"""Property: the chart and `pdctl validate` agree on generated values.

Generated documents mix every PD knob (role, kvTransfer with every connector of the table,
routerSpec.type and discovery, router labels) with the Kubernetes pass-through fields (affinity,
tolerations, nodeSelector, env, security contexts, router resources), valid and invalid. For each:
- whatever validate accepts, helm renders, and every object passes strict Kubernetes schemas;
- whatever the chart refuses, validate refuses too;
- validate never crashes and every error has a rule and a message.
Single mutations of the shipped values files are judged by tests/mutations.py. Each test asserts
that a share of its examples was accepted and a share refused by the PD rules, so that the
examples reach the code they judge.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdctl import connectors
from pdctl.helm import Helm
from pdctl.values.paths import KeyPath
from tests.helpers import CHART
from tests.mutations import REPLACEMENTS, SHIPPED, agreement, judge, key_paths, mutated

# Each example renders with helm: no deadline, and the helm fixture is shared by the examples.
RENDERS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CONNECTORS = list(connectors.load(CHART).connectors)
KV_ROLES = list(connectors.KV_ROLES)
ROUTING = ["roundrobin", "disaggregated_prefill"]
AFFINITY = [
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}},
    {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": "gpu"}}},
    {"nodeAffinity": {"preferred": []}},
]  # fmt: skip
TOLERATIONS = [
    [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    [{"key": "x", "operator": "Equal", "value": "y", "tolerationSeconds": 30,
      "effect": "NoExecute"}],
    [{"key": "x", "effect": "Sometimes"}],
    [{"key": "x", "tolerationSeconds": "soon"}],
]  # fmt: skip
ENV = [
    [{"name": "NCCL_DEBUG", "value": "INFO"}],
    [{"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    [{"name": "1BAD", "value": "x"}],
    [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
]
POD_SECURITY = [{"runAsNonRoot": True, "fsGroup": 1000}, {"runAsUser": -1}, {"sysctls": "none"}]
CONTAINER_SECURITY = [
    {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    {"privileged": "yes"},
    {"seccompProfile": {"type": "RuntimeDefault"}},
]
RESOURCES = [{"requests": {"cpu": "1", "memory": "1Gi"}}, {"requests": {"cpu": "lots"}}]
API_KEYS = ["sk-1", {"secretName": "key", "secretKey": "k"}, {"secretName": "key"}, 5]
PROBES = [{"periodSeconds": 3, "httpGet": {"path": "/health", "port": "router-port"}},
          {"successThreshold": 2}, {"periodSeconds": 0}]  # fmt: skip
ROUTER_TYPES = ["production-stack", "vllm-router", "lmcache-proxy", "llm-d"]
LLMD = [
    {"mode": "gateway"},
    {"mode": "gateway", "gateway": {"name": "gw"}},
    {"gateway": {"name": "gw"}},
    {"gateway": {"name": "gw", "failureMode": "FailClosed"}},
    {"sidecar": {"modelServerPort": 8000}},
    {"sidecar": {"modelServerPort": 5600}},
    {"version": "v0.9.0", "scheduler": {"stageOrder": "prefill-first"}},
    {"scheduler": {"decider": "prefix-based", "nonCachedTokens": 0}},
    {"scheduler": {"config": "apiVersion: llm-d.ai/v1\nkind: EndpointPickerConfig\n"}},
    {"epp": {"flags": {"v": 3}}},
    {"epp": {"flags": {"pool-name": "x"}}},
]
LMCACHE_PROXY = [{}, {"scriptPath": "/p/proxy.py"}, {"scriptConfigMap": "p", "notifyPort": 7600},
                 {"scriptConfigMap": "p", "scriptPath": "/p.py"}]  # fmt: skip
STRATEGIES = [{"type": "Recreate"}, {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}]
MULTI_NODE = [
    {"nodes": 2},
    {"nodes": 1},
    None,
    {"nodes": 4, "masterPort": 29600},
    {"nodes": 2, "exclusiveTopology": "kubernetes.io/hostname"},
    {"nodes": 0},
]
DISAGGREGATED_SETS = [
    {"enabled": True},
    {"enabled": True, "slices": 2,
     "placementPolicy": {"type": "ExclusiveSlice", "topology": "kubernetes.io/hostname"}},
    {"enabled": True, "placementPolicy": {"type": "ExclusiveTopology"}},
    {"enabled": False, "slices": 3},
]  # fmt: skip


# A coherent release per connector: the image it needs, and the router that routes it.
COHERENT = {
    "NixlConnector": (("vllm/vllm-openai", "v0.33.0"), "vllm-router"),
    "MooncakeConnector": (("vllm/vllm-openai", "v0.33.0"), "vllm-router"),
    "P2pNcclConnector": (("vllm/vllm-openai", "v0.15.1"), "vllm-router"),
    "PyNcclConnector": (("vllm/vllm-openai", "v0.9.2"), "production-stack"),
    "LMCacheConnectorV1": (("lmcache/vllm-openai", "v0.3.7"), "lmcache-proxy"),
    "tutorial": (("lmcache/vllm-openai", "2025-05-17-v1"), "production-stack"),
    None: (("vllm/vllm-openai", "v0.33.0"), "production-stack"),
}


def coherent_pool(name: str, role: str, connector: str | None, prefill: str) -> dict[str, Any]:
    (repository, tag), _ = COHERENT[connector]
    spec: dict[str, Any] = {
        "name": name,
        "role": role,
        "repository": repository,
        "tag": tag,
        "modelURL": "Qwen/Qwen2.5-7B-Instruct",
        "requestGPU": 1,
        "vllmConfig": {"maxModelLen": 8192},
    }
    if connector == "tutorial":
        kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role, "kv_both")
        spec["lmcacheConfig"] = {"enabled": True, "kvRole": kv_role, "enablePD": True}
    elif connector and role != "both":
        spec["kvTransfer"] = {"connector": connector}
        if connector == "PyNcclConnector" and role == "decode":
            spec["kvTransfer"]["peerPool"] = prefill
    return spec


@st.composite
def coherent(draw: st.DrawFn) -> dict[str, Any]:
    """A release that should deploy: 1P1D, xPyD (where the connector allows) or aggregated."""
    connector = draw(st.sampled_from([*CONNECTORS, "tutorial", None]))
    one_to_one = connector in ("PyNcclConnector", "tutorial")
    shape = draw(st.sampled_from(["aggregated"] if connector is None else ["1P1D", "2P1D"]))
    roles = {"aggregated": ["both"], "1P1D": ["prefill", "decode"]}.get(
        shape, ["prefill", "prefill", "decode"] if not one_to_one else ["prefill", "decode"]
    )
    names = [f"{role}-{i}" for i, role in enumerate(roles)]
    specs = [coherent_pool(n, r, connector, names[0]) for n, r in zip(names, roles, strict=True)]
    _, router_type = COHERENT[connector]
    router: dict[str, Any] = {"enableRouter": router_type is not None}
    if router_type == "vllm-router":
        router |= {"type": "vllm-router", "vllmRouter": {"serviceDiscovery": "k8s"}}
    elif router_type == "lmcache-proxy":
        router |= {"type": "lmcache-proxy", "lmcacheProxy": {"scriptConfigMap": "lmcache-pd"}}
    elif router_type and shape != "aggregated":
        prefill = ",".join(n for n, r in zip(names, roles, strict=True) if r == "prefill")
        decode = ",".join(n for n, r in zip(names, roles, strict=True) if r == "decode")
        router |= {
            "routingLogic": "disaggregated_prefill",
            "extraArgs": ["--prefill-model-labels", prefill, "--decode-model-labels", decode],
        }
    return {"servingEngineSpec": {"modelSpec": specs}, "routerSpec": router}


Mutation = tuple[str, Any]  # (what, value): applied to a random pool or the router


def mutate(values: dict[str, Any], where: int, what: str, value: Any) -> None:
    pools = values["servingEngineSpec"]["modelSpec"]
    spec = pools[where % len(pools)]
    if what.startswith("router."):
        target = values["routerSpec"]
        *parents, last = what.removeprefix("router.").split(".")
    elif what.startswith("engine."):
        target = values["servingEngineSpec"]
        *parents, last = what.removeprefix("engine.").split(".")
    else:
        target = spec
        *parents, last = what.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    if value is None:
        target.pop(last, None)
    else:
        target[last] = value


MUTATIONS = st.one_of(
    st.tuples(st.just("role"), st.sampled_from(["prefill", "decode", "both", None])),
    st.tuples(st.just("kvTransfer.connector"), st.sampled_from(CONNECTORS)),
    st.tuples(st.just("kvTransfer.kvRole"), st.sampled_from(KV_ROLES)),
    st.tuples(st.just("kvTransfer.peerPool"), st.sampled_from(["prefill-0", "decode-1", None])),
    st.tuples(st.just("kvTransfer.lmcache"), st.sampled_from([None, {"peerInitPort": 7300}])),
    st.tuples(st.just("kvTransfer.loadFailurePolicy"), st.sampled_from(["fail", "recompute"])),
    st.tuples(st.just("kvTransfer"), st.sampled_from([None])),
    st.tuples(st.just("tag"), st.sampled_from(["v0.9.2", "v0.10.1", "v0.11.0", "v0.23.0", "dev"])),
    st.tuples(st.just("replicaCount"), st.sampled_from([2, 0])),
    st.tuples(st.just("requestGPU"), st.sampled_from([2])),
    st.tuples(st.just("vllmConfig.tensorParallelSize"), st.sampled_from([2])),
    st.tuples(st.just("vllmConfig.maxModelLen"), st.sampled_from([4096])),
    st.tuples(st.just("vllmConfig.kvCacheDtype"), st.sampled_from(["fp8"])),
    st.tuples(st.just("vllmConfig.blockSize"), st.sampled_from([32, 64])),
    st.tuples(st.just("vllmConfig.v1"), st.sampled_from([0, 1])),
    st.tuples(st.just("modelURL"), st.sampled_from(["Qwen/Qwen2.5-7B"])),
    st.tuples(st.just("labels"), st.sampled_from([{"model": "other"}, {"team": "a"}])),
    st.tuples(st.just("affinity"), st.sampled_from(AFFINITY)),
    st.tuples(st.just("tolerations"), st.sampled_from(TOLERATIONS)),
    st.tuples(st.just("nodeSelector"), st.sampled_from([{"gpu": "h100"}, {"gpu": 1}])),
    st.tuples(st.just("env"), st.sampled_from(ENV)),
    st.tuples(st.just("engine.securityContext"), st.sampled_from(POD_SECURITY)),
    st.tuples(st.just("engine.containerSecurityContext"), st.sampled_from(CONTAINER_SECURITY)),
    st.tuples(st.just("engine.env"), st.sampled_from(ENV)),
    st.tuples(st.just("engine.enableEngine"), st.sampled_from([False])),
    st.tuples(st.just("router.type"), st.sampled_from(ROUTER_TYPES)),
    st.tuples(st.just("router.lmcacheProxy"), st.sampled_from(LMCACHE_PROXY)),
    st.tuples(st.just("router.llmd"), st.sampled_from(LLMD)),
    st.tuples(st.just("kvTransfer.lmcache"), st.sampled_from([{"proxyHost": "elsewhere"},
                                                             {"proxyPort": 7600}])),
    st.tuples(st.just("router.routingLogic"), st.sampled_from(ROUTING)),
    st.tuples(st.just("router.enableRouter"), st.sampled_from([True, False])),
    st.tuples(st.just("router.vllmRouter.kvConnector"), st.sampled_from(["nixl", "mooncake"])),
    st.tuples(st.just("router.vllmRouter.serviceDiscovery"), st.sampled_from(["static"])),
    st.tuples(st.just("router.extraArgs"), st.just(["--prefill-model-labels", "decode-1"])),
    st.tuples(st.just("router.resources"), st.sampled_from(RESOURCES)),
    st.tuples(st.just("router.containerSecurityContext"), st.sampled_from(CONTAINER_SECURITY)),
    st.tuples(st.just("router.env"), st.sampled_from(ENV)),
    # production-stack's routerSpec keys (helm/files/production-stack.yaml), valid and not
    st.tuples(st.just("router.serviceDiscovery"), st.sampled_from(["static", "k8s", "dns"])),
    st.tuples(st.just("router.staticBackends"), st.sampled_from(["http://10.0.0.5:8000", "x"])),
    st.tuples(st.just("router.staticModels"), st.sampled_from(["m", "m,m"])),
    st.tuples(st.just("router.vllmApiKey"), st.sampled_from(API_KEYS)),
    st.tuples(st.just("router.readinessProbe"), st.sampled_from(PROBES)),
    st.tuples(st.just("router.startupProbe"), st.sampled_from(PROBES)),
    st.tuples(st.just("router.prefixMinMatchLength"), st.sampled_from([64, -1])),
    st.tuples(st.just("router.rootPath"), st.sampled_from(["/vllm", "vllm"])),
    st.tuples(st.just("router.lmcacheControllerPort"), st.sampled_from([9100, "", 0])),
    st.tuples(st.just("router.lmcacheConfig"), st.sampled_from([{"logLevel": "DEBUG"}])),
    st.tuples(st.just("router.affinity"), st.sampled_from(AFFINITY)),
    st.tuples(st.just("router.securityContext"), st.sampled_from(POD_SECURITY)),
    st.tuples(st.just("router.strategy"), st.sampled_from(STRATEGIES)),
    st.tuples(st.just("router.serviceAccountName"), st.sampled_from(["serving", "Bad_Name"])),
    st.tuples(st.just("router.nodePort"), st.sampled_from([30080, 70000])),
    # engines over several pods (LeaderWorkerSet) and the DisaggregatedSet
    st.tuples(st.just("multiNode"), st.sampled_from(MULTI_NODE)),
    st.tuples(st.just("vllmConfig.dataParallelSize"), st.sampled_from([2, 4])),
    st.tuples(st.just("vllmConfig.enableExpertParallel"), st.sampled_from([True])),
    st.tuples(st.just("scalingMode"), st.sampled_from(["External", "Static"])),
    st.tuples(st.just("engine.disaggregatedSet"), st.sampled_from(DISAGGREGATED_SETS)),
    st.tuples(st.just("engine.lwsVersion"), st.sampled_from(["0.8.0", "0.9.0", "v0.10.0"])),
)  # fmt: skip


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A coherent release with zero to three mutations."""
    values = draw(coherent())
    for what, value in draw(st.lists(MUTATIONS, max_size=3)):
        mutate(values, draw(st.integers(0, 2)), what, value)
    return values


def test_chart_and_validate_agree(helm4: Helm) -> None:
    outcomes: Counter[str] = Counter()

    @settings(RENDERS, max_examples=80)
    @given(values=documents())
    def agree(values: dict[str, Any]) -> None:
        _, outcome = agreement(values, helm4)
        outcomes[outcome] += 1

    agree()
    assert_reached(outcomes, accepted=0.2, by_rules=0.1)


def assert_reached(outcomes: Counter[str], accepted: float, by_rules: float) -> None:
    """The examples reached what they judge: a share was accepted (rendered and checked against
    Kubernetes) and a share was refused by the PD rules, not only by loading or the schema."""
    total = sum(outcomes.values())
    assert outcomes["accepted"] >= accepted * total, dict(outcomes)
    assert outcomes["refused by the rules"] >= by_rules * total, dict(outcomes)


@st.composite
def single_mutations(draw: st.DrawFn) -> tuple[dict[str, Any], KeyPath]:
    """A shipped values file with one key deleted or replaced (tests/mutations.py), and the
    key that changed."""
    values = SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))]
    path = draw(st.sampled_from(key_paths(values)))
    return mutated(values, path, draw(st.sampled_from(REPLACEMENTS)))


def test_single_mutations_of_shipped_values(helm4: Helm) -> None:
    """A few hundred mutations with a fixed seed (benchmarks/mutations.py runs ten times more)."""
    outcomes: Counter[str] = Counter()

    @settings(RENDERS, max_examples=300, derandomize=True)
    @given(mutation=single_mutations())
    def judged(mutation: tuple[dict[str, Any], KeyPath]) -> None:
        outcomes[judge(*mutation, helm4)] += 1

    judged()
    assert_reached(outcomes, accepted=0.05, by_rules=0.02)
