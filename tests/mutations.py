"""Single mutations of the shipped values files, and what validate and the chart must do with them.

One key of a tutorial asset or helm/ci scenario is deleted or given another value (another type,
zero, a negative or huge number, an empty string, a list where a map was, a map where a list
was). `judge` then holds validate and the chart to their promises:
- validate answers without a traceback, and every error has a rule and a message;
- every error of the schema or of pdctl's own rules names the mutated key (or a key inside or
  above it), or comes from a rule that read it: nothing unrelated to the change is reported; a
  refusal of the chart (which cannot say what it read) resolves to a line of the file (or is
  about the deleted key);
- no rule reports after reading a key the schema refused, and no refusal of the chart comes
  with a schema error (one error per cause);
- whatever validate accepts, the chart renders into objects that pass strict Kubernetes
  schemas, and whatever the chart refuses, validate refuses.

tests/test_agreement_property.py draws a few hundred mutations with hypothesis;
benchmarks/mutations.py runs ten times more with a seeded random generator.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml

from pdctl import manifests, pipeline
from pdctl.findings import Finding
from pdctl.helm import Helm
from pdctl.rules import load_rules
from pdctl.validation.report import FileReport
from pdctl.values.paths import KeyPath
from tests.helpers import VALUES_FILES, assert_kube_valid, helm_template_result

SHIPPED = {path.name: yaml.safe_load(path.read_text()) for path in VALUES_FILES}
DELETE = object()
REPLACEMENTS: list[Any] = [
    DELETE, "x", "", "0", 0, -1, 2**40, 0.5, True, None, [], ["x"], [{"x": 1}], {}, {"x": 1},
]  # fmt: skip


def key_paths(node: Any, path: KeyPath = ()) -> list[KeyPath]:
    """Every key path inside a values document (mapping keys and list indices)."""
    if isinstance(node, dict):
        items: Any = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return []
    found: list[KeyPath] = []
    for key, value in items:
        found += [(*path, key), *key_paths(value, (*path, key))]
    return found


def mutated(
    values: dict[str, Any], path: KeyPath, replacement: Any
) -> tuple[dict[str, Any], KeyPath]:
    """A copy of values with the key at path deleted (DELETE) or replaced, and the key that
    changed: path, or the list itself when one of its items was deleted (the rest moved up)."""
    result = copy.deepcopy(values)
    parent: Any = result
    for key in path[:-1]:
        parent = parent[key]
    if replacement is not DELETE:
        parent[path[-1]] = copy.deepcopy(replacement)
        return result, path
    del parent[path[-1]]
    return result, path[:-1] if isinstance(parent, list) else path


def related(a: KeyPath, b: KeyPath) -> bool:
    """Whether one key path is the other or lies inside it."""
    shorter = min(len(a), len(b))
    return tuple(a[:shorter]) == tuple(b[:shorter])


def read_inside(finding: Finding, paths: set[KeyPath]) -> bool:
    """Whether the rule behind a finding read one of these keys or anything inside one."""
    return any(tuple(read[: len(path)]) == path for read in finding.inputs for path in paths)


def agreement(values: dict[str, Any], helm: Helm) -> tuple[FileReport, str]:
    """validate's report on values and the outcome ("accepted", "refused by the schema" or "by
    the rules"), asserting that every error has a rule and a message and that what validate
    accepts the chart renders into objects that pass strict Kubernetes schemas (so whatever the
    chart refuses, validate refuses)."""
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "values.yaml"
        file.write_text(yaml.safe_dump(values))
        report = pipeline.validate([str(file)], pipeline.ValidateOptions())
        # What validate refuses needs no render: the promise is about what it accepts.
        chart = helm_template_result(helm, file) if report.passed() else None
    for finding in report.errors:
        assert finding.rule and finding.message
    if chart is not None:
        assert chart.returncode == 0, f"validate accepts what the chart refuses: {chart.stderr}"
        assert_kube_valid(manifests.parse(chart.stdout), "1.35.0")
        return report, "accepted"
    schema = any(f.rule == "SCHEMA" for f in report.errors)
    return report, "refused by the schema" if schema else "refused by the rules"


def judge(values: dict[str, Any], path: KeyPath, helm: Helm) -> str:
    """agreement() on values mutated at path, and no error beyond the mutation's: each names the
    mutated key or comes from a rule that read it, and no rule read a key the schema refused."""
    report, outcome = agreement(values, helm)
    schema = {f.path for f in report.errors if f.rule == "SCHEMA"}
    rules = load_rules()
    for finding in report.errors:
        if finding.rule in rules and rules[finding.rule].check is None:  # the chart's refusal
            # At a line of the file, unless it is about the key the mutation deleted.
            assert not schema and (finding.line or related(finding.path, path)), finding.text()
            continue
        assert related(finding.path, path) or read_inside(finding, {path}), (
            f"mutating {path} gave an unrelated error: {finding.text()}"
        )
        assert finding.rule == "SCHEMA" or not read_inside(finding, schema), (
            f"{finding.rule} reasoned from a key the schema refused: {finding.text()}"
        )
    return outcome
