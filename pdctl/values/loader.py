"""Load a values file safely, keeping the line of every key.

Refused with a clear message (never a traceback): YAML syntax errors (with line and column),
duplicate keys, tabs used for indentation, files over MAX_BYTES, documents using more than
MAX_ALIASES aliases (alias bombs), several documents, an empty document, and a top level that is
not a mapping. The node tree is composed with a SafeLoader subclass; every mapping key and
sequence item records its line in `Document.lines` (path -> 1-based line).

Plain scalars are read as helm reads them (go-yaml v2 through sigs.k8s.io/yaml, in Helm 3.17
and 4.1; tests/test_values_loader.py checks against both binaries), not as PyYAML's YAML 1.1
would: y/Y/n/N are booleans, 1e9 is a number, while 1:30 (base 60) and 2025-05-17 (a
timestamp) stay strings. So validate sees the same values the chart does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pdctl.errors import InputError
from pdctl.values.paths import KeyPath, format_path

MAX_BYTES = 1024 * 1024
MAX_ALIASES = 100
MAX_NODES = 200_000
_TAB_INDENT = re.compile(r"^ *\t", re.MULTILINE)


class ValuesLoadError(InputError):
    """A values file that cannot be read as a values document."""

    def __init__(
        self, message: str, line: int | None = None, column: int | None = None, code: str = "YAML"
    ) -> None:
        where = f"line {line}" + (f", column {column}" if column else "") if line else ""
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = message
        self.line = line
        self.column = column
        self.code = code
        self.file: str | None = None  # set by the caller that knows which file it read


@dataclass
class Document:
    data: dict[str, Any]
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """Line of the key at path, or of its nearest ancestor that has one."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


# (tag, pattern, first characters) of the plain scalars helm's YAML library resolves, in order.
_HELM_SCALARS = [
    (
        "tag:yaml.org,2002:bool",
        r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
        "yYnNtTfFoO",
    ),
    (
        "tag:yaml.org,2002:int",
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$",
        "-+0123456789",
    ),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
]


_DATA_TAGS = {f"tag:yaml.org,2002:{kind}" for kind in ("str", "int", "float", "bool", "null")} | {
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:merge",
}


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads scalars as helm does and counts aliases, refusing documents that
    use too many."""

    yaml_implicit_resolvers: dict[Any, Any] = {}
    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_count = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ValuesLoadError(
                    f"more than {MAX_ALIASES} YAML aliases; refusing a possible alias bomb",
                    mark.line + 1,
                    mark.column + 1,
                    code="YAML003",
                )
        return super().compose_node(parent, index)


for _tag, _pattern, _first in _HELM_SCALARS:
    # The empty scalar (a key with no value) is null, as the "~" resolver says.
    _starts = [*_first, ""] if "~" in _first else list(_first)
    _Loader.add_implicit_resolver(_tag, re.compile(_pattern), _starts)


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], budget: list[int]) -> None:
    """Record lines, refuse duplicate keys and tags beyond plain data, and bound the expanded
    size (aliases share nodes)."""
    budget[0] += 1
    if budget[0] > MAX_NODES:
        raise ValuesLoadError(
            f"the document expands to more than {MAX_NODES} nodes; refusing a possible alias bomb",
            node.start_mark.line + 1,
            code="YAML003",
        )
    if node.tag not in _DATA_TAGS:
        raise ValuesLoadError(
            f"the YAML tag {node.tag} is not plain values data (strings, numbers, booleans, "
            "null, lists and mappings only)",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
            code="YAML001",
        )
    if isinstance(node, yaml.MappingNode):
        keys: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                _walk(value_node, path, lines, budget)
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in keys:
                raise ValuesLoadError(
                    f"duplicate key {format_path((*path, key))!r} (first defined on line "
                    f"{keys[key]})",
                    line,
                    key_node.start_mark.column + 1,
                    code="YAML002",
                )
            keys[key] = line
            lines.setdefault((*path, key), line)
            _walk(value_node, (*path, key), lines, budget)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.setdefault((*path, index), item.start_mark.line + 1)
            _walk(item, (*path, index), lines, budget)


def _problem_mark(error: yaml.MarkedYAMLError) -> tuple[int | None, int | None]:
    mark = error.problem_mark or error.context_mark
    return (mark.line + 1, mark.column + 1) if mark else (None, None)


def loads(text: str) -> Document:
    """Parse one values document from text."""
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise ValuesLoadError(
            f"the file is larger than {MAX_BYTES // 1024} KiB; a values file never needs that",
            code="YAML005",
        )
    tab = _TAB_INDENT.search(text)
    if tab:
        raise ValuesLoadError(
            "a tab is used for indentation; YAML allows only spaces",
            text.count("\n", 0, tab.start()) + 1,
            code="YAML004",
        )
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ValuesLoadError(
                "the file is empty; a values file is a mapping such as `servingEngineSpec: ...`",
                code="YAML006",
            )
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
            raise ValuesLoadError(
                f"the top level is {kind}; a values file must be a mapping of keys such as "
                "servingEngineSpec and routerSpec",
                node.start_mark.line + 1,
                code="YAML006",
            )
        lines: dict[KeyPath, int] = {}
        _walk(node, (), lines, [0])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        line, column = _problem_mark(error)
        reason = error.problem or str(error)
        if error.context and "single document" in error.context:
            reason = "several YAML documents; a values file holds one"
        raise ValuesLoadError(f"invalid YAML: {reason}", line, column, code="YAML001") from None
    except yaml.YAMLError as error:
        raise ValuesLoadError(f"invalid YAML: {error}", code="YAML001") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):  # pragma: no cover - guarded by the node check above
        raise ValuesLoadError("the top level must be a mapping", code="YAML006")
    return Document(data=data, lines=lines)


def load(path: Path) -> Document:
    """Read and parse a values file; the size is checked before reading it all."""
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ValuesLoadError(f"cannot read the file: {error.strerror}", code="FILE") from None
    if size > MAX_BYTES:
        raise ValuesLoadError(
            f"the file is {size} bytes, larger than {MAX_BYTES // 1024} KiB; a values file never "
            "needs that",
            code="YAML005",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValuesLoadError("the file is not UTF-8 text", code="YAML001") from None
    except OSError as error:
        raise ValuesLoadError(f"cannot read the file: {error.strerror}", code="FILE") from None
    return loads(text)
