"""The GitHub Action (action.yml): its run-steps, run as the runner runs them (bash, the step's env
with the inputs substituted), on a bad values file (annotations on the line at fault, exit 1) and on
the shipped values (exit 0). The `uses:` steps (setup-python, setup-helm) are the runner's; here
pdctl comes from this checkout's virtualenv, which is what the install step gives (an installed
pdctl with the chart inside: tests/test_wheel.py), and helm from PDCTL_HELM."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from pdctl.helm import Helm
from tests.helpers import ROOT, TUTORIAL_VALUES

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS = ACTION["runs"]["steps"]
INPUT = re.compile(r"\$\{\{\s*inputs\.([a-z-]+)\s*\}\}")


def _step(name: str) -> dict[str, Any]:
    return next(step for step in STEPS if step.get("name") == name)


def _run_step(
    name: str, inputs: dict[str, str], cwd: Path, helm: Helm
) -> subprocess.CompletedProcess[str]:
    given = {key: str(spec.get("default", "")) for key, spec in ACTION["inputs"].items()} | inputs
    step = _step(name)
    assert step["shell"] == "bash"
    env = {
        key: INPUT.sub(lambda m: given[m.group(1)], str(value))
        for key, value in step.get("env", {}).items()
    }
    env = {**os.environ, **env, "PDCTL_HELM": str(helm.path)}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_a_bad_values_file_gets_an_annotation_on_its_line_and_exit_1(
    tmp_path: Path, helm4: Helm
) -> None:
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    values["servingEngineSpec"]["modelSpec"][0]["replicaCount"] = "two"
    (tmp_path / "values").mkdir()
    bad = tmp_path / "values" / "bad-values.yaml"
    bad.write_text(yaml.safe_dump(values, sort_keys=False))
    line = next(
        i for i, text in enumerate(bad.read_text().splitlines(), 1) if "replicaCount: two" in text
    )
    result = _run_step("Validate values", {"files": "values/*.yaml"}, tmp_path, helm4)
    assert result.returncode == 1, result.stdout + result.stderr
    annotations = [text for text in result.stdout.splitlines() if text.startswith("::")]
    assert annotations, result.stdout
    assert any(
        text.startswith(f"::error file=values/bad-values.yaml,line={line},")
        and "replicaCount" in text
        for text in annotations
    ), annotations


def test_the_shipped_values_pass_rendered(tmp_path: Path, helm4: Helm) -> None:
    (tmp_path / "values").mkdir()
    for path in sorted((ROOT / "tutorials" / "assets").glob("values-1[67]*.yaml")):
        shutil.copy(path, tmp_path / "values" / path.name)
    files = "values/values-16-disagg-prefill.yaml\nvalues/values-17*.yaml"  # newline-separated too
    result = _run_step("Validate values", {"files": files}, tmp_path, helm4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "::error" not in result.stdout
    assert re.search(r"[2-9] of [2-9] file\(s\) valid", result.stderr), result.stderr


def test_the_action_installs_the_pdctl_of_its_own_tag_and_pins_its_actions() -> None:
    assert "$GITHUB_ACTION_PATH" in _step("Install pdctl")["run"]
    used = [step["uses"] for step in STEPS if "uses" in step]
    assert used and all(re.fullmatch(r"[\w-]+/[\w-]+@v\d+", use) for use in used)
    assert set(ACTION["inputs"]) >= {"files", "render", "strict", "ignore"}
