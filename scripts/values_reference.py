"""The chart's values reference (helm/README.md), generated from the schema the chart enforces
(helm/values.schema.json) and the defaults and `# --` comments of helm/values.yaml.

Every key the schema accepts is listed with its type, default and description; Kubernetes
types (affinity, volumes, ...) are named, not expanded; production-stack keys that pd-stack
refuses are listed as such (docs/production-stack.md has the reasons).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "helm" / "values.schema.json"
VALUES = ROOT / "helm" / "values.yaml"
LOCAL = "#/definitions/"
KUBERNETES = "io.k8s."
REFUSED = "not supported by pd-stack"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):")


def value_comments(text: str) -> dict[str, str]:
    """Dotted key path -> the `# --` comment block just above the key in values.yaml."""
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    block: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            block = [stripped.removeprefix("# --").strip()]
        elif stripped.startswith("#") and block is not None:
            block.append(stripped.lstrip("#").strip())
        elif match := _KEY.match(line):
            indent, key = len(match[1]), match[2]
            stack = [(i, k) for i, k in stack if i < indent] + [(indent, key)]
            if block is not None:
                comments[".".join(k for _, k in stack)] = " ".join(part for part in block if part)
            block = None
        else:
            block = None
    return comments


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """node with local $refs followed (and the Kubernetes type's name where one is reached)."""
    merged = dict(node)
    while "$ref" in merged:
        name = merged.pop("$ref").removeprefix(LOCAL)
        if name.startswith(KUBERNETES):
            return merged, name.rsplit(".", 1)[-1]
        merged = {**schema["definitions"][name], **merged}
    for part in merged.get("allOf", []):
        target = part.get("$ref", "").removeprefix(LOCAL)
        if target.startswith(KUBERNETES):
            return merged, target.rsplit(".", 1)[-1]
    return merged, None


def type_of(schema: dict[str, Any], node: dict[str, Any]) -> str:
    node, kubernetes = _resolve(schema, node)
    if kubernetes:
        return f"Kubernetes {kubernetes}"
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    for combined in ("oneOf", "anyOf"):
        if combined in node:
            return " or ".join(dict.fromkeys(type_of(schema, n) for n in node[combined]))
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {type_of(schema, node.get('items', {}))}"
    if (
        kind == "object"
        and "properties" not in node
        and isinstance(node.get("additionalProperties"), dict)
    ):
        return f"map of {type_of(schema, node['additionalProperties'])}"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def rows(
    schema: dict[str, Any], node: dict[str, Any], path: str = ""
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted path, schema node) of every key, depth first; list items as `[]`."""
    resolved, kubernetes = _resolve(schema, node)
    if kubernetes:
        return
    for key, child in resolved.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        yield here, child
        target, _ = _resolve(schema, child)
        if target.get("type") == "array" and isinstance(target.get("items"), dict):
            yield from rows(schema, target["items"], here + "[]")
        else:
            yield from rows(schema, child, here)


def default_of(values: Any, path: str) -> str:
    node = values
    for part in path.split("."):
        if "[]" in part or not isinstance(node, dict) or part not in node:
            return ""
        node = node[part]
    if isinstance(node, dict) and node:
        return ""  # its keys are listed with their own defaults
    return f"`{json.dumps(node)}`"


def _short(comment: str) -> str:
    """A values.yaml comment, cut to its first sentence when it is a long guide (modelSpec's
    comment walks through every key of an entry, which have rows of their own)."""
    if len(comment) <= 400:
        return comment
    return comment.split(". ", 1)[0] + "."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    text = VALUES.read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    comments = value_comments(text)
    lines = []
    for path, node in rows(schema, schema):
        resolved, _ = _resolve(schema, node)
        description = _short(comments.get(path, "")) or resolved.get("description", "")
        if REFUSED in description:
            kind, description = "refused (PD019)", "see docs/production-stack.md"
        else:
            kind = type_of(schema, node)
        lines.append(
            f"| `{path}` | {_cell(kind)} | {default_of(values, path)} | {_cell(description)} |"
        )
    return "\n".join(
        [
            "# pd-stack chart: values reference",
            "",
            "<!-- Generated by scripts/build_docs.py from values.schema.json and values.yaml"
            " (`make docs`); edit those, not this page. -->",
            "",
            "The chart renders vLLM prefill and decode engine pools and a PD router from these",
            "values; the schema refuses any other key. The language is vLLM production-stack's",
            "([docs/production-stack.md](../docs/production-stack.md) lists each of its keys with",
            "pd-stack's status); `pdctl validate` checks the values and the PD rules that tie them",
            "together (the repository's README). Keys of a list entry are shown with `[]`.",
            "",
            "| key | type | default | description |",
            "|---|---|---|---|",
            *lines,
            "",
        ]
    )
