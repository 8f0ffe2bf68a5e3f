"""Part of the Kubernetes API server TEST DOUBLE (tests/doubles/kube_api.py): label and field
selectors, and the patch formats helm sends (strategic merge patch, JSON merge patch, JSON patch).

Kept small: the strategic merge patch knows the merge keys of the lists the chart renders (by
field name, not by schema) and the directives client-go's three-way merge emits ($patch,
$retainKeys, $setElementOrder, $deleteFromPrimitiveList). Everything else is replaced whole.
"""

from __future__ import annotations

import copy
import re
from typing import Any

# Lists that Kubernetes merges by a key (patchMergeKey in the API types); others are atomic.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "ports": "containerPort",  # a Service's ports merge by "port": see _merge_key
}
MERGED_PRIMITIVE_LISTS = {"finalizers"}


# ---- selectors --------------------------------------------------------------------------------

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [term.strip() for term in [*terms, current] if term.strip()]


def labels_match(selector: str | None, labels: dict[str, str] | None) -> bool:
    """Kubernetes label selector syntax: k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b)."""
    labels = labels or {}
    for term in _split_terms(selector or ""):
        set_term = _SET_TERM.match(term)
        if set_term:
            key, op, values = set_term.groups()
            members = {value.strip() for value in values.split(",")}
            if (op == "in") != (key in labels and labels[key] in members):
                return False
        elif "!=" in term:
            key, value = (part.strip() for part in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (part.strip() for part in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: dict[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def fields_match(selector: str | None, obj: dict[str, Any]) -> bool:
    """Field selectors as the API server takes them: path=v, path==v, path!=v."""
    for term in _split_terms(selector or ""):
        negate = "!=" in term
        path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        actual = _field(obj, path.strip())
        matches = ("" if actual is None else str(actual)) == value.strip()
        if matches == negate:
            return False
    return True


# ---- patches ----------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test, move, copy)."""
    doc = copy.deepcopy(target)

    def parent(path: str) -> tuple[Any, str]:
        parts = _pointer(path)
        node = doc
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node, parts[-1]

    def get(path: str) -> Any:
        node, key = parent(path)
        return node[int(key)] if isinstance(node, list) else node[key]

    def remove(path: str) -> Any:
        node, key = parent(path)
        return node.pop(int(key)) if isinstance(node, list) else node.pop(key)

    def add(path: str, value: Any) -> None:
        node, key = parent(path)
        if isinstance(node, list):
            node.insert(len(node) if key == "-" else int(key), value)
        else:
            node[key] = value

    for op in operations:
        kind, path = op["op"], op["path"]
        if kind == "add":
            add(path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            remove(path)
        elif kind == "replace":
            remove(path)
            add(path, copy.deepcopy(op["value"]))
        elif kind == "test":
            if get(path) != op["value"]:
                raise ValueError(f"test failed at {path}")
        elif kind == "move":
            add(path, remove(op["from"]))
        elif kind == "copy":
            add(path, copy.deepcopy(get(op["from"])))
        else:
            raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports" and any(isinstance(i, dict) and "port" in i for i in items):
        return "port"
    return MERGE_KEYS.get(field)


def strategic_merge(target: Any, patch: Any) -> Any:
    """A Kubernetes strategic merge patch applied to a map."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    result = copy.deepcopy(target)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field, []) if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = strategic_merge(result.get(key) or {}, value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    for field, order in orders.items():
        result[field] = _ordered(field, result.get(field) or [], order)
    if "$retainKeys" in patch:
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current = list(current or [])
    if field in MERGED_PRIMITIVE_LISTS:
        return current + [item for item in patch if item not in current]
    key = _merge_key(field, current + patch)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [item for item in copy.deepcopy(patch) if item != {"$patch": "replace"}]
    if {"$patch": "replace"} in patch:
        return [item for item in copy.deepcopy(patch) if item != {"$patch": "replace"}]
    result = copy.deepcopy(current)
    for item in patch:
        index = next((i for i, old in enumerate(result) if old.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(field, items)
    if key is None:
        return items

    def rank(item: Any) -> int:
        for position, entry in enumerate(order):
            if isinstance(entry, dict) and entry.get(key) == item.get(key):
                return position
        return len(order)

    return sorted(items, key=rank)
