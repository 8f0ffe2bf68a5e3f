"""Load a values file safely, keeping the line of every key.

Refused with a clear message (never a traceback): YAML syntax errors (with line and column,
and the likely mistake: pdctl.values.syntax),
characters YAML does not allow (ESC, NUL, other control characters), duplicate keys, tabs used
for indentation, files over MAX_BYTES, documents using more than MAX_ALIASES aliases (alias
bombs), collections nested more than MAX_DEPTH levels, a second document that is not empty, an
empty document, a top level that is not a mapping, and `.nan`/`.inf`. The node tree is composed
with a SafeLoader subclass; every mapping key and sequence item records its line in
`Document.lines` (path -> 1-based line).

Accepted as helm accepts them: an empty document after the values (a trailing `---`) and a tab
between tokens (`key:\tvalue`), though never in indentation.

Plain scalars are read as helm reads them (go-yaml v2 through sigs.k8s.io/yaml, in Helm 3.17
and 4.1; tests/test_values_loader.py checks against both binaries), not as PyYAML's YAML 1.1
would: y/Y/n/N are booleans, 1e9 is a number, while 1:30 (base 60) and 2025-05-17 (a
timestamp) stay strings; an integer beyond 64 bits becomes a float and a number beyond a float's
range stays a string. So validate sees the same values the chart does. Helm holds every number as
a float64, exact for integers only up to SAFE_INTEGER: the schema refuses larger ones
(scripts/build_schema.py bounds every integer key to it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from pdctl import files
from pdctl.errors import InputError
from pdctl.values import syntax
from pdctl.values.paths import KeyPath, format_path

MAX_BYTES = 1024 * 1024
# The largest integer a float64, Helm's number, holds exactly (2^53 - 1; helm/helm issues 1707 and
# 6431): the bound of every integer key of the schema.
SAFE_INTEGER = 2**53 - 1
MAX_ALIASES = 100
MAX_NODES = 200_000
# Values files nest a few levels (the chart's deepest keys are under ten). PyYAML composes
# recursively, so without a bound a few hundred levels end in RecursionError; helm reads more.
MAX_DEPTH = 100
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


# A float as helm's YAML library writes one (go-yaml's yamlStyleFloat).
_GO_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")


def _beyond_64_bits(text: str) -> float | str:
    """An integer helm's YAML library cannot hold as int64 or uint64: a float where it reads as
    a finite one, else the text itself."""
    plain = text.replace("_", "")
    if _GO_FLOAT.match(plain) and math.isfinite(float(plain)):
        return float(plain)
    return text


def _explicit(node: yaml.ScalarNode, kind: str, construct: Any) -> Any:
    """PyYAML's constructor; a text an explicit tag calls a number (`!!int abc`) is refused."""
    try:
        return construct(node)
    except (ValueError, IndexError, KeyError):
        raise ValuesLoadError(
            f"{node.value!r} is tagged {node.tag.rpartition(':')[2]} but is not {kind}",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
            code="YAML001",
        ) from None


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads scalars as helm does, skips tabs between tokens as helm does, and
    refuses documents that use too many aliases or nest too deeply."""

    yaml_implicit_resolvers: dict[Any, Any] = {}
    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_count = 0
        self.depth = 0

    def _refuse(self, message: str) -> ValuesLoadError:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        return ValuesLoadError(message, mark.line + 1, mark.column + 1, code="YAML003")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                raise self._refuse(
                    f"more than {MAX_ALIASES} YAML aliases; refusing a possible alias bomb"
                )
        if not self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._refuse(
                f"lists and mappings nested more than {MAX_DEPTH} levels deep; a values file "
                "never needs that"
            )
        node = super().compose_node(parent, index)
        self.depth -= 1
        return node

    def get_single_node(self) -> Any:
        """The one document; null documents after it are ignored, as helm ignores them."""
        self.get_event()  # type: ignore[no-untyped-call]
        node = None if self.check_event(yaml.StreamEndEvent) else self.compose_document()
        while node is not None and not self.check_event(yaml.StreamEndEvent):
            self._trailing_document()
        if node is not None:
            self.get_event()  # type: ignore[no-untyped-call]
        return node

    def _trailing_document(self) -> None:
        """Refuse a document after the values unless helm would ignore it (empty or null)."""
        start = self.get_event()  # type: ignore[no-untyped-call]
        node = self.compose_node(None, None)
        end = self.get_event()  # type: ignore[no-untyped-call]
        line = node.start_mark.line + 1
        if node.tag != "tag:yaml.org,2002:null" or node.style:
            raise ValuesLoadError(
                "a second YAML document; a values file holds one (Helm 3 reads only the first "
                "and Helm 4 merges them, so the chart's values would depend on the helm version)",
                start.start_mark.line + 1,  # the `---` that starts it
                code="YAML001",
            )
        if node.value and start.explicit and node.start_mark.line == start.start_mark.line:
            problem = (
                "a value on the `---` line; Helm 4 refuses it (invalid Yaml document separator)"
            )
        elif not node.value and end.explicit:
            problem = (
                "an empty YAML document closed by `...`; Helm 4 refuses it (did not find "
                "expected node content)"
            )
        else:
            return
        raise ValuesLoadError(f"{problem}: remove the trailing document", line, code="YAML001")

    def scan_to_next_token(self) -> None:
        """PyYAML's, skipping tabs where helm's YAML library does: in flow collections and
        where no simple key may start (after a key's `:`, after a value); not after `-`, `?`
        or at the start of a line (_TAB_INDENT refuses those before scanning)."""
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            tabs = self.flow_level or not self.allow_simple_key
            while self.peek() == " " or (tabs and self.peek() == "\t"):
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
            if not self.scan_line_break():  # type: ignore[no-untyped-call]
                return
            if not self.flow_level:
                self.allow_simple_key = True

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int | float | str:  # type: ignore[override]
        digits = node.value.replace("_", "").lstrip("+-")
        if digits[:1] in "123456789" and len(digits) > 20:  # decimal, beyond uint64
            return _beyond_64_bits(node.value)
        value: int = _explicit(node, "an integer", super().construct_yaml_int)
        return value if -(2**63) <= value < 2**64 else _beyond_64_bits(node.value)

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        value: bool = _explicit(node, "a boolean", super().construct_yaml_bool)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float | str:  # type: ignore[override]
        value: float = _explicit(node, "a number", super().construct_yaml_float)
        if math.isfinite(value):
            return value
        if node.value.lstrip("+-").lower() in (".inf", ".nan"):
            raise ValuesLoadError(
                f"{node.value} is not a number JSON can hold; helm refuses the file (error "
                "converting YAML to JSON); give a finite number",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
                code="YAML001",
            )
        return str(node.value)  # beyond a float's range: helm's YAML library keeps the text


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)

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
                    f"{keys[key]}); helm would silently take the last one",
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


def _reader_error(error: yaml.reader.ReaderError, text: str) -> ValuesLoadError:
    """A character YAML does not allow (ESC, NUL, ...), located by line and column."""
    line = text.count("\n", 0, error.position) + 1
    column = error.position - text.rfind("\n", 0, error.position)
    return ValuesLoadError(
        f"the character U+{error.character:04X} is not allowed in YAML (helm refuses it too: "
        "control characters are not allowed)",
        line,
        column,
        code="YAML001",
    )


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
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as error:
        raise _reader_error(error, text) from None
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
        explained = syntax.explain(error, text)
        raise ValuesLoadError(
            explained.message, explained.line, explained.column, code="YAML001"
        ) from None
    except yaml.YAMLError as error:
        raise ValuesLoadError(f"invalid YAML: {error}", code="YAML001") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):  # pragma: no cover - guarded by the node check above
        raise ValuesLoadError("the top level must be a mapping", code="YAML006")
    return Document(data=data, lines=lines)


def _unreadable(error: files.UnreadableFile) -> ValuesLoadError:
    return ValuesLoadError(error.reason, code="YAML005" if error.too_large else "FILE")


def load(path: Path) -> Document:
    """Read (a regular file of at most MAX_BYTES, never more) and parse a values file."""
    try:
        return loads(files.read_text(path, MAX_BYTES))
    except files.UnreadableFile as error:
        raise _unreadable(error) from None


def load_stream(stream: BinaryIO, name: str) -> Document:
    """Read (at most MAX_BYTES, never more) and parse a values document from a stream."""
    try:
        return loads(files.text(files.read_stream(stream, name, MAX_BYTES), name))
    except files.UnreadableFile as error:
        raise _unreadable(error) from None
