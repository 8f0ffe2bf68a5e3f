"""One version for pdctl, the chart's `version` and its `appVersion` (released in lockstep)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
import yaml

import pdctl

ROOT = Path(__file__).resolve().parent.parent


def chart() -> dict[str, object]:
    return yaml.safe_load((ROOT / "helm" / "Chart.yaml").read_text())


def test_version_is_semver() -> None:
    # Helm refuses chart versions that are not SemVer 2; no leading "v", so the chart archive is
    # pd-stack-<version>.tgz and the wheel pdctl-<version>.
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", pdctl.__version__), pdctl.__version__


def test_chart_version_is_pdctl_version() -> None:
    # A quoted string in Chart.yaml stays a string; an unquoted 0.1.0 is one too for YAML.
    assert str(chart()["version"]) == pdctl.__version__


def test_chart_app_version_is_pdctl_version() -> None:
    assert str(chart()["appVersion"]) == pdctl.__version__


def test_pyproject_reads_the_version_from_pdctl() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"], "the version is said once, in pdctl/__init__.py"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "pdctl/__init__.py"


def test_installed_metadata_carries_the_version() -> None:
    # The editable install's metadata was written by the same hatchling hook that stamps the wheel.
    # A mismatch means pdctl/__init__.py changed since the install: `make setup` reinstalls.
    assert importlib.metadata.version("pdctl") == pdctl.__version__
