"""helm-style --set assignments applied to a values mapping.

The supported subset of helm's --set syntax:
  - `a.b.c=value` (dotted path; `\\.` escapes a dot inside a key, as in helm),
  - list indices `a[0].b=value` (a list grows with nulls as helm does),
  - several assignments in one argument separated by commas: `a=1,b=2`,
  - `{x,y}` for a list of values,
  - value parsing: integers, `true`/`false`, `null` (sets null, which removes the chart's
    default for that key, as in helm), and anything else as a string. Floats stay strings, as
    with helm --set.
Not supported: --set-string, --set-file, --set-json, escaped commas inside values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pdctl.errors import UsageError

_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[\d+\])+)$")
_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def parse_scalar(text: str) -> Any:
    if _INT.match(text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    return text


def _parse_value(text: str) -> Any:
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1]
        return [parse_scalar(item) for item in inner.split(",")] if inner else []
    return parse_scalar(text)


def parse_path(key: str) -> list[str | int]:
    """`a.b[0].c` -> ["a", "b", 0, "c"]."""
    parts: list[str | int] = []
    for piece in re.split(r"(?<!\\)\.", key):
        piece = piece.replace("\\.", ".")
        match = _INDEX.match(piece)
        if match:
            if match.group("key"):
                parts.append(match.group("key"))
            parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", piece))
        elif not piece or "[" in piece or "]" in piece:
            raise UsageError(f"--set: cannot read the key {key!r}")
        else:
            parts.append(piece)
    return parts


def _assign(target: Any, path: list[str | int], value: Any, original: str) -> None:
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        if not isinstance(target, list):
            raise UsageError(f"--set {original}: {head} indexes something that is not a list")
        while len(target) <= head:
            target.append(None)
        if not rest:
            target[head] = value
            return
        if not isinstance(target[head], (dict, list)):
            target[head] = [] if isinstance(rest[0], int) else {}
        _assign(target[head], rest, value, original)
        return
    if not isinstance(target, dict):
        raise UsageError(f"--set {original}: {head!r} is a key into something that is not a map")
    if not rest:
        target[head] = value
        return
    child = target.get(head)
    wanted = list if isinstance(rest[0], int) else dict
    if not isinstance(child, wanted):
        child = wanted()
        target[head] = child
    _assign(child, rest, value, original)


def apply_sets(data: dict[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """Apply each --set argument in order, in place; returns data."""
    for argument in assignments:
        for assignment in _split_top(argument):
            if "=" not in assignment:
                raise UsageError(f"--set {assignment!r}: expected key=value")
            key, _, raw = assignment.partition("=")
            _assign(data, parse_path(key), _parse_value(raw), assignment)
    return data
