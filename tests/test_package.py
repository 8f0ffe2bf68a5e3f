"""`make package`: the chart archive for an OCI registry; pdctl sdist and wheel with the chart.

Runs the Makefile target itself (into a temporary folder, not the checkout's dist/), so the test
and the release commands cannot drift apart. Installing and running the wheel is test_wheel.py's.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import pdctl

ROOT = Path(__file__).resolve().parent.parent
VERSION = pdctl.__version__
HELM4 = ROOT / ".tools" / "helm-4.1.4" / "helm"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # `-o setup`: the suite runs inside the venv that `setup` would (re)create; never rebuild it
    # under a running test session.
    result = subprocess.run(
        ["make", "--no-print-directory", "-o", "setup", "package", f"DIST={out}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_package_writes_exactly_the_three_artifacts(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [
        f"pd-stack-{VERSION}.tgz",
        f"pdctl-{VERSION}-py3-none-any.whl",
        f"pdctl-{VERSION}.tar.gz",
    ]


def test_chart_archive_carries_the_version_schema_and_files(dist: Path) -> None:
    with tarfile.open(dist / f"pd-stack-{VERSION}.tgz") as archive:
        names = set(archive.getnames())
        chart_file = archive.extractfile("pd-stack/Chart.yaml")
        assert chart_file is not None
        chart = yaml.safe_load(chart_file.read())
    assert str(chart["version"]) == VERSION
    assert str(chart["appVersion"]) == VERSION
    # Helm enforces the schema only when it travels with the chart.
    assert "pd-stack/values.schema.json" in names
    assert "pd-stack/files/connectors.yaml" in names
    assert any(n.startswith("pd-stack/templates/") for n in names)


def test_chart_archive_renders_with_helm(dist: Path) -> None:
    # What a user gets from `helm install pd oci://...`: the archive alone renders the tutorial.
    result = subprocess.run(
        [
            str(HELM4),
            "template",
            "pd",
            str(dist / f"pd-stack-{VERSION}.tgz"),
            "-f",
            str(ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"helm.sh/chart: pd-stack-{VERSION}" in result.stdout


def test_wheel_carries_the_chart_and_the_version(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"pdctl-{VERSION}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        chart = yaml.safe_load(wheel.read("pdctl/_chart/Chart.yaml"))
        metadata = Parser().parsestr(wheel.read(f"pdctl-{VERSION}.dist-info/METADATA").decode())
    assert "pdctl/_chart/values.schema.json" in names
    assert "pdctl/_chart/files/connectors.yaml" in names
    assert str(chart["version"]) == VERSION
    assert metadata["Version"] == VERSION
    # The Kubernetes client is a dependency (deploy, status, verify and uninstall are core
    # commands: `pip install .` then `pdctl deploy` works); the hub client is an extra.
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    always = {r.name.lower() for r in requires if r.marker is None}
    assert {"kubernetes", "jinja2"} <= always  # pdctl init renders its values file with jinja2
    assert not {"huggingface_hub", "huggingface-hub"} & always


def test_sdist_carries_the_chart_and_changelog(dist: Path) -> None:
    with tarfile.open(dist / f"pdctl-{VERSION}.tar.gz") as sdist:
        names = set(sdist.getnames())
    prefix = f"pdctl-{VERSION}"
    for name in ("helm/Chart.yaml", "helm/values.schema.json", "CHANGELOG.md", "pyproject.toml"):
        assert f"{prefix}/{name}" in names
