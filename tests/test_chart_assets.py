"""Every tutorial asset and helm/ci scenario renders with both Helm versions and every object
passes strict Kubernetes schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    CHART,
    CI,
    KUBE_VERSIONS,
    ROOT,
    TUTORIAL_VALUES,
    VALUES_FILES,
    Render,
    assert_kube_valid,
    helm_template_result,
    render_file,
    write_values,
)


def test_values_files_are_the_tutorials_and_the_ci_scenarios() -> None:
    # Each tutorial NN-name.md has its values file assets/values-NN-name.yaml and points at it;
    # no asset is without its tutorial (README.md indexes them). helm/ci scenarios come on top.
    tutorials = {path.stem: path for path in (ROOT / "tutorials").glob("[0-9]*.md")}
    assert TUTORIAL_VALUES in VALUES_FILES
    assert {path.stem.removeprefix("values-") for path in ASSETS.glob("*.yaml")} == set(tutorials)
    for name, tutorial in tutorials.items():
        assert f"assets/values-{name}.yaml" in tutorial.read_text(), tutorial.name
    assert {path.parent for path in VALUES_FILES} == {ASSETS, CI}


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
def test_lint_strict(helm: Helm, values_file: Path) -> None:
    result = helm.run(["lint", "--strict", str(CHART), "--values", str(values_file)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_renders_valid_kubernetes_objects(
    helm: Helm, rendered: Render, values_file: Path, kube_version: str
) -> None:
    objects = rendered(helm, values_file)
    assert objects, "nothing rendered"
    assert_kube_valid(objects, kube_version)


def test_default_values_need_a_pool(helm: Helm, tmp_path: Path) -> None:
    """The chart's defaults enable engines with no pool: it says what to add."""
    result = helm_template_result(helm, write_values(tmp_path, "{}\n"))
    assert result.returncode != 0
    assert "[PD016] servingEngineSpec.modelSpec: has no enabled engine pool" in result.stderr


def test_engines_off_render_router_only(helm: Helm, tmp_path: Path) -> None:
    values = write_values(tmp_path, {"servingEngineSpec": {"enableEngine": False}})
    kinds = sorted({obj["kind"] for obj in render_file(helm, values)})
    assert kinds == ["Deployment", "Pod", "Role", "RoleBinding", "Service", "ServiceAccount"]


def test_helm_lint_passes_values_the_chart_refuses(helm: Helm) -> None:
    """Why the README gates CI on `pdctl validate --render`: `helm lint --strict` runs the chart's
    `fail` checks in lint mode, reports them as INFO and exits 0."""
    bad = ROOT / "tests" / "corpus" / "bad" / "pd005-kv-cache-dtype.yaml"
    lint = helm.run(["lint", "--strict", str(CHART), "-f", str(bad)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "[PD005]" in lint.stdout + lint.stderr
    assert helm.run(["template", "pd", str(CHART), "-f", str(bad)]).returncode != 0
