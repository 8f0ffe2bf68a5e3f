"""The chart's own values schema (helm/values.schema.json), errors translated for people."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pdctl import secrets
from pdctl.findings import Finding, Severity
from pdctl.hints import closest, did_you_mean
from pdctl.values.loader import SAFE_INTEGER
from pdctl.values.paths import KeyPath, format_path

# Why the schema bounds every integer key (scripts/build_schema.py).
_SAFE_HINT = (
    "helm holds every number as a 64-bit float, exact for integers only up to "
    f"{SAFE_INTEGER} (2^53 - 1): a larger one would reach the chart rounded"
)


@lru_cache(maxsize=4)
def _validator(schema_path: Path) -> Any:
    from jsonschema import Draft7Validator

    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    return Draft7Validator(schema)


def _resolve(validator: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """Follow local $refs (#/definitions/...), the only kind the chart's schema uses."""
    while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        target: Any = validator.schema
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        schema = target
    return schema


def _parts(validator: Any, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema and the allOf schemas it is made of, resolved."""
    schema = _resolve(validator, schema)
    return [schema] + [p for sub in schema.get("allOf", []) for p in _parts(validator, sub)]


def _known_properties(validator: Any, schema: dict[str, Any]) -> list[str]:
    return [name for part in _parts(validator, schema) for name in part.get("properties", {})]


def _child(validator: Any, schema: dict[str, Any] | None, key: str | int) -> dict[str, Any] | None:
    """The schema of schema's property `key` (or of its items, for an index)."""
    for part in _parts(validator, schema) if schema else []:
        found = part.get("items") if isinstance(key, int) else part.get("properties", {}).get(key)
        if isinstance(found, dict):
            return _resolve(validator, found)
    return None


def _schema_at(validator: Any, path: KeyPath) -> dict[str, Any] | None:
    schema: dict[str, Any] | None = validator.schema
    for key in path:
        schema = _child(validator, schema, key)
    return schema


def _up(path: KeyPath) -> KeyPath:
    """The mapping that holds the mapping at path (list indices skipped)."""
    end = len(path)
    while end and isinstance(path[end - 1], int):
        end -= 1
    return path[: max(end - 1, 0)]


def _children(validator: Any, path: KeyPath, name: str, siblings: list[str]) -> list[KeyPath]:
    """Where under the keys of the mapping at path (those given first) `name` is a key."""
    schema = _schema_at(validator, path)
    found = []
    for sibling in dict.fromkeys(siblings + _known_properties(validator, schema or {})):
        child = _child(validator, schema, sibling)
        place: KeyPath = (*path, sibling)
        if child is not None and child.get("type") == "array":
            child, place = _child(validator, child, 0), (*place, 0)
        if child is not None and name in _known_properties(validator, child):
            found.append(place)
    return found


def _belongs(validator: Any, path: KeyPath, name: str, given: list[str]) -> list[KeyPath]:
    """Where else in the schema an unknown key of the mapping at path is a key, nearest first:
    under its siblings, the parent mapping, under the parent's other keys, the grandparent."""
    places = _children(validator, path, name, given)
    if path:
        parent = _up(path)
        if name in _known_properties(validator, _schema_at(validator, parent) or {}):
            places.append(parent)
        places += [p for p in _children(validator, parent, name, []) if p[: len(path)] != path]
        if parent and name in _known_properties(
            validator, _schema_at(validator, _up(parent)) or {}
        ):
            places.append(_up(parent))
    return list(dict.fromkeys(places))[:3]


def _placement(path: KeyPath, place: KeyPath) -> str:
    """How to move a key from the mapping at path to the one at place."""
    if len(place) < len(path) and path[: len(place)] == place:
        return f"indent it like `{path[len(place)]}:`, a key of {format_path(place)}"
    owner = next(key for key in reversed(place) if isinstance(key, str))
    return f"indent it under `{owner}:`"


def _best(error: Any) -> Any:
    """For oneOf/anyOf failures, the sub-error that went deepest (the likely intended branch)."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        deepest = max(error.context, key=lambda e: (len(e.absolute_path), -len(e.schema_path)))
        if len(deepest.absolute_path) > len(error.absolute_path):
            return _best(deepest)
        specific = [e for e in error.context if e.validator not in ("type", "pattern", "$ref")]
        if len(specific) == 1:
            return _best(specific[0])
    return error


def _did_you_mean(given: Any, choices: list[str]) -> str | None:
    return did_you_mean(closest(str(given), choices)).strip() or None


def _unknown_key(
    validator: Any, path: KeyPath, name: str, given: list[str], allowed: list[str]
) -> tuple[KeyPath, str, str | None]:
    """Where the key belongs when it is a key one level up or down (or under a sibling), else
    the close matches, else the keys allowed here."""
    places = _belongs(validator, path, name, given)
    typo = _did_you_mean(name, allowed)
    if places:
        where = " or ".join(format_path(place) for place in places)
        hint = _placement(path, places[0]) + (f"; or {typo}" if typo else "")
        return (*path, name), f"{name} belongs under {where}, not in {format_path(path)}", hint
    if not typo and allowed:
        typo = "allowed keys here: " + ", ".join(sorted(allowed))
    return (*path, name), f"unknown key {name!r} in {format_path(path)}", typo


def _unknown_keys(validator: Any, error: Any) -> list[tuple[KeyPath, str, str | None]]:
    """One (path, message, hint) per key the closed mapping does not allow."""
    path: KeyPath = tuple(error.absolute_path)
    allowed = _known_properties(validator, error.schema)
    given = [str(key) for key in error.instance]
    unknown = sorted(key for key in given if key not in allowed)
    return [_unknown_key(validator, path, name, given, allowed) for name in unknown]


def _has_default(defaults: dict[str, Any], path: KeyPath) -> bool:
    node: Any = defaults
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return node is not None


def _shown(value: Any, path: KeyPath, secret_paths: list[KeyPath]) -> str:
    """The value as a message quotes it, secrets masked (a token given with the wrong type is
    still a token)."""
    if secrets.is_secret_path(path, secret_paths):
        return secrets.MARKER
    return json.dumps(secrets.masked(value))


def _describe(
    validator: Any, error: Any, defaults: dict[str, Any], secret_paths: list[KeyPath]
) -> tuple[KeyPath, str, str | None]:
    """(path, message, hint) for one jsonschema error."""
    path: KeyPath = tuple(error.absolute_path)
    kind, expected = error.validator, error.validator_value
    value = error.instance
    shown = _shown(value, path, secret_paths)
    where = format_path(path)
    if kind == "enum":
        choices = ", ".join(json.dumps(v) for v in expected)
        return (
            path,
            f"{where} is {shown}; allowed values: {choices}",
            _did_you_mean(value, [v for v in expected if isinstance(v, str)]),
        )
    if kind == "const":
        return path, f"{where} must be {json.dumps(expected)}, not {shown}", None
    if kind == "type":
        kinds = " or ".join(expected) if isinstance(expected, list) else expected
        return path, f"{where} must be of type {kinds}, not {shown}", None
    if kind == "not" and isinstance(expected, dict) and expected.get("description"):
        return path, f"{where} is refused: {expected['description']}", None
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {
            "minimum": ">=",
            "exclusiveMinimum": ">",
            "maximum": "<=",
            "exclusiveMaximum": "<",
        }
        hint = _SAFE_HINT if expected in (SAFE_INTEGER, -SAFE_INTEGER) else None
        return path, f"{where} is {shown}; it must be {words[kind]} {expected}", hint
    if kind == "pattern":
        return (
            path,
            f"{where} is {shown}, which does not match the pattern {expected}",
            _resolve(validator, error.schema).get("description"),
        )
    if kind in ("maxLength", "minLength"):
        word = "at most" if kind == "maxLength" else "at least"
        return path, f"{where} must be {word} {expected} characters long (is {len(value)})", None
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        hint = None
        if _has_default(defaults, (*path, missing)):  # only a null removes it: helm drops those
            hint = "a null deletes the chart's default for this key: give a value or leave it out"
        return (*path, missing), f"{where} lacks the required key {missing!r}", hint
    if kind in ("oneOf", "anyOf"):
        options = [_resolve(validator, s).get("type") or s.get("$ref", "") for s in expected]
        return (
            path,
            f"{where} is {shown}, which matches none of the allowed forms",
            error.schema.get("description") or ("forms: " + ", ".join(map(str, options))),
        )
    if secrets.MARKER in shown:  # jsonschema's own message would quote the secret
        return path, f"{where} is {shown}, which the schema refuses ({kind})", None
    return path, f"{where}: {error.message}", None


def check(
    data: dict[str, Any], schema_path: Path, defaults: dict[str, Any] | None = None
) -> list[Finding]:
    """Schema findings for values merged with the chart's defaults (given to name a default
    that the user's null deleted)."""
    validator = _validator(schema_path)
    secret_paths = [path for path, _ in secrets.paths(data)]
    findings = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path))):
        best = _best(error)
        described = (
            _unknown_keys(validator, best)
            if best.validator == "additionalProperties"
            else [_describe(validator, best, defaults or {}, secret_paths)]
        )
        findings += [
            Finding("SCHEMA", Severity.error, message, path, hint)
            for path, message, hint in described
        ]
    return findings
