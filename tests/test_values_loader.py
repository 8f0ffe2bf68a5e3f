"""Safe loading of values files and the --set subset."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.errors import UsageError
from pdctl.helm import Helm
from pdctl.values import loader
from pdctl.values.loader import ValuesLoadError, load, loads
from pdctl.values.paths import format_path
from pdctl.values.setvalues import apply_sets, parse_path


def test_lines_of_keys_and_items() -> None:
    doc = loads("a:\n  b:\n    - x: 1\n    - y: 2\n")
    assert doc.lines[("a",)] == 1
    assert doc.lines[("a", "b", 1)] == 4
    assert doc.lines[("a", "b", 1, "y")] == 4
    assert doc.line_of(("a", "b", 1, "y", "missing")) == 4


def test_duplicate_key_names_both_lines() -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads("a:\n  b: 1\n  b: 2\n")
    assert caught.value.code == "YAML002" and caught.value.line == 3
    assert "first defined on line 2" in caught.value.message


def test_syntax_error_has_line_and_column() -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads("a: [1, 2\nb: 3\n")
    assert caught.value.code == "YAML001" and caught.value.line and caught.value.column


def test_too_many_aliases_refused() -> None:
    text = "a: &a 1\n" + "".join(f"k{i}: *a\n" for i in range(loader.MAX_ALIASES + 1))
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert caught.value.code == "YAML003"


def test_a_few_aliases_are_fine() -> None:
    assert loads("a: &a {x: 1}\nb: *a\n").data == {"a": {"x": 1}, "b": {"x": 1}}


def test_merge_keys_are_followed() -> None:
    doc = loads("base: &b {x: 1}\nc:\n  <<: *b\n  z: 2\n")
    assert doc.data["c"] == {"x": 1, "z": 2}


def test_oversized_file_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("a: " + "x" * (loader.MAX_BYTES + 10) + "\n")
    with pytest.raises(ValuesLoadError) as caught:
        load(path)
    assert caught.value.code == "YAML005"
    with pytest.raises(ValuesLoadError):
        loads(path.read_text())


@pytest.mark.parametrize(
    ("text", "code"),
    [("", "YAML006"), ("# only a comment\n", "YAML006"), ("- 1\n", "YAML006"), ("3\n", "YAML006")],
)
def test_empty_and_non_mapping(text: str, code: str) -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert caught.value.code == code


def test_tab_indentation_refused() -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads("a:\n\tb: 1\n")
    assert caught.value.code == "YAML004" and caught.value.line == 2


def test_missing_file_and_binary(tmp_path: Path) -> None:
    with pytest.raises(ValuesLoadError):
        load(tmp_path / "nope.yaml")
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValuesLoadError):
        load(binary)


def test_format_path() -> None:
    assert format_path(("a", "b", 0, "c")) == "a.b[0].c"
    assert format_path(()) == "(top level)"


def test_set_subset() -> None:
    data = {"a": {"x": 1, "gone": 2}}
    apply_sets(data, ["a.b[1].c=3,d=true", "e={1,x}", "a.gone=null", r"f\.g=1.5", "h=-4"])
    assert data == {
        "a": {"x": 1, "gone": None, "b": [None, {"c": 3}]},
        "d": True,
        "e": [1, "x"],
        "f.g": "1.5",
        "h": -4,
    }


def test_set_paths_and_errors() -> None:
    assert parse_path("a.b[0][1].c") == ["a", "b", 0, 1, "c"]
    with pytest.raises(UsageError):
        apply_sets({}, ["novalue"])
    with pytest.raises(UsageError):
        apply_sets({}, ["[0]=1"])
    with pytest.raises(UsageError):
        parse_path("a..b")


SCALARS = """\
key00: y
key01: N
key02: yes
key03: off
key04: 1:30
key05: 2025-05-17
key06: 0755
key07: 1_000
key08: 0x1F
key09: 1.5e3
key10: 5e9
key11: ~
key12: 0b101
key13: TRUE
key14: 1:30.5
key15: 12
key16: -0.5
key17: "y"
key18: null
key19:
"""


def test_scalars_are_read_as_helm_reads_them(helm: Helm, tmp_path: Path) -> None:
    """The loader resolves plain scalars like helm's YAML library, so validate and the chart see
    the same values (PyYAML alone would read y as a string and 1e9 as a string, 1:30 as 90)."""
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "kinds.yaml").write_text(
        "{{- range $k, $v := .Values }}\n# {{ $k }} {{ kindOf $v }} {{ $v }}\n{{- end }}\n"
    )
    values = tmp_path / "values.yaml"
    values.write_text(SCALARS)
    result = helm.run(["template", "probe", str(chart), "-f", str(values)])
    assert result.returncode == 0, result.stderr
    seen = {
        key: (kind, rest)
        for line in result.stdout.splitlines()
        if line.startswith("# ") and not line.startswith("# Source")
        for key, kind, *rest in [line[2:].split(" ", 2)]
    }
    kinds = {bool: "bool", int: "float64", float: "float64", str: "string", type(None): "invalid"}
    for key, value in loads(SCALARS).data.items():
        kind, rest = seen[key]
        assert kinds[type(value)] == kind, (key, value, kind, rest)
        if kind == "string":
            assert rest == [value], key
        elif kind == "float64":
            assert float(rest[0]) == value, key
