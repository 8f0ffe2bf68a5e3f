"""Safe loading of values files and the --set subset."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pdctl.errors import UsageError
from pdctl.helm import Helm
from pdctl.values import loader, setvalues
from pdctl.values.loader import ValuesLoadError, load, loads
from pdctl.values.paths import format_path
from pdctl.values.setvalues import apply_sets, parse_path

ROOT = Path(__file__).resolve().parent.parent


def test_lines_of_keys_and_items() -> None:
    doc = loads("a:\n  b:\n    - x: 1\n    - y: 2\n")
    assert doc.lines[("a",)] == 1
    assert doc.lines[("a", "b", 1)] == 4
    assert doc.lines[("a", "b", 1, "y")] == 4


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


def _helm_template(
    helm: Helm, tmp_path: Path, text: str = "", sets: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """helm template of a chart that prints its values (toJson)."""
    chart = tmp_path / "json-probe"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: json-probe\nversion: 0.1.0\n")
    (chart / "templates" / "v.yaml").write_text("# {{ toJson .Values }}\n")
    values = tmp_path / "probe-values.yaml"
    values.write_text(text or "{}\n")
    return helm.run(["template", "p", str(chart), "-f", str(values), *[f"--set={s}" for s in sets]])


def _helm_values(helm: Helm, tmp_path: Path, text: str = "", sets: tuple[str, ...] = ()) -> object:
    """The values helm hands a chart, from a values file and --set arguments."""
    result = _helm_template(helm, tmp_path, text, sets)
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("# {")]
    return json.loads(line[2:])


HELM_FORMS = {
    "trailing-document": "a: 1\n---\n",
    "trailing-comment-document": "a: 1\n---\n# nothing more\n",
    "trailing-null-document": "a: 1\n---\n~\n...\n",
    "tab-after-colon": "a:\t1\nb:\t{c:\t2}\nd: [1,\t2]\t# comment\ne:\t\n  f: 1\n",
    "beyond-64-bits": "a: 99999999999999999999\nb: 18446744073709551615\nc: 0x1FFFFFFFFFFFFFFFF\n"
    "d: 1e999\n",
}


@pytest.mark.parametrize("text", HELM_FORMS.values(), ids=HELM_FORMS.keys())
def test_forms_helm_accepts_are_read_as_helm_reads_them(
    helm: Helm, tmp_path: Path, text: str
) -> None:
    # helm's values pass through JSON: every number is a float64 to the chart.
    ours = json.loads(json.dumps(loads(text).data), parse_int=float)
    assert ours == json.loads(json.dumps(_helm_values(helm, tmp_path, text)), parse_int=float)


HELM_REFUSES = {
    "nan": ("a: 1\nb: .nan\n", 2, ".nan is not a number JSON can hold"),
    "inf": ("a: -.Inf\n", 1, "-.Inf is not a number JSON can hold"),
    "tab-after-dash": ("a:\n  -\tx\n", 2, "'\\t'"),
    "empty-document-closed": ("a: 1\n---\n...\n", 3, "Helm 4 refuses it"),
    "value-on-separator-line": ("a: 1\n--- ~\n", 2, "Helm 4 refuses it"),
}


@pytest.mark.parametrize(("text", "line", "says"), HELM_REFUSES.values(), ids=HELM_REFUSES.keys())
def test_forms_helm_refuses_are_refused_with_their_line(
    helm: Helm, tmp_path: Path, text: str, line: int, says: str
) -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert caught.value.line == line and says in caught.value.reason
    refused = _helm_template(helm, tmp_path, text).returncode != 0
    assert refused == (helm.major == 4 if "Helm 4" in says else True)


def test_duplicates_and_second_documents_are_refused_saying_what_helm_would_do(
    helm3: Helm, helm4: Helm, tmp_path: Path
) -> None:
    with pytest.raises(ValuesLoadError, match="helm would silently take the last one"):
        loads("a: 1\na: 2\n")
    assert _helm_values(helm3, tmp_path, "a: 1\na: 2\n") == {"a": 2}
    two = "a: 1\nb: 1\n---\na: 2\n"
    with pytest.raises(ValuesLoadError, match="Helm 3 reads only the first and Helm 4 merges"):
        loads(two)
    assert _helm_values(helm3, tmp_path, two) == {"a": 1, "b": 1}
    assert _helm_values(helm4, tmp_path, two) == {"a": 2, "b": 1}


SETS = ("t=True,f=FALSE,n=nUll,u=TrUe", "i=+5,j=-007,z=0,o=007,big=9223372036854775808", "l[3]=x")


def test_set_values_are_typed_as_helm_types_them(helm: Helm, tmp_path: Path) -> None:
    assert apply_sets({}, SETS) == _helm_values(helm, tmp_path, sets=SETS)


def test_set_indexes_and_nesting_are_bounded_as_helm_bounds_them(
    helm: Helm, tmp_path: Path
) -> None:
    assert len(apply_sets({}, [f"a[{setvalues.MAX_INDEX}]=1"])["a"]) == setvalues.MAX_INDEX + 1
    for too_far in (
        f"servingEngineSpec.modelSpec[{setvalues.MAX_INDEX + 1}].name=x",
        "servingEngineSpec.modelSpec[20000000].name=x",
        "a" + ".a" * (setvalues.MAX_NESTED_NAME_LEVEL + 1) + "=1",
    ):
        with pytest.raises(UsageError, match="greater than the maximum|more than the maximum"):
            apply_sets({}, [too_far])
        assert _helm_template(helm, tmp_path, sets=(too_far,)).returncode != 0
    deep = ".".join(["a"] * (setvalues.MAX_NESTED_NAME_LEVEL + 1)) + "=1"  # 30 dots: allowed
    assert apply_sets({}, [deep]) == _helm_values(helm, tmp_path, sets=(deep,))


def test_set_list_growth_is_bounded_in_all() -> None:
    path = "".join(f"[{setvalues.MAX_INDEX}]" for _ in range(20))
    with pytest.raises(UsageError, match="list items in all"):
        apply_sets({}, [f"a{path}=1"])


def test_the_charts_own_values_file_loads() -> None:
    """What `helm show values` prints is a values file pdctl accepts (each key stated once)."""
    document = load(ROOT / "helm" / "values.yaml")
    assert document.data["routerSpec"]["type"] == "production-stack"
