"""pdctl validate through CliRunner and as a subprocess: formats, inputs and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import ASSETS, CI, ROOT, TUTORIAL_VALUES

runner = CliRunner()
BAD_PORT = ROOT / "tests" / "corpus" / "bad" / "pd004-port-mismatch.yaml"


def test_json_shape() -> None:
    result = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), str(BAD_PORT), "-o", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False and report["strict"] is False
    good, bad = report["files"]
    assert good["valid"] is True and good["errors"] == 0 and good["warnings"] == 2
    assert bad["valid"] is False and bad["errors"] >= 1
    finding = next(f for f in bad["findings"] if f["rule"] == "PD004")
    assert set(finding) == {
        "rule",
        "severity",
        "path",
        "file",
        "line",
        "set",
        "column",
        "message",
        "hint",
    }
    assert finding["severity"] == "error" and finding["line"] == 30


def test_github_annotations() -> None:
    result = runner.invoke(app, ["validate", str(BAD_PORT), "-o", "github"])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line]
    assert lines and all(line.startswith(("::error ", "::warning ")) for line in lines)
    assert f"::error file={BAD_PORT},line=30,title=PD004::" in result.stdout


def test_warnings_pass_unless_strict() -> None:
    assert runner.invoke(app, ["validate", str(TUTORIAL_VALUES)]).exit_code == 0
    strict = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), "--strict", "-o", "github"])
    assert strict.exit_code == 1 and "::error" in strict.stdout and "PD103" in strict.stdout


def test_set_changes_what_is_validated() -> None:
    args = ["validate", str(TUTORIAL_VALUES), "--strict"]
    tokens = [
        "--set",
        "servingEngineSpec.modelSpec[0].hf_token=hf_abc",
        "--set",
        "servingEngineSpec.modelSpec[1].hf_token=hf_abc",
    ]
    assert runner.invoke(app, args + tokens).exit_code == 0
    bad = runner.invoke(app, args + tokens + ["--set", "routerSpec.routingLogic=roundrobin"])
    assert bad.exit_code == 1 and "PD009" in bad.stdout


def test_directories_globs_and_stdin() -> None:
    result = runner.invoke(app, ["validate", str(CI), str(ASSETS / "*.yaml")])
    assert result.exit_code == 0, result.output
    count = len(list(CI.glob("*.yaml"))) + len(list(ASSETS.glob("*.yaml")))
    assert f"{count} of {count} file(s) valid" in result.stderr
    piped = runner.invoke(app, ["validate", "-", "-o", "json"], input=TUTORIAL_VALUES.read_text())
    assert piped.exit_code == 0 and json.loads(piped.stdout)["files"][0]["file"] == "<stdin>"
    broken = runner.invoke(app, ["validate", "-"], input="a: [1\n")
    assert broken.exit_code == 1 and "<stdin>:2: error YAML001" in broken.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["validate", "x.yaml", "--output", "xml"],
        ["validate", str(TUTORIAL_VALUES), "--set", "novalue"],
        ["validate", str(TUTORIAL_VALUES), "--kube-version", "latest"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert runner.invoke(app, args).exit_code == 2


def test_missing_inputs_exit_1(tmp_path: Path) -> None:
    assert runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")]).exit_code == 1
    assert runner.invoke(app, ["validate", str(tmp_path / "*.yaml")]).exit_code == 1
    assert runner.invoke(app, ["validate", str(tmp_path)]).exit_code == 1


def test_render_without_helm_exits_3(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["validate", str(TUTORIAL_VALUES), "--render", "--helm", str(tmp_path / "helm")]
    )
    assert result.exit_code == 3, result.output


def test_render_checks_kubernetes_schemas(helm4: Helm) -> None:
    result = runner.invoke(
        app,
        ["validate", str(TUTORIAL_VALUES), *sorted(map(str, CI.glob("*.yaml"))), "--render",
         "--kube-version", "1.29", "--helm", str(helm4.path), "-o", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def _fake_chart(tmp_path: Path, template: str) -> Path:
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: fake\nversion: 0.1.0\n")
    (chart / "templates" / "x.yaml").write_text(template)
    (chart / "values.schema.json").write_text("{}")
    return chart


@pytest.mark.parametrize(
    ("template", "rule", "text"),
    [
        ('{{ fail "refused by the chart" }}\n', "HELM", "refused by the chart"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nbogus: 1\n",
            "KUBE",
            "ConfigMap/x",
        ),
    ],
)
def test_render_reports_helm_and_kube_failures(
    helm4: Helm, tmp_path: Path, template: str, rule: str, text: str
) -> None:
    chart = _fake_chart(tmp_path, template)
    result = runner.invoke(
        app,
        ["validate", str(CI / "router-only-values.yaml"), "--render", "--chart", str(chart),
         "--helm", str(helm4.path), "-o", "json"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    finding = json.loads(result.stdout)["files"][0]["findings"][0]
    assert finding["rule"] == rule and text in finding["message"]


@pytest.mark.parametrize(
    "text",
    [
        "servingEngineSpec: 5\n",
        "1: 2\n",
        "servingEngineSpec: {modelSpec: [{1: x}]}\n",
        "? [a]\n: 1\n",
        "a: !!python/object:os.system x\n",
        'routerSpec: {extraArgs: "x", routingLogic: [1]}\n',
        "servingEngineSpec: {modelSpec: [{name: 1, vllmConfig: 5, lmcacheConfig: [1]}]}\n",
        "servingEngineSpec: {modelSpec: [{lmcacheConfig: {enabled: true, enableNixl: true,"
        " nixlRole: sender, nixlPeerHost: null}, requestGPU: true}]}\n",
    ],
)
def test_odd_documents_are_refused_not_crashed(text: str) -> None:
    result = runner.invoke(app, ["validate", "-", "-o", "json"], input=text)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert json.loads(result.stdout)["files"][0]["findings"]


def test_subprocess_never_tracebacks(tmp_path: Path) -> None:
    bomb = tmp_path / "values.yaml"
    bomb.write_text("a: &a [1]\n" + "".join(f"k{i}: *a\n" for i in range(500)))
    env = {**os.environ, "PDCTL_DEBUG": ""}
    result = subprocess.run(
        [sys.executable, "-m", "pdctl", "validate", str(bomb)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 1 and "YAML003" in result.stdout
    assert "Traceback" not in result.stderr


def test_pre_commit_hook_definition() -> None:
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "pdctl-validate")
    assert hook["entry"] == "pdctl validate" and hook["language"] == "python"
    import re

    assert re.search(hook["files"], "deploy/values-prod.yaml")
    assert not re.search(hook["files"], "deploy/Chart.yaml")


def test_f_files_are_checked_merged(tmp_path: Path) -> None:
    """-f files are one set, merged as helm merges them; a file argument stands alone."""
    fix = tmp_path / "fix-port.yaml"
    fix.write_text(
        "servingEngineSpec:\n  modelSpec:\n"
        + "".join(
            f"    - {json.dumps(spec)}\n"
            for spec in __import__("yaml").safe_load(TUTORIAL_VALUES.read_text())[
                "servingEngineSpec"
            ]["modelSpec"]
        )
    )
    alone = runner.invoke(app, ["validate", str(BAD_PORT), "-o", "json"])
    assert alone.exit_code == 1
    merged = runner.invoke(app, ["validate", "-f", str(BAD_PORT), "-f", str(fix), "-o", "json"])
    report = json.loads(merged.stdout)["files"]
    assert [r["file"] for r in report] == [f"{BAD_PORT} + {fix}"]
    assert merged.exit_code == 0, merged.output
    both = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), "-f", str(BAD_PORT), "-o", "json"])
    assert [r["valid"] for r in json.loads(both.stdout)["files"]] == [True, False]
    assert runner.invoke(app, ["validate"]).exit_code == 2


def test_ignore_leaves_out_warnings_only() -> None:
    strict = ["validate", "--strict", str(ASSETS), str(CI)]
    assert runner.invoke(app, strict).exit_code == 1  # the tutorials' placeholder token (PD103)
    # The ones the shipped files carry on purpose: a short seed prompt (PD101), hostIPC for
    # cuda_ipc (PD102), the PD tutorial's token placeholder (PD103); see the README.
    shipped = runner.invoke(app, [*strict, "--ignore", "PD101,PD102", "--ignore", "PD103"])
    assert shipped.exit_code == 0, shipped.output
    error = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), "--ignore", "PD004"])
    assert error.exit_code == 2 and "an error cannot be ignored" in error.stderr
    unknown = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), "--ignore", "PD999"])
    assert unknown.exit_code == 2 and "no such rule" in unknown.stderr
