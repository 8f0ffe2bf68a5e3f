"""The topology table (helm/files/topology.yaml) is the one place for roles, kv roles, router types
and the router's label flags: the schema's enums, pdctl's constants and the chart's templates all
come from it, and the chart's defaults come from values.yaml, never restated in a template."""

from __future__ import annotations

import json
import re

from pdctl import connectors, naming, topology
from tests.helpers import CHART

TABLE = topology.load()
SCHEMA = json.loads((CHART / "values.schema.json").read_text())["definitions"]


def test_the_schema_enums_are_the_tables() -> None:
    assert SCHEMA["modelSpec"]["properties"]["role"]["enum"] == list(TABLE.roles)
    assert SCHEMA["kvTransfer"]["properties"]["kvRole"]["enum"] == list(TABLE.kv_roles)
    assert SCHEMA["lmcacheConfig"]["properties"]["kvRole"]["enum"] == list(TABLE.kv_roles)
    assert SCHEMA["routerSpec"]["properties"]["type"]["enum"] == list(TABLE.router_types)


def test_pdctl_takes_its_constants_from_the_table() -> None:
    assert naming.ROLES == TABLE.roles
    assert connectors.KV_ROLES == TABLE.kv_roles
    assert set(TABLE.role_by_kv_role) < set(TABLE.kv_roles)
    assert set(TABLE.role_by_kv_role.values()) | set(TABLE.router_label_flags.values()) < set(
        TABLE.roles
    )


def test_templates_read_the_table_and_values_yaml_instead_of_restating_them() -> None:
    templates = "\n".join(p.read_text() for p in (CHART / "templates").glob("*.tpl"))
    assert "files/topology.yaml" in templates
    for restated in ('default "production-stack"', '"--prefill-model-labels" "prefill"'):
        assert restated not in templates, restated
    for default in ("7500", "8200"):  # lmcacheProxy.notifyPort, llmd.sidecar.modelServerPort
        assert not re.search(rf"\b{default}\b", templates), default
