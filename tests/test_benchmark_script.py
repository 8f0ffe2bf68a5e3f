"""The validation benchmark runs (quick mode, no timing asserts: the timings are in
docs/validating.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT


def test_validate_speed_quick() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "validate_speed.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    for name in ("pdctl --help", "validate 1 file", "validate 10 files"):
        assert figures[name] > 0


def test_the_validation_docs_have_the_figures() -> None:
    section = (ROOT / "docs" / "validating.md").read_text()
    assert "benchmarks/validate_speed.py" in section and "100 files" in section
