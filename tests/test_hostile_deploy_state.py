"""deploy's guards on the release it upgrades (pdctl/release/guards.py), with the real helm
binaries against the Kubernetes API server test double (tests/doubles/kube_api.py, not a cluster):
a release of another chart is refused unless --adopt, an upgrade that deletes claims unless
--allow-pvc-deletion, a release left pending-* by a killed helm with the command that recovers
it; and PD114, the warning on image tags that move or say no vLLM version."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CHART, CI, TUTORIAL_VALUES, write_values

runner = CliRunner()
PREFILL_CLAIM = "pd-llama-prefill-storage-claim"  # the tutorial's pools' claims, as rendered
DECODE_CLAIM = "pd-llama-decode-storage-claim"
# A stand-in for production-stack's chart (its name and version) with two claims and no keep policy:
# one named as pd-stack names the prefill pool's, and one that pd-stack does not render.
FOREIGN_CLAIM = "pd-cache-storage-claim"
FOREIGN_TEMPLATE = """\
{{- range list "pd-llama-prefill-storage-claim" "pd-cache-storage-claim" }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ . }}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
{{- end }}
"""


def deploy(helm: Helm, values: Path, *args: str) -> Result:
    return runner.invoke(
        app, ["deploy", "-f", str(values), "--timeout", "60s", "--helm", str(helm.path), *args]
    )


def history(helm: Helm, release: str = "pd") -> list[dict[str, Any]]:
    run = helm.run(["history", release, "-o", "json"])
    return json.loads(run.stdout) if run.returncode == 0 else []


def claims(kube: KubeAPIDouble) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in kube.items("persistentvolumeclaims")}


def one_line(result: Result) -> str:
    return " ".join(result.stderr.split())


def tutorial(tmp_path: Path, name: str, change: Any) -> Path:
    """The tutorial's values with `change(decode_pool)` applied, written to tmp_path/name."""
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    change(values["servingEngineSpec"]["modelSpec"][1])
    return write_values(tmp_path, values, name)


# ---- a release of another chart ---------------------------------------------------------------


def test_a_release_of_another_chart_is_refused_unless_adopted(
    kube: KubeAPIDouble, helm: Helm, tmp_path: Path
) -> None:
    chart = tmp_path / "vllm-stack"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: vllm-stack\nversion: 0.1.12\n")
    (chart / "templates" / "pvc.yaml").write_text(FOREIGN_TEMPLATE)
    installed = helm.run(["install", "pd", str(chart)])
    assert installed.returncode == 0, installed.stderr

    refused = deploy(helm, TUTORIAL_VALUES)
    assert refused.exit_code == 1, refused.output
    message = one_line(refused)
    assert "release 'pd' in namespace 'default' was installed from chart vllm-stack-0.1.12" in (
        message
    )
    assert "not pd-stack" in message and "pass --adopt to move the release to pd-stack" in message
    assert "Traceback" not in refused.output
    assert [e["chart"] for e in history(helm)] == ["vllm-stack-0.1.12"]

    # Adopted: the claim pd-stack renders too is taken over; the other one would be deleted.
    doomed = deploy(helm, TUTORIAL_VALUES, "--adopt")
    assert doomed.exit_code == 1, doomed.output
    message = one_line(doomed)
    assert f"would delete the PersistentVolumeClaims default/{FOREIGN_CLAIM} and the data" in (
        message
    )
    assert PREFILL_CLAIM not in message and "pass --allow-pvc-deletion" in message
    assert len(history(helm)) == 1 and FOREIGN_CLAIM in claims(kube)
    uid = claims(kube)[PREFILL_CLAIM]["metadata"]["uid"]

    adopted = deploy(helm, TUTORIAL_VALUES, "--adopt", "--allow-pvc-deletion")
    assert adopted.exit_code == 0, adopted.output
    assert [e["chart"] for e in history(helm)] == ["vllm-stack-0.1.12", "pd-stack-0.1.0"]
    kept = claims(kube)
    assert FOREIGN_CLAIM not in kept
    # The same claim (patched, not replaced), now pd-stack's and kept by helm from here on.
    assert kept[PREFILL_CLAIM]["metadata"]["uid"] == uid
    assert kept[PREFILL_CLAIM]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    # Adopted once: the release is pd-stack's now.
    again = deploy(helm, TUTORIAL_VALUES)
    assert again.exit_code == 0, again.output


# ---- an upgrade that deletes claims -----------------------------------------------------------


def test_an_upgrade_that_deletes_claims_is_refused_unless_allowed(
    kube: KubeAPIDouble, helm4: Helm, tmp_path: Path
) -> None:
    def deletable(pool: dict[str, Any]) -> None:
        pool["pvcAnnotations"] = {"helm.sh/resource-policy": ""}

    def without_claim(pool: dict[str, Any]) -> None:
        deletable(pool)
        del pool["pvcStorage"]

    first = deploy(helm4, tutorial(tmp_path, "deletable.yaml", deletable))
    assert first.exit_code == 0, first.output
    smaller = tutorial(tmp_path, "smaller.yaml", without_claim)

    refused = deploy(helm4, smaller)
    assert refused.exit_code == 1, refused.output
    message = one_line(refused)
    assert f"would delete the PersistentVolumeClaims default/{DECODE_CLAIM} and the data" in (
        message
    )
    assert "does not mark them helm.sh/resource-policy: keep" in message
    assert PREFILL_CLAIM not in message
    assert len(history(helm4)) == 1 and DECODE_CLAIM in claims(kube)

    allowed = deploy(helm4, smaller, "--allow-pvc-deletion")
    assert allowed.exit_code == 0, allowed.output
    assert DECODE_CLAIM not in claims(kube) and PREFILL_CLAIM in claims(kube)


def test_claims_helm_keeps_need_no_permission(
    kube: KubeAPIDouble, helm4: Helm, tmp_path: Path
) -> None:
    """The chart marks its claims helm.sh/resource-policy: keep: helm leaves them in place when
    an upgrade no longer renders them, so nothing is refused."""
    assert deploy(helm4, TUTORIAL_VALUES).exit_code == 0

    def without_claim(pool: dict[str, Any]) -> None:
        del pool["pvcStorage"]

    upgrade = deploy(helm4, tutorial(tmp_path, "smaller.yaml", without_claim))
    assert upgrade.exit_code == 0, upgrade.output
    assert DECODE_CLAIM in claims(kube)


# ---- a release left pending by a killed helm --------------------------------------------------


def kill_while(helm: Helm, args: list[str], kube: KubeAPIDouble, status: str) -> None:
    """Start helm with `args` and kill it (as a cancelled CI job's runner may) once the release's
    newest revision is `status`. The engines cannot start (no GPUs), so helm is still waiting."""
    process = subprocess.Popen(
        [str(helm.path), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            labels = [s["metadata"]["labels"] for s in kube.release_secrets("pd")]
            if labels and max(labels, key=lambda label: int(label["version"]))["status"] == status:
                break
            time.sleep(0.1)
    finally:
        process.kill()
        process.wait()
    assert history(helm)[-1]["status"] == status


def test_a_pending_upgrade_is_refused_with_the_rollback_that_recovers_it(
    kube: KubeAPIDouble, helm: Helm
) -> None:
    assert deploy(helm, TUTORIAL_VALUES).exit_code == 0
    kube.gpus = 0
    upgrade = ["upgrade", "pd", str(CHART), "-f"]
    upgrade += [str(TUTORIAL_VALUES), "--set", "servingEngineSpec.modelSpec[0].tag=v2"]
    kill_while(helm, [*upgrade, "--wait", "--timeout", "300s"], kube, "pending-upgrade")
    kube.gpus = 8

    refused = deploy(helm, TUTORIAL_VALUES)
    assert refused.exit_code == 1, refused.output
    message = one_line(refused)
    assert "release 'pd' in namespace 'default' is pending-upgrade at revision 2" in message
    assert "run `helm rollback pd 1 --namespace default`, then deploy again" in message
    assert len(history(helm)) == 2

    # The command given recovers the release, and deploy works again.
    rollback = helm.run(["rollback", "pd", "1", "--namespace", "default"])
    assert rollback.returncode == 0, rollback.stderr
    recovered = deploy(helm, TUTORIAL_VALUES)
    assert recovered.exit_code == 0, recovered.output
    assert history(helm)[-1]["status"] == "deployed"


def test_a_pending_install_is_refused_with_the_uninstall_that_recovers_it(
    kube: KubeAPIDouble, helm4: Helm
) -> None:
    kube.gpus = 0
    install = ["install", "pd", str(CHART), "-f"]
    install += [str(TUTORIAL_VALUES), "--wait", "--timeout", "300s"]
    kill_while(helm4, install, kube, "pending-install")
    kube.gpus = 8

    refused = deploy(helm4, TUTORIAL_VALUES)
    assert refused.exit_code == 1, refused.output
    message = one_line(refused)
    assert "release 'pd' in namespace 'default' is pending-install at revision 1" in message
    assert "run `pdctl uninstall --release pd -n default`, then deploy again" in message

    removed = runner.invoke(app, ["uninstall", "--release", "pd", "--helm", str(helm4.path)])
    assert removed.exit_code == 0, removed.output
    assert deploy(helm4, TUTORIAL_VALUES).exit_code == 0


# ---- image tags (PD114) -----------------------------------------------------------------------


def findings(values: Path, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["validate", "-f", str(values), "-o", "json", *args])
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)["files"]
    return [f for f in report["findings"] if f["rule"] == "PD114"]


def lines_of(path: Path, text: str) -> list[int]:
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]


@pytest.mark.parametrize("tag", ["latest", "nightly"])
def test_an_official_image_without_a_version_is_warned_about(tmp_path: Path, tag: str) -> None:
    source = (CI / "aggregated-values.yaml").read_text()
    assert "repository: vllm/vllm-openai\n      tag: v0.11.0\n" in source
    values = write_values(tmp_path, source.replace("tag: v0.11.0", f"tag: {tag}", 1))
    (finding,) = findings(values)
    assert finding["severity"] == "warning"
    assert finding["path"] == "servingEngineSpec.modelSpec[0].tag"
    assert [finding["line"]] == lines_of(values, f"tag: {tag}")
    assert (
        "the version checks read vLLM's version from this tag, which states none"
        in (finding["message"])
    )
    assert ("a tag that moves" in finding["message"]) is (tag == "latest")
    assert finding["hint"].startswith("pin a version: a vX.Y.Z tag, or state")
    # A stated version is what the checks read then; a vX.Y.Z tag states it itself.
    stated = findings(values, "--set", "servingEngineSpec.modelSpec[0].vllmVersion=0.11.0")
    if tag == "nightly":
        assert stated == []
    else:
        (moving,) = stated
        assert "a tag that moves" in moving["message"]
        assert "vllmVersion may no longer say it" in moving["message"]
    assert findings(write_values(tmp_path, source, "pinned.yaml")) == []


def test_latest_is_warned_about_on_any_image_but_not_with_a_digest() -> None:
    digest = "sha256:" + "a" * 64
    values = TUTORIAL_VALUES  # lmcache/vllm-openai: its tags say nothing of vLLM
    (router,) = findings(values, "--set", "routerSpec.tag=latest")
    assert router["path"] == "routerSpec.tag"
    assert "lmcache/lmstack-router:latest is a tag that moves" in router["message"]
    (pool,) = findings(values, "--set", "servingEngineSpec.modelSpec[1].tag=latest")
    assert pool["path"] == "servingEngineSpec.modelSpec[1].tag"
    assert pool["message"].startswith("pool 'llama-decode' runs lmcache/vllm-openai:latest, a tag")
    assert pool["hint"] == "pin a tag that names one build, or add a digest (sha256:...)"
    pinned = ["--set", f"routerSpec.tag=latest,routerSpec.digest={digest}"]
    assert findings(values, *pinned) == []
    assert findings(values) == []
