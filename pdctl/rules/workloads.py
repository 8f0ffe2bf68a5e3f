"""Rules on how pools are rendered (helm/files/workloads.yaml): engines that span pods
(LeaderWorkerSet, PD020) and the release's DisaggregatedSet (PD021).

Each error here has a twin in the chart (templates/_checks-workloads.tpl, same rule id
in its message).
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl import workloads
from pdctl.rules.deployment import Deployment, as_dict, as_int, format_version
from pdctl.rules.registry import Issue, rule

SET_PATH = ("servingEngineSpec", "disaggregatedSet")


@rule(
    "PD020",
    "an engine over several pods has a vLLM launch form, DP ranks per pod, a connector",
    explain=(
        "an engine over several pods (`multiNode`) has a launch form for its vLLM version "
        "(`helm/files/workloads.yaml`), `dataParallelSize` divisible by `nodes`, and a "
        "connector that moves KV from every node (not PyNccl, the tutorial's 1P1D LMCache "
        "form or P2pNccl)"
    ),
)
def multi_node_engine(deployment: Deployment) -> Iterator[Issue]:
    table = workloads.load(deployment.chart_dir)
    for pool in deployment.pools:
        if pool.nodes <= 1:
            continue
        if pool.dp > 1 and pool.dp % pool.nodes:
            yield Issue(
                pool.at("vllmConfig", "dataParallelSize"),
                f"dataParallelSize {pool.dp} does not divide over multiNode.nodes {pool.nodes}: "
                "data-parallel ranks spread evenly over the pods (--data-parallel-size-local)",
                f"make dataParallelSize a multiple of {pool.nodes}",
            )
        version, version_path = pool.version
        if table.form_for(version, pool.dp) is None:
            needs = ", ".join(
                f"{form.name}: vLLM {form.vllm_versions}"
                for form in table.forms
                if form.data_parallel == ("spanning" if pool.dp > 1 else "single")
            )
            yield Issue(
                version_path,
                f"vLLM {format_version(version) if version else '?'} has no way to run one "
                f"engine over several pods that pd-stack renders ({needs})",
                "use a newer image, or one pod per engine (remove multiNode)",
            )
        connector = pool.connector
        if connector is None:
            continue
        one_to_one = connector.pairing == "1P1D" and all(
            pool.settings.get(flag) for flag in connector.pairing_when
        )
        if one_to_one or connector.name == "P2pNcclConnector":
            why = (
                "pairs exactly one prefill pod with one decode pod"
                if one_to_one
                else "pairs prefill and decode by the addresses of single-pod engines"
            )
            yield Issue(
                pool.connector_path,
                f"{connector.name} {why}; an engine over several pods needs a connector that "
                "moves KV from every node",
                "use NixlConnector (or MooncakeConnector, LMCacheConnectorV1)",
            )


@rule(
    "PD021",
    "the DisaggregatedSet exists in the LWS version and keeps its CRD's rules",
    explain=(
        "`servingEngineSpec.disaggregatedSet` exists in the stated `lwsVersion` (>= 0.9.0; "
        "`slices`, `placementPolicy`, External scaling >= 0.10.0) and keeps the CRD's rules "
        "(2-10 roles, Static roles all with replicas or none, a topology for a placement "
        "policy, no `multiNode.exclusiveTopology` beside one, no External role with several "
        "slices); `scalingMode` only with a DisaggregatedSet"
    ),
)
def disaggregated_set(deployment: Deployment) -> Iterator[Issue]:
    table = workloads.load(deployment.chart_dir).disaggregated_set
    settings = deployment.disaggregated_set
    external = [p for p in deployment.pools if p.spec.get("scalingMode") == "External"]
    if not deployment.in_set:
        for pool in deployment.pools:
            if pool.spec.get("scalingMode"):
                yield Issue(
                    pool.at("scalingMode"),
                    "scalingMode is set but servingEngineSpec.disaggregatedSet is not enabled: "
                    "only a DisaggregatedSet role takes its replicas from an autoscaler",
                    "remove scalingMode, or set servingEngineSpec.disaggregatedSet.enabled: true",
                )
        return
    engine = as_dict(deployment.values.get("servingEngineSpec"))
    lws = workloads.parse_version(engine.get("lwsVersion"))
    lws_path = ("servingEngineSpec", "lwsVersion")
    if lws and not workloads.satisfies(lws, table["lwsVersions"]):
        yield Issue(
            (*SET_PATH, "enabled"),
            f"LWS {format_version(lws)} (servingEngineSpec.lwsVersion) has no DisaggregatedSet "
            f"({table['lwsVersionsWhy']})",
            f"upgrade the LWS controller to {table['lwsVersions']}, or one workload per pool",
        )
    policy = as_dict(settings.get("placementPolicy"))
    used = {
        "slices": ((*SET_PATH, "slices"), "slices" in settings),
        "placementPolicy": ((*SET_PATH, "placementPolicy"), bool(policy)),
        "externalScaling": (external[0].at("scalingMode") if external else lws_path, external),
    }
    for field, (path, on) in used.items():
        need = table["fields"][field]
        if on and lws and not workloads.satisfies(lws, need["lwsVersions"]):
            yield Issue(
                path,
                f"{field} needs LWS {need['lwsVersions']} ({need['why']}) but "
                f"servingEngineSpec.lwsVersion is {format_version(lws)}",
                "remove it, or upgrade the LWS controller",
            )
    roles = len(deployment.pools)
    if not table["minRoles"] <= roles <= table["maxRoles"]:
        yield Issue(
            (*SET_PATH, "enabled"),
            f"a DisaggregatedSet has {table['minRoles']} to {table['maxRoles']} roles, one per "
            f"engine pool, but the release has {roles} pool(s)",
            "give the release a prefill and a decode pool (at most 10 pools)",
        )
    static = [p for p in deployment.pools if p not in external]
    stopped = [p for p in static if p.replicas <= 0]
    running = [p for p in static if p.replicas > 0]
    if stopped and running:
        yield Issue(
            stopped[0].at("replicaCount"),
            f"replicaCount is 0 but pool(s) {', '.join(p.name for p in running)} have replicas: "
            "in a DisaggregatedSet every Static role has replicas or none has (the CRD's rule)",
            "scale the roles together",
        )
    placed = policy.get("type") not in (None, "", "None")
    if placed and not policy.get("topology"):
        yield Issue(
            (*SET_PATH, "placementPolicy", "topology"),
            f"placementPolicy.type {policy.get('type')} needs a topology: the node label key of a "
            "topology domain",
            "set placementPolicy.topology, e.g. kubernetes.io/hostname or an NVLink domain label",
        )
    for pool in deployment.pools:
        if placed and pool.multi_node.get("exclusiveTopology"):
            yield Issue(
                pool.at("multiNode", "exclusiveTopology"),
                f"multiNode.exclusiveTopology cannot be combined with placementPolicy.type "
                f"{policy.get('type')}: the DisaggregatedSet webhook refuses it (both place "
                "groups, and the slice would never schedule)",
                "use one of them",
            )
    slices = as_int(settings.get("slices"), 1)
    if external and slices > 1:
        yield Issue(
            (*SET_PATH, "slices"),
            f"slices is {slices} but pool {external[0].name!r} has scalingMode External: the "
            "DisaggregatedSet webhook refuses External scaling with more than one slice (LWS "
            "v0.10.0, alpha)",
            "use one slice, or Static scaling",
        )
