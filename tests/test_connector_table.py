"""The connector table (helm/files/connectors.yaml) is what the chart renders and what pdctl
reads: fragments, schema, ports, env and extra-config keys all come from it."""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pdctl import connectors, manifests
from pdctl.helm import Helm
from pdctl.naming import Release
from pdctl.rules import summary
from pdctl.rules.deployment import Deployment, Pool
from tests.helpers import CHART, ROOT, VALUES_FILES, Render, load_values, pool_container

TABLE = connectors.load(CHART)
ENTRIES = [*TABLE.connectors.values(), TABLE.tutorial_lmcache]


def test_every_connector_has_its_fragment() -> None:
    for connector in ENTRIES:
        fragment = (CHART / "templates" / f"_connector-{connector.fragment}.tpl").read_text()
        for hook in ("config", "env"):
            assert f'define "pd-stack.connector.{connector.fragment}.{hook}"' in fragment
    fragments = {p.name for p in (CHART / "templates").glob("_connector-*.tpl")}
    assert fragments == {f"_connector-{c.fragment}.tpl" for c in ENTRIES}


def _bound_integers(node: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The table's schema as scripts/build_schema.py writes it: integers bounded to 2^53 - 1."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # it imports its sibling scripts
    spec = importlib.util.spec_from_file_location("build_schema", ROOT / "scripts/build_schema.py")
    assert spec and spec.loader
    build_schema = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_schema)
    bounded = copy.deepcopy(node)
    build_schema.bound_integers(bounded)
    return bounded


def test_schema_enum_and_keys_come_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    properties = schema["definitions"]["kvTransfer"]["properties"]
    assert properties["connector"]["enum"] == list(TABLE.connectors)
    for name, entry in TABLE.raw["connectors"].items():
        for key, value in (entry.get("values") or {}).items():
            bounded = _bound_integers(value, monkeypatch)
            assert properties[key] == bounded, f"{name}: kvTransfer.{key}"


# routerSpec.type's values, as the values schema lists them.
ROUTER_TYPES = set(
    json.loads((CHART / "values.schema.json").read_text())["definitions"]["routerSpec"][
        "properties"
    ]["type"]["enum"]
)


def test_table_is_complete() -> None:
    for connector in ENTRIES:
        assert connector.engine in ("v0", "v1") and connector.pairing in ("xPyD", "1P1D")
        assert set(connector.kv_roles.values()) <= set(connectors.KV_ROLES)
        for port in connector.ports:
            assert set(port.listen_on) <= set(connectors.KV_ROLES) and port.what
        # Every router either routes the connector or says why not.
        assert set(connector.routers) | set(connector.not_routed_by) == ROUTER_TYPES
        assert not set(connector.routers) & set(connector.not_routed_by)
        assert (
            {"transfer", "failures"}
            <= set(connector.metrics)
            <= {"transfer", "failures", "bandwidth", "loaded"}
        )


def chart_env(
    container: manifests.Manifest, values: dict[str, Any], spec: dict[str, Any]
) -> set[str]:
    """Env names of an engine container that its connector rendered: all but what every engine
    gets (HF_*, POD_IP, UCX_*, VLLM_API_KEY, VLLM_USE_V1 from vllmConfig.v1, OTEL_* from
    servingEngineSpec.tracing, PROMETHEUS_MULTIPROC_DIR from vllmConfig or the table's
    prometheusMultiprocDir: tests/test_chart_connectors.py) and the user's own."""
    engine = values.get("servingEngineSpec", {})
    user = [*engine.get("env", []), *spec.get("env", [])]
    common = {"PYTHONHASHSEED", "HF_HOME", "POD_IP", "HF_TOKEN_PATH", "UCX_TLS", "UCX_NET_DEVICES"}
    common.add("PROMETHEUS_MULTIPROC_DIR")
    if "v1" in spec.get("vllmConfig", {}):
        common.add("VLLM_USE_V1")
    if "vllmApiKey" in engine:
        common.add("VLLM_API_KEY")
    if (engine.get("tracing") or {}).get("enabled"):
        common |= {"OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}
    if (values.get("routerSpec") or {}).get("type") == "llm-d":  # the sidecar's keep-alive
        common.add("VLLM_HTTP_TIMEOUT_KEEP_ALIVE")
    return {e["name"] for e in container["env"]} - common - {e["name"] for e in user}


def rendered_pools(
    helm: Helm, rendered: Render, path: Path
) -> Iterator[tuple[Pool, manifests.Manifest, set[str]]]:
    """(rules' view of a pool, its rendered engine container, env its connector rendered)."""
    objects = rendered(helm, path)
    values = load_values(path)
    for pool in Deployment.from_values(values, Release("pd"), TABLE, summary.read(objects)).pools:
        container = pool_container(objects, values, pool.name)
        yield pool, container, chart_env(container, values, pool.spec)


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_rendered_pools_follow_the_table(helm4: Helm, rendered: Render, path: Path) -> None:
    for pool, container, env in rendered_pools(helm4, rendered, path):
        # http: the engine port; vllm: vLLM's own port behind the llm-d decode sidecar.
        ports = {
            p["name"]: p["containerPort"]
            for p in container["ports"]
            if p["name"] not in ("http", "vllm")
        }
        assert ports == dict(pool.listeners()), pool.name
        args = [str(a) for a in container["args"]]
        connector = pool.connector
        if connector is None:
            assert "--kv-transfer-config" not in args and not env
            continue
        config = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert config["kv_connector"] == connector.name and config["kv_role"] == pool.kv_role
        user_extra = set(pool.settings.get("extraConfig") or {})
        rendered_extra = set(config.get("kv_connector_extra_config", {}))
        assert rendered_extra - user_extra <= set(connector.extra_config), pool.name
        assert env <= set(connector.env), pool.name


def test_every_listed_env_and_key_is_rendered_somewhere(helm4: Helm, rendered: Render) -> None:
    """The table lists nothing stale: over the shipped values, each connector's env names and
    extra-config keys all appear (and the shipped values use every connector)."""
    seen_env: dict[int, set[str]] = {}
    seen_extra: dict[int, set[str]] = {}
    for path in VALUES_FILES:
        for pool, container, env in rendered_pools(helm4, rendered, path):
            if pool.connector is None:
                continue
            args = [str(a) for a in container["args"]]
            config = json.loads(args[args.index("--kv-transfer-config") + 1])
            seen_env.setdefault(id(pool.connector), set()).update(env)
            extra = config.get("kv_connector_extra_config", {})
            seen_extra.setdefault(id(pool.connector), set()).update(extra)
    for connector in ENTRIES:
        assert seen_env.get(id(connector), set()) == set(connector.env), connector.name
        assert seen_extra.get(id(connector), set()) >= set(connector.extra_config), connector.name


@pytest.mark.parametrize("name", ["connectors.yaml", "production-stack.yaml"])
def test_no_table_string_is_cut_by_a_comment(name: str) -> None:
    """In a plain YAML scalar, " #" starts a comment: "(vLLM PR #123)" would end at "(vLLM PR".
    Every string of the tables closes the parentheses it opens."""
    import yaml

    def strings(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield str(key)
                yield from strings(value)
        elif isinstance(node, list):
            for item in node:
                yield from strings(item)
        elif isinstance(node, str):
            yield node

    data = yaml.safe_load((CHART / "files" / name).read_text(encoding="utf-8"))
    cut = [text for text in strings(data) if text.count("(") != text.count(")")]
    assert cut == []
