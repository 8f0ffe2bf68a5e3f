"""One corpus of defective values files (tests/corpus/bad, written by make_bad_corpus.py) through
both the chart and `pdctl validate`: validate refuses every file and names its defect; the chart
refuses every file too (with the message its header states), except the files listed below."""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.rules import load_rules
from pdctl.validation.refusals import ChartAnswer, ask_chart
from tests.helpers import ROOT, VALUES_FILES, helm_template_result

runner = CliRunner()
BAD = sorted((ROOT / "tests" / "corpus" / "bad").glob("*.yaml"))
# Findings that come from loading (pdctl.values.loader) and from the values schema, not a PD rule.
LOADER_AND_SCHEMA_IDS = {f"YAML00{i}" for i in range(1, 7)} | {"SCHEMA"}

# The only files the chart renders although validate refuses them, each with its reason.
CHART_ACCEPTS = {
    "pd007-name-too-long": (
        "helm template has no length limit on names; Kubernetes refuses the object at install "
        "with its own message, so the failure is not silent (PD007 is validate-only)"
    ),
    "yaml-two-documents": (
        "helm reads a values file with several YAML documents (Helm 4 merges them, Helm 3 "
        "takes the first); validate refuses it as ambiguous"
    ),
}


@dataclass(frozen=True)
class Case:
    path: Path
    rule: str
    target: str  # key path, "line N", or ""
    args: list[str]
    chart: str | None  # what helm's refusal says; None when the chart accepts the file

    @property
    def release(self) -> str:
        return self.args[self.args.index("--release") + 1] if "--release" in self.args else "pd"


def read_case(path: Path) -> Case:
    headers = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# ") or ": " not in line:
            break
        key, _, value = line[2:].partition(": ")
        headers[key] = value
    rule, _, target = headers["expect"].partition(" ")
    return Case(path, rule, target, shlex.split(headers.get("args", "")), headers.get("chart"))


def test_corpus_files_name_distinct_known_defects() -> None:
    known = set(load_rules()) | LOADER_AND_SCHEMA_IDS
    assert len(BAD) >= 70
    for path in BAD:
        case = read_case(path)
        assert case.rule in known, f"{path.name} expects {case.rule!r}, which no check reports"
        # The file is named after the check that refuses it: pd004-..., schema-..., yaml-...
        prefix = case.rule.lower() if case.rule.startswith("PD") else case.rule.lower()[:4]
        assert path.stem.startswith(prefix), f"{path.name} expects {case.rule}"
    # One defect per file: no two files are the same document.
    assert len({path.read_text() for path in BAD}) == len(BAD)
    # Every PD error rule has a defective file, so the agreement below covers it.
    errors = {rule.id for rule in load_rules().values() if rule.severity.value == "error"}
    assert errors <= {read_case(path).rule for path in BAD}


@pytest.fixture(scope="module")
def chart_answers() -> Iterator[None]:
    """The chart's answer to the same values, asked once in this module: each corpus file is
    validated twice (JSON, then text), and helm answers the same values the same way."""
    asked: dict[str, ChartAnswer] = {}

    @contextmanager
    def asking(
        helm: Helm, data: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Iterator[Callable[[], ChartAnswer]]:
        key = json.dumps([str(helm.path), data, *map(str, args), kwargs], sort_keys=True)
        if key not in asked:
            asked[key] = ask_chart(helm, data, *args, **kwargs)
        yield lambda: copy.deepcopy(asked[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("pdctl.validation.schema_and_rules.asking_chart", asking)
        yield


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
@pytest.mark.usefixtures("chart_answers")
def test_validate_refuses_with_its_defect(path: Path) -> None:
    case = read_case(path)
    result = runner.invoke(app, ["validate", str(path), "-o", "json", *case.args])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    findings = json.loads(result.stdout)["files"][0]["findings"]
    if case.target.startswith("line "):
        wanted = int(case.target.removeprefix("line "))
        assert any(f["rule"] == case.rule and f["line"] == wanted for f in findings), findings
    elif case.target:
        match = [f for f in findings if f["rule"] == case.rule and f["path"] == case.target]
        assert match, findings
        assert match[0]["line"] is not None and match[0]["message"]
    else:
        assert any(f["rule"] == case.rule and f["message"] for f in findings), findings
    # Every refusal of the chart resolves to a line of the file (or the --set that caused it).
    chart_ids = {i for i, rule in load_rules().items() if rule.check is None}
    for finding in findings:
        if finding["rule"] in chart_ids:
            assert finding["line"] is not None or finding["set"], finding
    text = runner.invoke(app, ["validate", str(path), *case.args])
    assert text.exit_code == 1 and "Traceback" not in text.output
    assert (case.target if not case.target.startswith("line ") else case.rule) in text.stdout


def test_a_refusal_of_a_pool_whose_name_is_taken_names_that_pool() -> None:
    """Two pools of one name (PD006): a check of the second one names modelSpec[1], its own
    entry, not the first pool of that name."""
    path = ROOT / "tests" / "corpus" / "bad" / "pd006-duplicate-pool.yaml"
    result = runner.invoke(app, ["validate", str(path), "-o", "json"])
    findings = json.loads(result.stdout)["files"][0]["findings"]
    (label,) = [f for f in findings if f["rule"] == "PD015"]
    assert label["path"] == "servingEngineSpec.modelSpec[1].labels.model"
    assert label["line"] == 66 and '"llama-decode"' in label["message"]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_chart_refuses_what_validate_refuses(helm: Helm, path: Path) -> None:
    case = read_case(path)
    result = helm_template_result(helm, path, release=case.release)
    if case.chart is None:
        assert path.stem in CHART_ACCEPTS, f"{path.name}: the chart must refuse it, or list why not"
        assert result.returncode == 0, result.stderr
    else:
        assert path.stem not in CHART_ACCEPTS
        assert result.returncode != 0, f"{path.name}: rendered although the chart should refuse it"
        assert case.chart in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_listed_exceptions_are_corpus_files() -> None:
    assert set(CHART_ACCEPTS) == {p.stem for p in BAD if read_case(p).chart is None}


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_good_file_passes(path: Path) -> None:
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
