"""Each value is documented in one place: a key with a `# --` comment in helm/values.yaml has no
description of its own in the schema source (schemas/values.schema.yaml); scripts/build_schema.py
copies the comment into helm/values.schema.json, where pdctl's messages and the values reference
read it. (A definition's description documents its type, shared by several keys.)"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

from tests.helpers import CHART, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from values_reference import value_comments  # noqa: E402

COMMENTS = value_comments((CHART / "values.yaml").read_text(encoding="utf-8"))
SOURCE = yaml.safe_load((ROOT / "schemas" / "values.schema.yaml").read_text(encoding="utf-8"))
BUILT = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))


def property_node(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The node of a values key's property (its own keys, before any $ref is followed)."""
    node: dict[str, Any] | None = schema
    for part in path.split("."):
        while node is not None and "$ref" in node and node["$ref"].startswith("#/definitions/"):
            node = schema["definitions"].get(node["$ref"].rsplit("/", 1)[-1])
        node = (node or {}).get("properties", {}).get(part)
    return node


def test_a_value_commented_in_values_yaml_has_no_second_description() -> None:
    assert len(COMMENTS) > 50
    twice = [p for p in COMMENTS if "description" in (property_node(SOURCE, p) or {})]
    assert not twice, f"documented in values.yaml and in the schema source: {twice}"


def test_the_built_schema_carries_the_comments() -> None:
    found = {p: (property_node(BUILT, p) or {}).get("description") for p in COMMENTS}
    missing = [p for p, text in found.items() if COMMENTS[p] and text != COMMENTS[p]]
    assert not missing, missing
