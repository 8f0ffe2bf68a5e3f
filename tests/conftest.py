"""Shared fixtures: the pinned helm binaries, rendering through them, strict Kubernetes schemas."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl import manifests
from pdctl.helm import Helm, TemplateRequest, find_helm, template

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm"
TUTORIAL_VALUES = ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml"
HELM_VERSIONS = ["3.17.2", "4.1.4"]
KUBE_VERSIONS = ["1.29.0", "1.35.0"]


def pinned_helm(version: str) -> Helm:
    path = ROOT / ".tools" / f"helm-{version}" / "helm"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make helm` (make test does it for you)")
    return find_helm(str(path))


@pytest.fixture(params=HELM_VERSIONS, ids=lambda v: f"helm{v}")
def helm(request: pytest.FixtureRequest) -> Helm:
    return pinned_helm(request.param)


@pytest.fixture(scope="session")
def helm4() -> Helm:
    return pinned_helm("4.1.4")


def write_values(tmp_path: Path, values: dict[str, Any] | str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(values if isinstance(values, str) else yaml.safe_dump(values))
    return path


def render_file(helm: Helm, values_file: Path, release: str = "pd") -> list[manifests.Manifest]:
    text = template(
        helm, TemplateRequest(chart=CHART, release=release, values_files=(values_file,))
    )
    return manifests.parse(text)


def helm_template_result(helm: Helm, values_file: Path) -> subprocess.CompletedProcess[str]:
    return helm.run(TemplateRequest(chart=CHART, values_files=(values_file,)).args())


def assert_kube_valid(objects: list[manifests.Manifest], kube_version: str) -> None:
    import kubernetes_validate

    for obj in objects:
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            pytest.fail(f"{name} fails Kubernetes {kube_version}: {error.message} at {error.path}")


@pytest.fixture
def render(helm: Helm) -> Callable[[Path], list[manifests.Manifest]]:
    return lambda path: render_file(helm, path)


def container(objects: list[manifests.Manifest], deployment: str) -> dict[str, Any]:
    return manifests.find(objects, "Deployment", deployment)["spec"]["template"]["spec"][
        "containers"
    ][0]


def env_of(container_spec: dict[str, Any]) -> dict[str, Any]:
    """Env as name -> value (or the valueFrom mapping); fails on duplicate names."""
    names = [entry["name"] for entry in container_spec["env"]]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {
        entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container_spec["env"]
    }
