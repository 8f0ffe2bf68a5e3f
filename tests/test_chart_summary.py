"""The chart states each fact it derives for a pool once (helm/templates/_summary.tpl, the
annotation pd-stack.io/summary) and pdctl reads it there (pdctl/rules/summary.py): FACTS lists
each fact, the chart helper that computes it, the summary key, and where pdctl reads it. The
summary agrees with what the chart renders, sits on the workloads' own metadata (not the pod
template), and neither pdctl/rules nor pdctl/plan derives a fact from the values again."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdctl import connectors, manifests, naming
from pdctl.errors import InputError
from pdctl.helm import Helm
from pdctl.naming import Release
from pdctl.plan import emit
from pdctl.rules import summary
from pdctl.rules.deployment import Deployment
from tests.helpers import CHART, ROOT, VALUES_FILES, Render, load_values

# fact: (the chart helper that computes it, its key in the summary, where pdctl reads it)
FACTS: dict[str, tuple[str, str, str]] = {
    "role": ("pd-stack.poolRole", "role", "Pool.role"),
    "connector": ("pd-stack.poolConnector", "connector", "Pool.connector"),
    "kv role": ("pd-stack.kvRole", "kvRole", "Pool.kv_role"),
    "kind": ("pd-stack.poolKind", "kind", "Pool.kind"),
    "nodes": ("pd-stack.poolNodes", "nodes", "Pool.nodes"),
    "vLLM version": ("pd-stack.vllmVersion", "vllmVersion", "Pool.version"),
    "its key": ("pd-stack.vllmVersionKey", "vllmVersionKey", "Pool.version"),
    "routes PD": ("pd-stack.routesPD", "routesPD", "Deployment.routes_pd, emit._chart_wires"),
    "discovery": ("pd-stack.routerDiscovery", "routerDiscovery", "the annotation (kubectl)"),
    "LMCache proxy": ("pd-stack.isLMCacheProxy", "lmcacheProxy", "the annotation (kubectl)"),
}
WORKLOADS = ("Deployment", "LeaderWorkerSet", "DisaggregatedSet")


def test_each_fact_is_computed_by_the_chart_s_helper_into_its_key() -> None:
    template = (CHART / "templates" / "_summary.tpl").read_text()
    for fact, (helper, key, _) in FACTS.items():
        assert f'"{key}" (' in template and f'"{helper}"' in template, fact


def _entries(obj: manifests.Manifest) -> list[dict[str, Any]]:
    """The summary entries an object carries, if any."""
    annotations = obj["metadata"].get("annotations") or {}
    return json.loads(annotations[naming.SUMMARY]) if naming.SUMMARY in annotations else []


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_the_summary_says_what_the_chart_renders(helm4: Helm, rendered: Render, path: Path) -> None:
    """Each engine workload's own metadata has the summary of its pools (never its pod
    template), and the facts agree with the render: the pods' role label, the kv-transfer
    config, the workload's kind and its group size."""
    objects = rendered(helm4, path)
    pools = {pool.name: pool for pool in manifests.summarize(objects).pools}
    read = summary.read(objects)
    assert set(read) == set(pools)
    for obj in objects:
        labels = obj["metadata"].get("labels", {})
        if obj["kind"] in WORKLOADS and labels.get(naming.COMPONENT) == naming.ENGINE:
            assert {entry["pool"] for entry in _entries(obj)} <= set(pools)
            assert _entries(obj), obj["metadata"]["name"]
        assert naming.SUMMARY not in json.dumps(obj.get("spec", {})), obj["metadata"]["name"]
    for name, fact in read.items():
        pool = pools[name]
        assert (fact.role, fact.kind, fact.nodes) == (pool.role, pool.kind, pool.nodes), name
        if fact.settings_key != "lmcacheConfig" or pool.connector:  # the tutorial's form: env
            assert (fact.connector, fact.kv_role) == (pool.connector, pool.kv_role), name


def test_pdctl_reads_each_fact_from_the_summary_not_the_values(
    helm4: Helm, rendered: Render
) -> None:
    """A summary that says otherwise than the values wins: the facts are read, not derived."""
    path = ROOT / "tutorials" / "assets" / "values-17-nixl-vllm-router.yaml"
    objects = rendered(helm4, path)
    values = load_values(path)
    first = values["servingEngineSpec"]["modelSpec"][0]["name"]
    entry = next(e for o in objects for e in _entries(o) if e["pool"] == first)
    entry |= {"role": "decode", "kvRole": "kv_consumer", "kind": "LeaderWorkerSet", "nodes": 3}
    entry |= {"vllmVersion": "0.9.0", "vllmVersionKey": "vllmVersion", "routesPD": False}
    told = {first: summary.PoolSummary.from_json(entry)}
    deployment = Deployment.from_values(values, Release("pd"), connectors.load(), told)
    pool = deployment.pools[0]
    assert (pool.role, pool.kv_role, pool.kind, pool.nodes) == (
        "decode",
        "kv_consumer",
        "LeaderWorkerSet",
        3,
    )
    assert pool.version == ((0, 9, 0), pool.at("vllmVersion"))
    with pytest.raises(summary.Unrendered):  # the other pool has no summary here
        _ = deployment.routes_pd
    deployment.pools[1:] = []
    assert not deployment.routes_pd


# Values keys that decide a fact (the chart's helpers read them), and names of the old Python
# derivations: pdctl/rules and pdctl/plan read none of them.
DECIDING_KEYS = {
    "role",
    "kvRole",
    "connector",
    "multiNode",
    "nodes",
    "vllmVersion",
    "serviceDiscovery",
    "routingLogic",
}
DERIVATIONS = {"is_official", "SpecifierSet", "role_by_kv_role", "ROLE_BY_KV", "vllm_versions"}


def _reads(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The string keys read (.get(key), [key], `key in`), and the names and attributes used."""
    keys, names = set(), set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            key = node.args[0] if node.func.attr == "get" and node.args else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In):
            key = node.left
        elif isinstance(node, (ast.Name, ast.Attribute)):
            names.add(node.id if isinstance(node, ast.Name) else node.attr)
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
    return keys, names


@pytest.mark.parametrize(
    "path",
    [
        path
        for folder in ("rules", "plan")
        for path in sorted((ROOT / "pdctl" / folder).glob("*.py"))
        if path.name != "summary.py"  # the reader of the annotation
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_rules_and_plan_derive_no_fact_from_the_values(path: Path) -> None:
    keys, names = _reads(ast.parse(path.read_text()))
    assert not keys & DECIDING_KEYS, sorted(keys & DECIDING_KEYS)
    assert not names & DERIVATIONS, sorted(names & DERIVATIONS)


def test_init_s_wiring_reads_the_chart_s_refusal_and_its_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`pdctl init` asks the chart whether it wires the connector: PD012 and PD017 say why not
    (no Python copy of them), and the summary of what it rendered must say the pools transfer
    KV with the connector through a router that routes PD."""
    wired = emit.wiring("MooncakeConnector")
    assert wired.connector.name == "MooncakeConnector"
    with pytest.raises(InputError) as refused:
        emit.wiring("PyNcclConnector")
    assert [line[:7] for line in refused.value.details] == ["[PD012]", "[PD017]"]
    # named as the pools init writes, not by the probe's key paths
    assert "modelSpec" not in " ".join(refused.value.details)
    assert "route the prefill pool" in refused.value.details[1]
    read = summary.read

    def not_pd(objects: list[manifests.Manifest]) -> dict[str, summary.PoolSummary]:
        return {k: replace(v, routes_pd=False) for k, v in read(objects).items()}

    monkeypatch.setattr(summary, "read", not_pd)
    with pytest.raises(InputError, match="does not wire NixlConnector through vllm-router"):
        emit.wiring()
