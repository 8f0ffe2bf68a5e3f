"""The kept before/after records of `pdctl validate` over the corpus and 3000 mutations
(benchmarks/validate_record.py): before each PD error rule lived in the chart (BASE) and after;
before the warnings read the chart's summary of each pool (WARNED_BASE) and after. No file moves
between accepted and refused, and every line that differs has a reason (`--compare`: more
defects listed, one cause reported once, a null key that helm deletes, a new corpus file, a
refused file whose fact-reading warnings the chart's refusal leaves out); `explain` itself is
held to each of its classes."""

from __future__ import annotations

import pytest

from benchmarks import validate_record
from tests.helpers import ROOT

RECORDS = ROOT / "benchmarks" / "records"
BASE = RECORDS / "validate-record-44ca798.txt"
AFTER = RECORDS / "validate-record-0cf36d9.txt"
WARNED_BASE = RECORDS / "validate-record-ba74b30.txt"
WARNED_AFTER = RECORDS / "validate-record-a81b6f1.txt"


def test_every_difference_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_record.compare(BASE, AFTER) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "unexplained" not in summary and "one cause" in summary, summary


def test_the_summary_changed_no_error_and_no_rendered_file_s_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The warnings read the chart's summary from its render: a file it renders is warned about
    as before; one it refuses keeps every error and loses only warnings that read its facts."""
    assert validate_record.compare(WARNED_BASE, WARNED_AFTER) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "# unrendered 150", out[-1]
    before = validate_record._answers(WARNED_BASE.read_text().splitlines())
    after = validate_record._answers(WARNED_AFTER.read_text().splitlines())
    assert set(before) == set(after)
    assert all(before[name][:2] == answer[:2] for name, answer in after.items())
    assert all(before[name] == answer for name, answer in after.items() if not answer[0])


def test_both_records_judge_the_same_documents() -> None:
    before = validate_record._answers(BASE.read_text().splitlines())
    after = validate_record._answers(AFTER.read_text().splitlines())
    assert set(before) <= set(after)
    assert all(name.startswith("corpus/pd026-") for name in set(after) - set(before))


PD009_SCHEMA = (True, ["PD009:4", "SCHEMA:7"], None)
PD017_PD016 = (True, ["PD017:5", "PD016:7"], None)
WARNED = ["PD103:3", "PD106:9"]
ONE = (True, ["PD001:3"], ["PD103:3"])
NO_PD007: validate_record.Answer = (True, ["PD012:5"], [])
BOTH = (True, ["PD001:3"], WARNED)


@pytest.mark.parametrize(
    ("name", "base", "new", "why"),
    [
        ("corpus/x.yaml", (True, ["PD001:3"], None), (True, ["PD001:3", "PD008:9"], None), "more"),
        ("corpus/x.yaml", (True, ["PD001:3"], None), (False, [], None), "unexplained"),
        ("mutation 1 a.yaml k={}", PD009_SCHEMA, (True, ["SCHEMA:7"], None), "one cause"),
        ("corpus/pd001-x.yaml", PD009_SCHEMA, (True, ["SCHEMA:7"], None), "unexplained"),
        ("mutation 2 a.yaml k=None", PD017_PD016, (True, ["PD016:7"], None), "null"),
        ("mutation 3 a.yaml k=0", PD017_PD016, (True, ["PD016:7"], None), "unexplained"),
        ("corpus/new.yaml", None, (True, ["PD026:4"], None), "added"),
        ("corpus/x.yaml", BOTH, ONE, "unrendered"),
        ("mutation 4 a.yaml k=1", (True, ["PD007:2", "PD012:5"], []), NO_PD007, "unrendered"),
        ("corpus/x.yaml", ONE, BOTH, "unexplained"),
        ("corpus/x.yaml", (False, [], WARNED), (False, [], ["PD103:3"]), "unexplained"),
    ],
)  # fmt: skip
def test_explain_names_each_class(
    name: str,
    base: validate_record.Answer | None,
    new: validate_record.Answer,
    why: str,
) -> None:
    assert validate_record.explain(name, base, new) == why
