"""Values written for vLLM production-stack: its keys are taken with the same effect, or refused by
name with the reason (helm/files/production-stack.yaml), by the chart and by validate alike."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl import manifests, naming, pipeline, production_stack
from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    ROOT,
    VALUES_FILES,
    Render,
    env_of,
    extended,
    helm_template_result,
    load_values,
    pool_container,
    render_file,
    write_values,
)

KEYS = production_stack.load()
REFUSED = [key for key in KEYS.values() if key.status == "refused"]
NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")


def with_key(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """base with the key at a production-stack path set (list items: the first pool)."""
    values = copy.deepcopy(base)
    node: Any = values
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part.removesuffix("[]"), {})
        if part.endswith("[]"):
            node = node[0]
    node[last] = value
    return values


def validate(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = write_values(tmp_path, values)
    report = pipeline.validate([str(path)], pipeline.ValidateOptions())
    return [f"{f.rule} {f.key}: {f.message}" for f in report.errors]


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: k.path)
def test_refused_keys_are_refused_by_name_when_used(
    helm4: Helm, tmp_path: Path, key: production_stack.Key
) -> None:
    used = {key.used_when: "set"} if key.used_when else {"enabled": True, "replicas": 2}
    values = with_key(NIXL, key.path, used)
    errors = validate(tmp_path, values)
    where = key.path.replace("[]", "[0]")
    message = f"production-stack's {key.name} is not supported by pd-stack: {key.note}"
    assert errors == [f"PD019 {where}: {message}"]
    chart = helm_template_result(helm4, write_values(tmp_path, values))
    assert chart.returncode != 0 and f"[PD019] {where}: {message}" in chart.stderr


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: k.path)
def test_refused_keys_pass_when_off(helm4: Helm, tmp_path: Path, key: production_stack.Key) -> None:
    """production-stack values files carry most features switched off: those pass."""
    off = {key.used_when: ""} if key.used_when else {"enabled": False}
    values = with_key(NIXL, key.path, off)
    assert validate(tmp_path, values) == []
    assert helm_template_result(helm4, write_values(tmp_path, values)).returncode == 0


# ---- keys of the production-stack router's own flags, refused with another router type
REFUSED_BY = [
    (key, router) for key in KEYS.values() for router in sorted(key.refused_by) if key.example
]
# A valid release for each other router type.
ROUTER_BASES = {
    "vllm-router": NIXL,
    "lmcache-proxy": load_values(ASSETS / "values-19-lmcache-pd.yaml"),
    "llm-d": load_values(ASSETS / "values-25-llm-d-router.yaml"),
}


@pytest.mark.parametrize("key, router", REFUSED_BY, ids=lambda k: getattr(k, "path", k))
def test_router_type_refuses_production_stack_router_keys(
    helm4: Helm, tmp_path: Path, key: production_stack.Key, router: str
) -> None:
    base = ROUTER_BASES[router]
    assert base["routerSpec"]["type"] == router
    values = with_key(base, key.path, key.example)
    errors = validate(tmp_path, values)
    message = (
        f"production-stack's {key.name} is not supported with routerSpec.type {router}: "
        f"{key.refused_by[router]}"
    )
    assert errors == [f"PD019 {key.path}: {message}"]
    chart = helm_template_result(helm4, write_values(tmp_path, values))
    assert chart.returncode != 0 and f"[PD019] {key.path}: {message}" in chart.stderr


def test_every_key_has_a_status_and_refusals_say_why() -> None:
    for key in KEYS.values():
        assert key.status in {"same", "differs", "refused"}, key.path
        if key.status != "same":
            assert len(key.note) > 20, key.path
        for router, why in key.refused_by.items():
            assert key.status != "refused" and router in ROUTER_BASES, key.path
            assert len(why) > 20, key.path


# ---- keys taken: each entry's example is set on the first pool (or shared), and what it renders
# is checked (helm/files/production-stack.yaml, `renders`).
TAKEN = [key for key in KEYS.values() if key.status != "refused"]
BASES = {None: NIXL, "tutorial": load_values(ASSETS / "values-16-disagg-prefill.yaml")}
RELEASE = naming.Release("pd")


def _targets(objects: list[manifests.Manifest], pool: str) -> dict[str, dict[str, Any] | None]:
    """Where a `renders` check looks: the first pool's objects and the router's."""

    def named(kind: str, name: str) -> dict[str, Any] | None:
        found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
        return found[0] if found else None

    engine = named("Deployment", RELEASE.pool_deployment(pool))
    router = named("Deployment", RELEASE.router_deployment)
    engine_pod = engine["spec"]["template"] if engine else None
    router_pod = router["spec"]["template"] if router else None
    return {
        "engine-deployment": engine,
        "engine-pod": engine_pod,
        "engine-container": engine_pod["spec"]["containers"][0] if engine_pod else None,
        "engine-service": named("Service", RELEASE.pool_service(pool)),
        "engine-pvc": named("PersistentVolumeClaim", RELEASE.pool_claim(pool)),
        "router-deployment": router,
        "router-pod": router_pod,
        "router-container": router_pod["spec"]["containers"][0] if router_pod else None,
        "router-service": named("Service", RELEASE.router_service),
        "router-serviceaccount": named("ServiceAccount", RELEASE.router_service_account),
        "router-role": named("Role", RELEASE.router_role),
    }


def _dig(node: Any, path: str) -> Any:
    """The value at a dotted path ('\\.' is a dot inside a key; digits index lists)."""
    for part in re.split(r"(?<!\\)\.", path):
        key = part.replace("\\.", ".")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def _contains_run(args: list[str], run: list[str]) -> bool:
    return any(args[i : i + len(run)] == run for i in range(len(args) - len(run) + 1))


def _check(check: dict[str, Any], targets: dict[str, Any], objects: list[Any]) -> None:
    if "absent" in check:
        assert targets[check["absent"]] is None, check
        return
    if "object" in check:
        kind, name = check["object"].split("/", 1)
        target: Any = manifests.find(objects, kind, name)
    else:
        target = targets[check["at"]]
        assert target is not None, f"{check['at']} is not rendered"
    if "path" in check:
        assert _dig(target, check["path"]) == check["equals"], check
    if "args" in check:
        assert _contains_run(target["args"], check["args"]), (check, target["args"])
    if "args-contain" in check:
        assert any(check["args-contain"] in arg for arg in target["args"]), (check, target["args"])
    for name, value in check.get("env", {}).items():
        assert env_of(target).get(name) == value, (check, env_of(target))


@pytest.mark.parametrize("key", TAKEN, ids=lambda k: k.path)
def test_taken_keys_render_their_effect(
    helm4: Helm, tmp_path: Path, key: production_stack.Key
) -> None:
    assert key.renders, f"{key.path}: a taken key says what it renders"
    values = with_key(BASES[key.base], key.path, key.example)
    for path, value in key.also.items():
        values = with_key(values, path, value)
    assert validate(tmp_path, values) == []
    objects = render_file(helm4, write_values(tmp_path, values))
    pool = values["servingEngineSpec"]["modelSpec"][0]["name"]
    targets = _targets(objects, pool)
    for check in key.renders:
        _check(check, targets, objects)


def test_generated_pages_are_current() -> None:
    """docs/production-stack.md and helm/README.md (the values reference) match their sources."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_a_disabled_pool_is_left_out(helm4: Helm, tmp_path: Path) -> None:
    """modelSpec[].enabled: false: no object, no check (even a broken pool), as if not listed."""
    values = copy.deepcopy(NIXL)
    spare = {**values["servingEngineSpec"]["modelSpec"][1], "name": "qwen-decode", "enabled": False}
    spare["requestGPU"] = 3  # would be PD010 (and PD006, a duplicate name) if it were rendered
    values["servingEngineSpec"]["modelSpec"].append(spare)
    assert validate(tmp_path, values) == []
    objects = render_file(helm4, write_values(tmp_path, values))
    engines = [o for o in objects if o["kind"] == "Deployment" and "vllm" in o["metadata"]["name"]]
    assert [
        extended(o["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"])
        for o in engines
    ] == [
        {"nvidia.com/gpu": "1"},
        {"nvidia.com/gpu": "1"},
    ]


def test_production_stacks_empty_defaults_mean_unset(helm4: Helm, tmp_path: Path) -> None:
    """production-stack's values.yaml writes "" / {} / null for keys it leaves unset; taken as
    unset, they render nothing (the API server would refuse an empty name)."""
    values = copy.deepcopy(NIXL)
    values["servingEngineSpec"]["vllmApiKey"] = {"secretName": "", "secretKey": ""}
    pool = values["servingEngineSpec"]["modelSpec"][0]
    pool |= {"priorityClassName": "", "serviceAccountName": "", "nodeName": ""}
    pool |= {"modelRevision": "", "envFromSecret": {}}
    values["routerSpec"] |= {"nodePort": None, "vllmApiKey": {"secretName": "", "secretKey": ""}}
    assert validate(tmp_path, values) == []
    objects = render_file(helm4, write_values(tmp_path, values))
    targets = _targets(objects, pool["name"])
    pod, engine = targets["engine-pod"], targets["engine-container"]
    assert pod is not None and engine is not None
    for key in ("priorityClassName", "serviceAccountName", "nodeName"):
        assert key not in pod["spec"], key
    assert "envFrom" not in engine and "--revision" not in engine["args"]
    assert "VLLM_API_KEY" not in env_of(engine)
    router = targets["router-container"]
    assert router is not None
    assert "VLLM_API_KEY" not in {entry["name"] for entry in router.get("env", [])}


# ---- same values, same effect as production-stack's chart -------------------------------------


def test_every_engine_and_the_production_stack_router_share_one_hash_seed(
    helm4: Helm, rendered: Render
) -> None:
    """production-stack sets PYTHONHASHSEED=123 on every engine and its router: LMCache's chunk
    hashes (PD, P2P, shared caches, KV-aware routing) only match across processes seeded alike."""
    for path in VALUES_FILES:
        objects = rendered(helm4, path)
        values = load_values(path)
        engine = values["servingEngineSpec"]
        pools = engine.get("modelSpec", []) if engine.get("enableEngine", True) else []
        for spec in (s for s in pools if s.get("enabled", True)):
            container = pool_container(objects, values, spec["name"])
            assert env_of(container)["PYTHONHASHSEED"] == "123", (path.name, spec["name"])
        routers = [o for o in objects if o["metadata"]["name"] == "pd-deployment-router"]
        router_type = (values.get("routerSpec") or {}).get("type", "production-stack")
        for router in routers:
            container = router["spec"]["template"]["spec"]["containers"][0]
            env = env_of({"env": container.get("env", [])})
            assert ("PYTHONHASHSEED" in env) == (router_type == "production-stack"), path.name


def test_the_hash_seed_is_a_value_and_a_pool_env_overrides_it(helm4: Helm, tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["servingEngineSpec"]["pythonHashSeed"] = ""
    objects = render_file(helm4, write_values(tmp_path, values))
    first, second = (s["name"] for s in values["servingEngineSpec"]["modelSpec"][:2])
    assert "PYTHONHASHSEED" not in env_of(pool_container(objects, values, first))
    values["servingEngineSpec"]["pythonHashSeed"] = "7"
    values["servingEngineSpec"]["modelSpec"][1]["env"] = [{"name": "PYTHONHASHSEED", "value": "9"}]
    objects = render_file(helm4, write_values(tmp_path, values))
    assert env_of(pool_container(objects, values, first))["PYTHONHASHSEED"] == "7"
    assert env_of(pool_container(objects, values, second))["PYTHONHASHSEED"] == "9"
    values["servingEngineSpec"]["pythonHashSeed"] = "seven"
    assert [e.split(":")[0] for e in validate(tmp_path, values)] == [
        "SCHEMA servingEngineSpec.pythonHashSeed"
    ]


def test_lmcache_pools_get_production_stacks_rpc_timeout_and_instance_ids(
    helm4: Helm, rendered: Render
) -> None:
    objects = rendered(helm4, ASSETS / "values-16-disagg-prefill.yaml")
    values = load_values(ASSETS / "values-16-disagg-prefill.yaml")
    for spec in values["servingEngineSpec"]["modelSpec"]:
        env = env_of(pool_container(objects, values, spec["name"]))
        assert env["VLLM_RPC_TIMEOUT"] == "1000000"
        assert env["LMCACHE_LMCACHE_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}


EFFECT = yaml.safe_load((ROOT / "helm" / "files" / "production-stack.yaml").read_text())["effect"]


@pytest.mark.parametrize(
    "entry", EFFECT, ids=lambda e: f"{e['component']}-{e['aspect']}-{e['name']}"
)
def test_each_listed_difference_has_its_reason(entry: dict[str, str]) -> None:
    assert entry["component"] in ("engine", "router")
    assert entry["aspect"] in ("image", "replicas", "arg", "env", "resources")
    assert bool(entry.get("reason")) != bool(entry.get("see")), "a reason or a key, not both"
    if "see" in entry:
        assert KEYS[entry["see"]].note, f"{entry['see']} has no note to point at"


def _deployment(name: str, command: list[str], env: dict[str, str]) -> str:
    container = {
        "name": "c",
        "image": "i:1",
        "command": command,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"requests": {"cpu": "1"}},
    }
    spec = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return yaml.safe_dump({"kind": "Deployment", "metadata": {"name": name}, "spec": spec})


def test_the_comparison_reads_flags_as_vllm_does_and_names_each_difference() -> None:
    """scripts/compare_production_stack.py on two hand-made renders (it needs a production-stack
    checkout to run for real; benchmarks/records/production-stack-effect.txt is its last run)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import compare_production_stack as compare

    kv = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'
    theirs = _deployment(
        "pd-a-deployment-vllm",
        ["vllm", "serve", "m", "--gpu_memory_utilization", "0.9", "--kv-transfer-config", kv],
        {"A": "1", "B": "2"},
    )
    kv_ours = '{"kv_role":"kv_consumer","kv_connector":"LMCacheConnectorV1"}'
    ours = _deployment(
        "pd-a-deployment-vllm",
        ["vllm", "serve", "m", "--gpu-memory-utilization=0.9", "--kv-transfer-config", kv_ours],
        {"A": "1", "C": "3"},
    )
    found = {
        (d.component, d.aspect, d.name, d.theirs, d.ours)
        for d in compare.compare("f", theirs, ours)
    }
    assert found == {
        ("engine", "arg", "--kv-transfer-config.kv_role", "kv_producer", "kv_consumer"),
        ("engine", "env", "B", "2", None),
        ("engine", "env", "C", None, "3"),
    }
