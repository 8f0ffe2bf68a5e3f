"""The corpus of defective values files (each refused, naming its defect) and every good file."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from tests.conftest import ROOT

runner = CliRunner()
BAD = sorted((ROOT / "tests" / "corpus" / "bad").glob("*.yaml"))
GOOD = sorted((ROOT / "tutorials" / "assets").glob("*.yaml")) + sorted(
    (ROOT / "helm" / "ci").glob("*.yaml")
)


def _expectation(path: Path) -> tuple[str, str, list[str]]:
    lines = path.read_text().splitlines()
    rule, _, target = lines[0].removeprefix("# expect: ").partition(" ")
    args = shlex.split(lines[1].removeprefix("# args: ")) if len(lines) > 1 else []
    if not (len(lines) > 1 and lines[1].startswith("# args: ")):
        args = []
    return rule, target, args


def test_corpus_is_large_and_distinct() -> None:
    assert len(BAD) >= 30
    expectations = [_expectation(path) for path in BAD]
    assert len({path.read_text() for path in BAD}) == len(BAD)
    kinds = {rule[:2] for rule, _, _ in expectations}
    assert {"YA", "SC", "PD"} <= kinds


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_file_is_refused_with_its_defect(path: Path) -> None:
    rule, target, args = _expectation(path)
    result = runner.invoke(app, ["validate", str(path), "-o", "json", *args])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    findings = json.loads(result.stdout)["files"][0]["findings"]
    if target.startswith("line "):
        wanted = int(target.removeprefix("line "))
        assert any(f["rule"] == rule and f["line"] == wanted for f in findings), findings
    elif target:
        assert any(f["rule"] == rule and f["path"] == target for f in findings), findings
        match = next(f for f in findings if f["rule"] == rule and f["path"] == target)
        assert match["line"] is not None and match["message"]
    else:
        assert any(f["rule"] == rule and f["message"] for f in findings), findings
    text = runner.invoke(app, ["validate", str(path), *args])
    assert text.exit_code == 1 and "Traceback" not in text.output
    assert (target if not target.startswith("line ") else rule) in text.stdout


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_file_passes(path: Path) -> None:
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
