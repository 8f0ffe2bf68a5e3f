"""The tutorials' shell commands work as written: those that need no cluster are run (pdctl, helm
template/lint, and `helm install` as a client-side dry run); those that do are checked against
what the tutorial's values render (the objects kubectl names exist, curl asks for the served
model)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import ROOT, render_file

TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.md"))
INDEX = ROOT / "tutorials" / "README.md"
BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.M | re.S)
KINDS = {"svc": "Service", "service": "Service", "deploy": "Deployment", "deployment": "Deployment"}


def commands(tutorial: Path) -> list[str]:
    """Each command of the tutorial's shell blocks, continuation lines joined, comments dropped."""
    found = []
    for block in BLOCK.findall(tutorial.read_text(encoding="utf-8")):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip() and not command.lstrip().startswith("#"):
                found.append(command.strip())
    return found


def values_file(words: list[str]) -> Path:
    return ROOT / words[words.index("-f") + 1]


def tutorial_values(tutorial: Path) -> Path:
    return ROOT / "tutorials" / "assets" / f"values-{tutorial.stem}.yaml"


def run(helm: Helm, words: list[str]) -> subprocess.CompletedProcess[str]:
    tools = {"pdctl": str(ROOT / ".venv" / "bin" / "pdctl"), "helm": str(helm.path)}
    env = {**os.environ, "PDCTL_HELM": str(helm.path)}
    argv = [tools[words[0]], *words[1:]]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda p: p.stem)
def test_commands_without_a_cluster_run(helm4: Helm, tutorial: Path) -> None:
    ran = 0
    for command in commands(tutorial):
        words = shlex.split(command, comments=True)
        if words[0] == "pdctl" and words[1] in {"template", "validate", "plan", "init"}:
            pass
        elif words[:2] == ["pdctl", "deploy"] and "--dry-run" in words:
            pass
        elif words[:2] in (["helm", "template"], ["helm", "lint"]):
            pass
        elif words[:2] == ["helm", "install"]:
            words = [*words, "--dry-run=client"]
        else:
            continue
        result = run(helm4, words)
        assert result.returncode == 0, f"{tutorial.name}: `{command}` failed:\n{result.stderr}"
        ran += 1
    assert ran, f"{tutorial.name} has no command that runs without a cluster"


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda p: p.stem)
def test_cluster_commands_name_what_the_values_render(helm4: Helm, tutorial: Path) -> None:
    objects = render_file(helm4, tutorial_values(tutorial))
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    served = served_models(objects)
    for command in commands(tutorial):
        words = shlex.split(command, comments=True)
        if words[0] == "kubectl":
            for kind, name in kubectl_objects(words):
                assert (kind, name) in names, f"{tutorial.name}: `{command}` names {kind}/{name}"
        if words[0] == "curl" and "-d" in words:
            model = json.loads(words[words.index("-d") + 1])["model"]
            assert model in served, f"{tutorial.name}: `{command}` asks for {model}, not {served}"
        if words[:2] == ["helm", "install"]:
            assert values_file(words) == tutorial_values(tutorial), command


def kubectl_objects(words: list[str]) -> list[tuple[str, str]]:
    """The Services and Deployments a kubectl command names (kind/name, or `get svc a b`)."""
    found = []
    for word in words:
        kind, _, name = word.partition("/")
        if name and kind in KINDS:
            found.append((KINDS[kind], name))
    if words[1:3] in (["get", "svc"], ["get", "service"]):
        found += [("Service", w) for w in words[3:] if not w.startswith("-")]
    return found


def served_models(objects: list[manifests.Manifest]) -> set[str]:
    """Model names the engines serve: --served-model-name, else the model argument."""
    served = set()
    for obj in objects:
        if obj["kind"] != "Deployment" or "serve" not in (args := container_args(obj)):
            continue
        named = args.index("--served-model-name") if "--served-model-name" in args else -1
        served.add(args[named + 1] if named >= 0 else args[args.index("serve") + 1])
    return served


def container_args(obj: manifests.Manifest) -> list[str]:
    return [str(a) for a in obj["spec"]["template"]["spec"]["containers"][0].get("args", [])]


def test_the_index_lists_every_tutorial_and_says_where_to_start() -> None:
    index = INDEX.read_text(encoding="utf-8")
    for tutorial in TUTORIALS:
        assert f"]({tutorial.name})" in index, f"tutorials/README.md does not list {tutorial.name}"
    start = re.search(r"\*\*Start with \[[^]]*\]\(([^)]+)\)", index)
    assert start, "the index names no tutorial to start with"
    first = ROOT / "tutorials" / start[1]
    assert "**Choose this**" in first.read_text(encoding="utf-8")
    # It ends with the commands that install the release and prove PD.
    last = [shlex.split(c, comments=True)[:2] for c in commands(first)][-2:]
    assert last == [["pdctl", "deploy"], ["pdctl", "verify"]], last
