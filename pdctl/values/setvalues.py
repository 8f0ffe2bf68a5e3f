"""helm-style --set assignments applied to a values mapping.

The supported subset of helm's --set syntax:
  - `a.b.c=value` (dotted path; `\\.` escapes a dot inside a key, as in helm),
  - list indices `a[0].b=value` (a list grows with nulls as helm does),
  - several assignments in one argument separated by commas: `a=1,b=2`,
  - `{x,y}` for a list of values,
  - value parsing as helm's: base-10 integers (int64, not starting with 0), `true`/`false`,
    `null` in any letter case (null removes the chart's default for that key, as in helm), and
    anything else as a string. Floats stay strings, as with helm --set.
  - helm's bounds: an index up to 65536, at most 30 dotted names in one key.
Not supported: --set-string, --set-file, --set-json, escaped commas inside values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pdctl.errors import UsageError
from pdctl.values.paths import KeyPath

# helm's own bounds, MaxIndex and MaxNestedNameLevel in
# https://github.com/helm/helm/blob/v3.17.2/pkg/strvals/parser.go (the same in v4.1.4).
MAX_INDEX = 65536
MAX_NESTED_NAME_LEVEL = 30
# Beyond helm: the list items all the --set arguments may add together (a path of many
# `[65536]` would otherwise take gigabytes in helm and here alike).
MAX_LIST_ITEMS = 16 * MAX_INDEX

_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[[0-9]+\])+)\Z")
_INT = re.compile(r"^[-+]?[0-9]+\Z")


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
    """helm's strvals typedVal: true/false/null in any letter case (Go's strings.EqualFold), a
    base-10 int64 that does not start with 0 (or 0 itself), else the text."""
    folded = text.casefold()
    if folded in ("true", "false"):
        return folded == "true"
    if folded == "null":
        return None
    if text == "0":
        return 0
    if text[:1] != "0" and _INT.match(text) and len(text.lstrip("+-").lstrip("0")) <= 19:
        value = int(text)
        if -(2**63) <= value < 2**63:
            return value
    return text


def _parse_value(text: str) -> Any:
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1]
        return [parse_scalar(item) for item in inner.split(",")] if inner else []
    return parse_scalar(text)


def _index(digits: str, key: str) -> int:
    if len(digits.lstrip("0")) > len(str(MAX_INDEX)) or int(digits) > MAX_INDEX:
        raise UsageError(
            f"--set: index {digits} in {key!r} is greater than the maximum of {MAX_INDEX} "
            "(helm's limit too)"
        )
    return int(digits)


def parse_path(key: str) -> list[str | int]:
    """`a.b[0].c` -> ["a", "b", 0, "c"]."""
    parts: list[str | int] = []
    pieces = re.split(r"(?<!\\)\.", key)
    # helm counts the dots after a name, not those after an index (a[0].b).
    names = sum(1 for piece in pieces[:-1] if not piece.endswith("]"))
    if names > MAX_NESTED_NAME_LEVEL:
        raise UsageError(
            f"--set: {key[:80]!r}... nests {names} names deep, more than the maximum of "
            f"{MAX_NESTED_NAME_LEVEL} (helm's limit too)"
        )
    for piece in pieces:
        piece = piece.replace("\\.", ".")
        match = _INDEX.match(piece)
        if match:
            if match.group("key"):
                parts.append(match.group("key"))
            parts.extend(_index(i, key) for i in re.findall(r"\[([0-9]+)\]", piece))
        elif not piece or "[" in piece or "]" in piece:
            raise UsageError(f"--set: cannot read the key {key!r}")
        else:
            parts.append(piece)
    return parts


class _Assigner:
    """Applies assignments one path step at a time (no recursion: a path may be long), counting
    the list items it adds."""

    def __init__(self) -> None:
        self.added = 0

    def assign(
        self, data: dict[str, Any], path: list[str | int], value: Any, original: str
    ) -> None:
        target: Any = data
        for head, after in zip(path, path[1:], strict=False):
            target = self._child(target, head, list if isinstance(after, int) else dict, original)
        self._check(target, path[-1], original)
        if isinstance(path[-1], int):
            self._grow(target, path[-1], original)
        target[path[-1]] = value

    def _child(self, target: Any, head: str | int, wanted: type, original: str) -> Any:
        self._check(target, head, original)
        if isinstance(head, int):
            self._grow(target, head, original)
            if not isinstance(target[head], (dict, list)):
                target[head] = wanted()
            return target[head]
        child = target.get(head)
        if not isinstance(child, wanted):
            child = target[head] = wanted()
        return child

    @staticmethod
    def _check(target: Any, head: str | int, original: str) -> None:
        if isinstance(head, int) and not isinstance(target, list):
            raise UsageError(f"--set {original}: {head} indexes something that is not a list")
        if isinstance(head, str) and not isinstance(target, dict):
            raise UsageError(
                f"--set {original}: {head!r} is a key into something that is not a map"
            )

    def _grow(self, target: list[Any], index: int, original: str) -> None:
        missing = index + 1 - len(target)
        if missing <= 0:
            return
        self.added += missing
        if self.added > MAX_LIST_ITEMS:
            raise UsageError(
                f"--set {original[:80]}: the --set arguments add more than {MAX_LIST_ITEMS} list "
                "items in all"
            )
        target.extend([None] * missing)


def assignments(arguments: Sequence[str]) -> list[tuple[KeyPath, str]]:
    """Each assignment of the --set arguments, in order: (the key path it writes, `key=value`
    as given)."""
    found = []
    for argument in arguments:
        for assignment in _split_top(argument):
            if "=" not in assignment:
                raise UsageError(f"--set {assignment!r}: expected key=value")
            found.append((tuple(parse_path(assignment.partition("=")[0])), assignment))
    return found


def apply_sets(data: dict[str, Any], arguments: Sequence[str]) -> dict[str, Any]:
    """Apply each --set argument in order, in place; returns data."""
    assigner = _Assigner()
    for path, assignment in assignments(arguments):
        value = _parse_value(assignment.partition("=")[2])
        assigner.assign(data, list(path), value, assignment)
    return data
