"""Release names and namespaces from the command line: checked before anything runs (exit 2), and
never read by helm as a flag (positional arguments follow `--`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import helm as helm_mod
from pdctl import naming, pipeline
from pdctl.cli.app import app
from pdctl.errors import InputError, UsageError
from pdctl.helm import Helm, TemplateRequest, UpgradeRequest
from tests.helpers import CHART, CI

# Values that name no object of a release "pd", so any release name renders them.
VALUES = CI / "aggregated-values.yaml"

runner = CliRunner()


@pytest.fixture
def post_renderer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """./x.sh in the working folder: a post-renderer that leaves a mark when it runs."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "x.sh"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\ncat\n")
    script.chmod(0o755)
    return tmp_path / "ran"


@pytest.mark.parametrize(
    "name",
    ["pd", "a", "pd-stack-2", "a" * 53],
)
def test_release_names_helm_and_the_chart_take(name: str) -> None:
    assert naming.check_release(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "--post-renderer=./x.sh",
        "--output-dir=out",
        "pd;id",
        "../x",
        "pd\n",
        "Pd",
        "pd-",
        "1pd",  # helm takes it; the Service <release>-router-service would not be a DNS-1035 label
        "a.b",  # likewise: a '.' in a Service name
        "a" * 54,
    ],
)
def test_release_names_refused(name: str) -> None:
    with pytest.raises(UsageError) as refused:
        naming.check_release(name)
    assert repr(name) in refused.value.message and "at most 53" in refused.value.message


@pytest.mark.parametrize("name", ["default", "llm-serving", "1a", "a" * 63])
def test_namespaces_kubernetes_takes(name: str) -> None:
    assert naming.check_namespace(name) == name


@pytest.mark.parametrize(
    "name", ["", "a\nb", "ns\n", "../x", "a.b", "Default", "-n", "--kube-context=x", "a" * 64]
)
def test_namespaces_refused(name: str) -> None:
    with pytest.raises(UsageError, match="DNS-1123 label"):
        naming.check_namespace(name)


# Every command that takes --release / --namespace, with what else it needs to get that far.
COMMANDS = {
    "template": ["template", str(VALUES)],
    "validate": ["validate", "--render", str(VALUES)],
    "deploy": ["deploy", "--dry-run", "-f", str(VALUES)],
    "status": ["status"],
    "verify": ["verify"],
    "bench": ["bench"],
    "uninstall": ["uninstall"],
    "preflight": ["preflight", "-f", str(VALUES)],
    "init": ["init", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--out", "-"],
}
RUN_HELM = {"template", "validate", "deploy", "status", "uninstall", "preflight"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_flag_as_release_before_running_anything(
    command: str, helm3: Helm, post_renderer: Path
) -> None:
    """The issue's case: with Helm 3, `--release=--post-renderer=./x.sh` ran ./x.sh."""
    args = [*COMMANDS[command], "--release=--post-renderer=./x.sh"]
    args += ["--helm", str(helm3.path)] if command in RUN_HELM else []
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--release'" in result.output
    assert "'--post-renderer=./x.sh' is not a release name" in result.output
    assert not post_renderer.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_namespace_with_a_newline(command: str) -> None:
    result = runner.invoke(app, [*COMMANDS[command], "-n", "llm\nkind: x"])
    assert result.exit_code == 2, result.output
    assert "'llm\\nkind: x' is not a namespace" in result.output


def test_release_cannot_make_helm_4_write_files(helm4: Helm, tmp_path: Path) -> None:
    written = tmp_path / "written"
    args = ["template", str(VALUES), "--skip-validation", f"--release=--output-dir={written}"]
    result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
    assert result.exit_code == 2, result.output
    assert not written.exists()


# ---- the library: helm gets positional arguments after `--` ------------------------------------


def test_a_flag_as_release_reaches_helm_as_a_name(helm: Helm, post_renderer: Path) -> None:
    """Below the CLI's check: helm itself refuses the name, and runs nothing."""
    values = pipeline.load_values([str(VALUES)])
    with pytest.raises(InputError, match="invalid release name"):
        pipeline.render(values, release="--post-renderer=./x.sh", helm_path=str(helm.path))
    assert not post_renderer.exists()


@pytest.fixture
def recording_helm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Helm, Path]:
    """A test double, not helm: it records each argument list it gets (a JSON line) and prints
    an empty JSON list."""
    log = tmp_path / "argv.jsonl"
    path = tmp_path / "helm-double"
    path.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"with open({str(log)!r}, 'a') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print('[]')\n"
    )
    path.chmod(0o755)
    return Helm(path=path, version="v4.1.4"), log


def test_every_helm_command_gets_positionals_after_double_dash(
    recording_helm: tuple[Helm, Path],
) -> None:
    helm, log = recording_helm
    name = "--output-dir=/tmp/x"
    helm_mod.history(helm, name, "ns")
    helm_mod.manifest(helm, name, "ns", revision=2)
    helm.run(helm_mod.rollback_args(helm, name, "ns", 3, 60))
    helm.run(helm_mod.uninstall_args(helm, name, "ns", 60))
    helm.run(UpgradeRequest(name, CHART, "ns", (Path("v.json"),), 60).args(helm.major))
    helm.run(TemplateRequest(chart=CHART, release=name, output_dir=Path("out")).args())
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    positionals = [call[call.index("--") + 1 :] for call in calls]
    assert positionals == [
        [name],
        [name],
        [name, "3"],
        [name],
        [name, str(CHART)],
        [name, str(CHART)],
    ]
    assert all(name not in call[: call.index("--")] for call in calls)
