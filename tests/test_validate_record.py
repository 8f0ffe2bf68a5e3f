"""The kept before/after record of `pdctl validate` over the corpus and 3000 mutations
(benchmarks/validate_record.py): before each PD error rule lived in the chart (BASE) and after.
No file moves between accepted and refused, and every line that differs has a reason
(`--compare`: more defects listed, one cause reported once, a null key that helm deletes, a new
corpus file); `explain` itself is held to each of its classes."""

from __future__ import annotations

import pytest

from benchmarks import validate_record
from tests.helpers import ROOT

RECORDS = ROOT / "benchmarks" / "records"
BASE = RECORDS / "validate-record-44ca798.txt"
AFTER = RECORDS / "validate-record-0cf36d9.txt"


def test_every_difference_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_record.compare(BASE, AFTER) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "unexplained" not in summary and "one cause" in summary, summary


def test_both_records_judge_the_same_documents() -> None:
    before = validate_record._answers(BASE.read_text().splitlines())
    after = validate_record._answers(AFTER.read_text().splitlines())
    assert set(before) <= set(after)
    assert all(name.startswith("corpus/pd026-") for name in set(after) - set(before))


PD009_SCHEMA = (True, ["PD009:4", "SCHEMA:7"])
PD017_PD016 = (True, ["PD017:5", "PD016:7"])


@pytest.mark.parametrize(
    ("name", "base", "new", "why"),
    [
        ("corpus/x.yaml", (True, ["PD001:3"]), (True, ["PD001:3", "PD008:9"]), "more"),
        ("corpus/x.yaml", (True, ["PD001:3"]), (False, []), "unexplained"),
        ("mutation 1 a.yaml k={}", PD009_SCHEMA, (True, ["SCHEMA:7"]), "one cause"),
        ("corpus/pd001-x.yaml", PD009_SCHEMA, (True, ["SCHEMA:7"]), "unexplained"),
        ("mutation 2 a.yaml k=None", PD017_PD016, (True, ["PD016:7"]), "null"),
        ("mutation 3 a.yaml k=0", PD017_PD016, (True, ["PD016:7"]), "unexplained"),
        ("corpus/new.yaml", None, (True, ["PD026:4"]), "added"),
    ],
)  # fmt: skip
def test_explain_names_each_class(
    name: str, base: tuple[bool, list[str]] | None, new: tuple[bool, list[str]], why: str
) -> None:
    assert validate_record.explain(name, base, new) == why
