"""Commands that read values take files alike and say what they did: positional files merged
with -f files (deploy, preflight, template), validate's help on how it checks files, what
`validate --render` rendered, `preflight --dry-run`, signed figures that read right, and the
README's table of what each command needs. Each test reads the output, not only the exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.preflight import jobs
from pdctl.preflight.verdict import CHECKS
from pdctl.verify.client import Stream, StreamEvent
from pdctl.verify.report import Endpoint, Settings
from pdctl.verify.ttft import compare
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import CI, ROOT, TUTORIAL_VALUES, assert_kube_valid, write_values

runner = CliRunner()
RDMA_VALUES = CI / "nixl-rdma-hetero-tp-values.yaml"  # rdma/ib, IPC_LOCK, UCX_*, nodeSelector
IMAGE = "vllm/vllm-openai:v0.10.1"  # an image no test file names


def _words(text: str) -> str:
    """Help and messages with their wrapping undone."""
    return " ".join(text.split())


def _commands() -> dict[str, Any]:
    """Every command (click's objects, as typer builds them), sub-commands as "group sub"."""
    found: dict[str, Any] = {}
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        found[name] = command
        for sub, inner in getattr(command, "commands", {}).items():
            found[f"{name} {sub}"] = inner
    return found


def _image_override(tmp_path: Path) -> Path:
    """The tutorial's values with another engine image: helm replaces lists whole, so the later
    of the two files decides every pool's image."""
    text = TUTORIAL_VALUES.read_text()
    text = text.replace("lmcache/vllm-openai", "vllm/vllm-openai").replace(
        "2025-05-17-v1", "v0.10.1"
    )
    assert IMAGE.split(":")[1] in text
    return write_values(tmp_path, text, "override.yaml")


# ---- positional values files, merged like template's ----------------------------------------


@pytest.mark.parametrize("command", ["deploy", "preflight", "template"])
def test_every_values_command_takes_positional_files(command: str) -> None:
    params = {p.name: p for p in _commands()[command].params}
    assert params["files"].param_type_name == "argument" and params["files"].nargs == -1
    assert "--values" in params["values"].opts


def test_every_command_with_f_files_takes_positional_files_too() -> None:
    for name, command in _commands().items():
        names = {p.name for p in command.params}
        if "values" in names:
            assert "files" in names, f"pdctl {name} takes -f files but no FILE... arguments"


def test_deploy_takes_a_values_file_as_argument_and_f_files_win(
    helm4: Helm, tmp_path: Path
) -> None:
    override = _image_override(tmp_path)
    args = ["deploy", str(TUTORIAL_VALUES), "-f", str(override), "--dry-run", "-o", "json"]
    result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)["manifest"]
    assert IMAGE in manifest and "lmcache/vllm-openai" not in manifest
    # In the other order the tutorial's file is the later one, and wins.
    args = ["deploy", str(override), "-f", str(TUTORIAL_VALUES), "--dry-run", "-o", "json"]
    result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    assert IMAGE not in json.loads(result.stdout)["manifest"]


def test_preflight_takes_values_files_as_arguments(helm4: Helm, tmp_path: Path) -> None:
    override = _image_override(tmp_path)
    args = ["preflight", str(TUTORIAL_VALUES), str(override), "--dry-run", "-o", "json"]
    result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    images = {
        o["spec"]["template"]["spec"]["containers"][0]["image"]
        for o in json.loads(result.stdout)["objects"]
        if o["kind"] == "Job"
    }
    assert images == {IMAGE}


@pytest.mark.parametrize("command", ["deploy", "preflight", "template"])
def test_no_values_file_is_a_usage_error_naming_both_forms(command: str) -> None:
    result = runner.invoke(app, [command])
    assert result.exit_code == 2
    assert "name the values files: FILE... or -f FILE... (merged in order)" in result.output


# ---- validate: each FILE alone, the -f files merged ------------------------------------------


def test_validate_help_says_each_file_is_checked_alone() -> None:
    result = runner.invoke(app, ["validate", "--help"], env={"COLUMNS": "200"})
    text = _words(result.output)
    assert "Each FILE is checked alone, as if it were the only values file" in text
    assert (
        "The -f files are checked once, merged in order as template, deploy and preflight" in text
    )


def test_validate_checks_positional_files_alone_and_f_files_merged(tmp_path: Path) -> None:
    """What the help says: two FILEs are two reports; the same files as -f are one, merged."""
    override = write_values(tmp_path, "routerSpec:\n  replicaCount: 2\n", "override.yaml")
    base = str(TUTORIAL_VALUES)
    alone = runner.invoke(app, ["validate", base, str(override), "-o", "json"])
    assert [f["file"] for f in json.loads(alone.stdout)["files"]] == [base, str(override)]
    merged = runner.invoke(app, ["validate", "-f", base, "-f", str(override), "-o", "json"])
    files = json.loads(merged.stdout)["files"]
    assert [(f["file"], f["valid"]) for f in files] == [(f"{base} + {override}", True)]


# ---- validate --render says what it rendered and checked -------------------------------------


def test_validate_render_says_what_it_rendered_and_checked(helm4: Helm) -> None:
    args = ["validate", str(TUTORIAL_VALUES), "--render", "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    found = re.search(
        r"rendered with helm (v\S+): (\d+) objects, checked against Kubernetes 1\.35 schemas",
        result.stderr,
    )
    assert found and found.group(1) == helm4.version, result.stderr
    render = runner.invoke(app, ["template", str(TUTORIAL_VALUES), "--helm", str(helm4.path)])
    objects = [d for d in render.stdout.split("\n---") if "kind:" in d]
    assert int(found.group(2)) == len(objects)

    as_json = runner.invoke(app, [*args, "-o", "json", "--kube-version", "1.29"])
    assert json.loads(as_json.stdout)["files"][0]["render"] == {
        "rendered": True,
        "helm_version": helm4.version,
        "objects": len(objects),
        "kube_version": "1.29",
    }


def test_validate_without_render_says_nothing_of_a_render() -> None:
    result = runner.invoke(app, ["validate", str(TUTORIAL_VALUES), "-o", "json"])
    assert "render" not in json.loads(result.stdout)["files"][0]
    assert "rendered" not in runner.invoke(app, ["validate", str(TUTORIAL_VALUES)]).stderr


def test_validate_render_of_refused_values_says_it_did_not_render(
    helm4: Helm, tmp_path: Path
) -> None:
    broken = write_values(tmp_path, "routerSpec:\n  replicaCount: -1\n")
    args = ["validate", str(broken), "--render", "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert (
        f"{broken}: not rendered, nor checked against Kubernetes 1.35 schemas: fix the errors "
        "first" in result.stderr
    )
    report = json.loads(runner.invoke(app, [*args, "-o", "json"]).stdout)["files"][0]
    assert report["render"]["rendered"] is False and report["render"]["helm_version"] is None


# ---- preflight --dry-run ---------------------------------------------------------------------


def test_preflight_dry_run_prints_what_it_would_create_and_check(
    kube: KubeAPIDouble, helm4: Helm
) -> None:
    args = ["preflight", str(TUTORIAL_VALUES), "--dry-run", "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert kube.requests == []  # the API server double saw nothing: no cluster touched
    assert out.startswith("preflight dry run (no cluster contacted)")
    run = re.search(r"ConfigMap (pdctl-preflight-(\w+)): the probe script", out)
    assert run, out
    image = "lmcache/vllm-openai:2025-05-17-v1"
    assert f"Job {run.group(1)}-target: prefill pool llama-prefill's image {image}, 1 GPU(s)" in out
    assert f"Job {run.group(1)}-initiator, once that pod has an IP: decode pool llama-decode" in out
    for key, level, when in CHECKS:
        assert f"  {level} [{key}] {when}" in out
    # What the render alone already shows: the tutorial pools ask for no rdma/* resource.
    assert "warn (from the render alone): [no-rdma-resource] the prefill pool llama-prefill" in out


def test_preflight_dry_run_json_has_the_objects_it_would_apply(
    kube: KubeAPIDouble, helm4: Helm
) -> None:
    args = ["preflight", str(RDMA_VALUES), "--dry-run", "-o", "json", "--helm", str(helm4.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert kube.requests == []
    planned = json.loads(result.stdout)
    objects = planned["objects"]
    assert [o["kind"] for o in objects] == ["ConfigMap", "Job", "Job"]
    initiator = objects[2]["spec"]["template"]["spec"]["containers"][0]
    assert initiator["args"][initiator["args"].index("--target") + 1] == jobs.TARGET_PLACEHOLDER
    assert planned["findings"] == []  # rdma/ib and IPC_LOCK: nothing to warn about yet
    assert {c["id"] for c in planned["checks"]} == {key for key, _, _ in CHECKS}
    assert_kube_valid(objects, "1.35.0")


def test_every_preflight_finding_is_listed_among_the_checks() -> None:
    source = (ROOT / "pdctl" / "preflight" / "verdict.py").read_text()
    given = set(re.findall(r'Finding\(\s*(?:REFUSE|WARN),\s*"([a-z-]+)"', source))
    assert given == {key for key, _, _ in CHECKS}


# ---- signed figures --------------------------------------------------------------------------


class TimedHttpDouble:
    """TEST DOUBLE for verify's Http: each URL streams one token at a set time (seconds)."""

    def __init__(self, first_token_at: dict[str, float]):
        self.first_token_at = first_token_at

    def stream(self, url: str, body: dict[str, Any]) -> Stream:
        at = next(t for prefix, t in self.first_token_at.items() if url.startswith(prefix))
        events = [
            StreamEvent(at, {"choices": [{"text": "hi"}]}),
            StreamEvent(at, {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 9}}),
        ]
        return Stream(status=200, events=events, done=True, ended_at=at)


@pytest.mark.parametrize(
    ("pd_s", "alone_s", "reads"),
    [(0.062, 0.050, "PD adds 12 ms"), (0.048, 0.050, "PD saves 2 ms")],
)
def test_pd_ttft_says_adds_or_saves(pd_s: float, alone_s: float, reads: str) -> None:
    http = TimedHttpDouble({"http://router": pd_s, "http://prefill": alone_s})
    prefill = [Endpoint("prefill-0", "prefill", "http://prefill")]
    check = compare(http, "http://router", prefill, "m", Settings())  # type: ignore[arg-type]
    assert check.summary.endswith(f"(600-word prompts): {reads}"), check.summary
    assert "-" not in check.summary.split(": PD ")[1]


# ---- README: what each command needs ---------------------------------------------------------


def test_readme_says_what_each_command_needs() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("Which pdctl commands need helm, and which a cluster")[1].split("\n\n")[1]
    listed = set(re.findall(r"`([a-z]+(?: compare)?)(?: --[a-z-]+)?`", table))
    wanted = {name for name in _commands() if name != "version"}
    assert wanted <= listed, f"README's table leaves out {sorted(wanted - listed)}"
    assert "pip install ." in readme and "make helm" in readme and "PDCTL_HELM" in readme


def test_a_short_count_reads_as_a_count_not_a_change() -> None:
    from pdctl.verify import judge

    moves = [judge.Moves("decode-0", "decode", 598.0, 0.0, None, {}, {})]
    check = judge._counted(moves, ("pd-decode", "decode", "m"), lambda m: m.prompt, 600, "tokens")
    assert check.summary == "decode counted 598 of the 600 tokens (m)"
