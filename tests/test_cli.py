"""pdctl template and version through CliRunner and as a subprocess: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli import app as app_module
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import ASSETS, ROOT, TUTORIAL_VALUES

NIXL_VALUES = ASSETS / "values-17-nixl-vllm-router.yaml"

runner = CliRunner()
# Stands for the pinned Helm 4 (the helm4 fixture) in parametrize arguments.
HELM4 = "<pinned helm 4>"


@pytest.fixture
def helm_opt(helm4: Helm) -> list[str]:
    """pdctl's --helm option, naming the pinned Helm 4."""
    return ["--helm", str(helm4.path)]


def test_template_prints_manifests(helm_opt: list[str]) -> None:
    result = runner.invoke(app, ["template", "-f", str(TUTORIAL_VALUES), *helm_opt])
    assert result.exit_code == 0, result.output
    assert "name: pd-llama-decode-engine-service" in result.stdout


def test_template_summary_json(helm_opt: list[str]) -> None:
    result = runner.invoke(
        app, ["template", "-f", str(TUTORIAL_VALUES), "--summary", "-o", "json", *helm_opt]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert [(p["name"], p["role"]) for p in summary["pools"]] == [
        ("llama-prefill", "prefill"),
        ("llama-decode", "decode"),
    ]
    assert summary["total_gpus"] == 2
    assert summary["router"]["routing"] == "disaggregated_prefill"
    assert summary["services"]["pd-llama-decode-engine-service"] == [80, 55555]
    decode = summary["pools"][1]
    assert (decode["connector"], decode["kv_role"]) == ("LMCacheConnectorV1", "kv_consumer")
    assert decode["transfer_ports"] == {"nixl-0": 55555}


def test_template_summary_text(helm_opt: list[str]) -> None:
    result = runner.invoke(app, ["template", "-f", str(TUTORIAL_VALUES), "--summary", *helm_opt])
    assert result.exit_code == 0, result.output
    assert "llama-prefill" in result.stdout and "GPUs requested in total: 2" in result.stdout
    assert "llama-decode: LMCacheConnectorV1 (kv_consumer)" in result.stdout
    assert "vllm:prompt_tokens_by_source_total" in result.stdout


def test_template_release_and_namespace(helm_opt: list[str]) -> None:
    result = runner.invoke(
        app,
        ["template", "-f", str(NIXL_VALUES), "--release", "demo", "-n", "llm", *helm_opt],
    )
    assert result.exit_code == 0, result.output
    assert "name: demo-router-service" in result.stdout and "namespace: llm" in result.stdout


def test_template_set_and_output_dir(tmp_path: Path, helm_opt: list[str]) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "template",
            "-f",
            str(TUTORIAL_VALUES),
            "--set",
            "routerSpec.replicaCount=2",
            "--output-dir",
            str(out),
            *helm_opt,
        ],
    )
    assert result.exit_code == 0, result.output
    router = (out / "pd-stack" / "templates" / "deployment-router.yaml").read_text()
    assert "replicas: 2" in router


def test_missing_values_file_is_exit_1(tmp_path: Path, helm_opt: list[str]) -> None:
    result = runner.invoke(app, ["template", "-f", str(tmp_path / "nope.yaml"), *helm_opt])
    assert result.exit_code == 1
    assert "nope.yaml: cannot be read: no such file" in result.stderr


def test_values_refused_by_schema_is_exit_1(tmp_path: Path, helm_opt: list[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("routerSpec:\n  replicaCount: -1\n")
    result = runner.invoke(app, ["template", "-f", str(bad), *helm_opt])
    assert result.exit_code == 1
    assert "replicaCount" in result.stderr and "Traceback" not in result.output


def test_missing_helm_is_exit_3(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["template", "-f", str(TUTORIAL_VALUES), "--helm", str(tmp_path / "no-helm")]
    )
    assert result.exit_code == 3
    assert "not an executable" in result.stderr


def test_debug_shows_the_exception(tmp_path: Path, helm_opt: list[str]) -> None:
    result = runner.invoke(
        app, ["--debug", "template", "-f", str(tmp_path / "nope.yaml"), *helm_opt]
    )
    assert result.exit_code == 1 and result.exception is not None


def test_usage_error_is_exit_2() -> None:
    result = runner.invoke(app, ["template"])
    assert result.exit_code == 2


def test_version_json(helm_opt: list[str]) -> None:
    result = runner.invoke(app, ["version", "-o", "json", *helm_opt])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["helm"] == "v4.1.4"
    assert json.loads(result.stdout)["chart"] == "0.1.0"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["template", "-f", str(TUTORIAL_VALUES), "--helm", HELM4], 0),
        (["template", "-f", "/nonexistent.yaml", "--helm", HELM4], 1),
        (["template"], 2),
        (["template", "-f", str(TUTORIAL_VALUES), "--helm", "/nonexistent/helm"], 3),
        (["version", "--helm", "/nonexistent/helm"], 0),
        (["--version"], 0),
    ],
)
def test_exit_codes_as_a_subprocess(helm4: Helm, args: list[str], code: int) -> None:
    args = [str(helm4.path) if arg == HELM4 else arg for arg in args]
    result = subprocess.run(
        [sys.executable, "-m", "pdctl", *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr


def test_template_refuses_duplicate_keys_with_file_and_line(
    tmp_path: Path, helm_opt: list[str]
) -> None:
    bad = tmp_path / "dup.yaml"
    bad.write_text("routerSpec:\n  replicaCount: 1\n  replicaCount: 2\n")
    result = runner.invoke(app, ["template", "-f", str(bad), *helm_opt])
    assert result.exit_code == 1
    assert str(bad) in result.stderr and "line 3" in result.stderr
    assert "Traceback" not in result.output


def test_template_refuses_an_alias_bomb(tmp_path: Path, helm_opt: list[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["template", "-f", str(bomb), *helm_opt])
    assert result.exit_code == 1 and "alias" in result.stderr


def test_version_without_helm_still_prints_pdctl_and_chart() -> None:
    result = runner.invoke(app, ["version", "--helm", "/nonexistent/helm"])
    assert result.exit_code == 0, result.output
    assert "pdctl 0.1.0" in result.stdout and "chart pd-stack 0.1.0" in result.stdout
    assert "helm: not found (helm from --helm is not an executable file" in result.stdout
    as_json = json.loads(runner.invoke(app, ["version", "-o", "json", "--helm", "/x"]).stdout)
    assert as_json["helm"] is None and as_json["helm_problem"]
    # Where the chart is read from: this checkout's helm/ here, pdctl/_chart in a wheel
    # (tests/test_wheel.py).
    assert as_json["chart_path"] == str(ROOT / "helm") and as_json["chart_origin"] == "the checkout"
    assert f"({ROOT / 'helm'}: the checkout)" in result.stdout


def test_version_option() -> None:
    from pdctl import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"pdctl {__version__}\n"


def test_make_demo_says_how_to_reach_pdctl_and_helm() -> None:
    """Nothing is installed on PATH, so `make demo` ends with the commands that reach both; the
    PATH line it prints finds them."""
    import shutil

    make = shutil.which("make")
    assert make, "make is a prerequisite of the repository"
    dry = subprocess.run(
        [make, "-s", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert ".venv/bin/pdctl --help" in dry and ".tools/helm-4.1.4/helm version" in dry
    echo = next(line for line in dry.splitlines() if "export PATH=" in line)
    printed = subprocess.run(["sh", "-c", echo], capture_output=True, text=True, check=True)
    path_line = printed.stdout.strip()
    found = subprocess.run(
        ["sh", "-c", f"{path_line} && command -v pdctl && command -v helm"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, (path_line, found.stderr)
    assert str(ROOT / ".venv" / "bin" / "pdctl") in found.stdout


# ---- output that reads at 80 columns: wrapped, never cut -------------------------------------

COMMANDS = [
    "plan",
    "init",
    "validate",
    "template",
    "deploy",
    "status",
    "verify",
    "bench",
    "uninstall",
]


def test_the_command_list_gives_each_first_line_whole() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}, terminal_width=80)
    commands = result.stdout.split("Commands:")[1]
    assert result.exit_code == 0 and "..." not in commands and "…" not in commands
    text = " ".join(commands.split())
    assert "Check values files: YAML, the chart's schema and the PD rules" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_help_wraps_at_80_columns_without_cutting_a_word(command: str) -> None:
    import typer.main

    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    group: Any = typer.main.get_command(app)
    for param in group.commands[command].params:
        for name in param.opts:
            assert name in result.stdout, name


def test_the_render_summary_names_each_pool_whole(helm_opt: list[str], tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    init = [
        "init", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--offline",
        "--mode", "pd", "--out", str(values),
    ]  # fmt: skip
    assert runner.invoke(app, init).exit_code == 0
    result = runner.invoke(
        app, ["template", "-f", str(values), "--summary", *helm_opt], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert "  llama-3-1-8b-instruct-prefill: prefill, 1 replica(s) x 1 pod(s)" in result.stdout
    assert "…" not in result.stdout


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["--debug", "validate", "values.yaml"], ["validate"]),
        (["bench", "compare", "a.json", "b.json"], ["bench"]),
        (["--help"], None),
        (["validat", "values.yaml"], None),
        ([], None),
    ],
)
def test_a_run_builds_only_the_command_it_names(
    args: list[str], kept: list[str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry point keeps only the command its arguments name in the app (typer builds the
    options of every command it holds at each start); that command's help is what it was among
    them all, and without a command (or with a word that names none) the app keeps them all."""
    shown = [*(kept or [])[:1], "--help"]
    before = runner.invoke(app, shown).output
    everything = [info.name for info in app.registered_commands]
    everything += [info.name for info in app.registered_groups]
    monkeypatch.setattr(app, "registered_commands", list(app.registered_commands))
    monkeypatch.setattr(app, "registered_groups", list(app.registered_groups))
    app_module._only(args)
    names = [info.name for info in app.registered_commands]
    names += [info.name for info in app.registered_groups]
    assert names == (kept or everything)
    assert runner.invoke(app, shown).output == before
