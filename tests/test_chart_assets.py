"""Every tutorial asset and helm/ci scenario renders with both Helm versions and every object
passes strict Kubernetes schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.helm import Helm
from tests.conftest import CHART, KUBE_VERSIONS, ROOT, assert_kube_valid, render_file

VALUES_FILES = sorted((ROOT / "tutorials" / "assets").glob("*.yaml")) + sorted(
    (CHART / "ci").glob("*.yaml")
)


def test_there_are_values_files() -> None:
    assert len(VALUES_FILES) >= 3


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
def test_lint_strict(helm: Helm, values_file: Path) -> None:
    result = helm.run(["lint", "--strict", str(CHART), "--values", str(values_file)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_renders_valid_kubernetes_objects(helm: Helm, values_file: Path, kube_version: str) -> None:
    objects = render_file(helm, values_file)
    assert objects, "nothing rendered"
    assert_kube_valid(objects, kube_version)


def test_default_values_render_router_only(helm: Helm, tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    kinds = sorted({obj["kind"] for obj in render_file(helm, empty)})
    assert kinds == ["Deployment", "Pod", "Role", "RoleBinding", "Service", "ServiceAccount"]
