"""pdctl uninstall against the Kubernetes API server test double (tests/doubles/kube_api.py):
the release goes, its PersistentVolumeClaims (the model cache) stay unless --delete-data. helm
keeps a claim only when it carries helm.sh/resource-policy: keep, as the chart's do by default;
a claim helm would delete (a pool that set the policy to "") is refused without --delete-data."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CHART, TUTORIAL_VALUES, write_values

runner = CliRunner()
CLAIMS = ["pd-llama-decode-storage-claim", "pd-llama-prefill-storage-claim"]


def install(helm: Helm, values: Path = TUTORIAL_VALUES) -> None:
    run = helm.run(["upgrade", "--install", "pd", str(CHART), "-f", str(values)])
    assert run.returncode == 0, run.stderr


def uninstall(helm: Helm, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["uninstall", "--helm", str(helm.path), *args])
    return result.exit_code, result.stdout, result.stderr


def claims(api: KubeAPIDouble) -> list[str]:
    return sorted(c["metadata"]["name"] for c in api.items("persistentvolumeclaims"))


def unkept_values(tmp_path: Path) -> Path:
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    for pool in values["servingEngineSpec"]["modelSpec"]:
        pool["pvcAnnotations"] = {"helm.sh/resource-policy": ""}
    return write_values(tmp_path, values, "unkept.yaml")


def test_claims_helm_would_delete_are_refused(
    kube: KubeAPIDouble, helm4: Helm, tmp_path: Path
) -> None:
    install(helm4, unkept_values(tmp_path))
    code, _, stderr = uninstall(helm4)
    assert code == 1
    assert f"would delete the release's PersistentVolumeClaims {', '.join(CLAIMS)}" in stderr
    assert "pass --delete-data" in stderr
    assert claims(kube) == CLAIMS and kube.release_secrets("pd")  # nothing removed


def test_delete_data_removes_release_and_claims(kube: KubeAPIDouble, helm: Helm) -> None:
    install(helm)
    code, stdout, _ = uninstall(helm, "--delete-data", "-o", "json")
    assert code == 0
    assert json.loads(stdout) == {
        "release": "pd",
        "namespace": "default",
        "revision": 1,
        "kept_claims": [],
        "deleted_claims": CLAIMS,
    }
    assert claims(kube) == [] and kube.items("deployments") == []
    assert kube.release_secrets("pd") == [] and kube.items("pods") == []


def test_claims_marked_keep_stay(kube: KubeAPIDouble, helm: Helm) -> None:
    install(helm)  # the chart marks its claims keep
    code, stdout, _ = uninstall(helm)
    assert code == 0
    assert "release pd (namespace default, revision 1) uninstalled" in stdout
    assert f"kept PersistentVolumeClaims: {', '.join(CLAIMS)}" in stdout
    assert claims(kube) == CLAIMS and kube.items("deployments") == []
    # Installed again, they are adopted; --delete-data then deletes what helm keeps.
    install(helm)
    code, stdout, _ = uninstall(helm, "--delete-data")
    assert code == 0 and f"deleted PersistentVolumeClaims: {', '.join(CLAIMS)}" in stdout
    assert claims(kube) == []


def test_release_without_claims(kube: KubeAPIDouble, helm4: Helm, tmp_path: Path) -> None:
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    for pool in values["servingEngineSpec"]["modelSpec"]:
        del pool["pvcStorage"]
    install(helm4, write_values(tmp_path, values))
    code, stdout, _ = uninstall(helm4, "-o", "json")
    assert code == 0
    assert json.loads(stdout)["kept_claims"] == json.loads(stdout)["deleted_claims"] == []
    assert kube.items("deployments") == []


def test_unknown_release(kube: KubeAPIDouble, helm4: Helm) -> None:
    code, _, stderr = uninstall(helm4, "--release", "nope")
    assert code == 1
    assert "release 'nope' not found" in stderr
