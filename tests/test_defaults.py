"""Each default is stated once, in pdctl/defaults.py (vLLM's block size in the chart's
helm/files/vllm-image.yaml): no module of pdctl writes one of those options' defaults as a literal,
by name or by value, and each command's option defaults equal the library's."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from typer.core import TyperGroup

from pdctl import defaults, vllm_image
from pdctl.bench.workload import BenchSettings
from pdctl.cli.app import app
from pdctl.plan.layout import Request
from pdctl.plan.layout import Workload as PlanWorkload
from pdctl.verify.report import Settings
from tests.helpers import CHART, ROOT

# Parameters and dataclass fields whose default pdctl/defaults.py states: nowhere else in pdctl
# may one of them default to a literal (None, "not given", is not a default value).
SHARED = {
    "release",
    "namespace",
    "kube_version",
    "router_port",
    "engine_port",
    "gpu_type",
    "gpus_per_node",
    "utilization",
    "gpu_memory_utilization",
    "input_len",
    "output_len",
    "concurrency",
    "connector",
    "requests",
    "max_in_flight",
    "timeout",
    "slo_attainment",
    "max_tokens",
    "prompt_words",
    "settle",
    "secret_name",
    "secret_key",
    "hf_token_secret",
    "hf_token_key",
}


def _defaults_of(node: ast.AST) -> list[tuple[str, ast.expr]]:
    """(name, default) of a function's parameters or a class body's annotated fields."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(
            zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
        )
        pairs += [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
        ]
        return [(a.arg, d) for a, d in pairs]
    if isinstance(node, ast.ClassDef):
        return [
            (s.target.id, s.value)
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value
        ]
    return []


def restated(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name = literal` for each shared default the module writes as a literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        for name, default in _defaults_of(node):
            if name in SHARED and isinstance(default, ast.Constant) and default.value is not None:
                where = path.relative_to(root)
                found.append(f"{where}:{default.lineno} {name} = {default.value!r}")
    return found


# Defaults checked by value: a literal equal to one in a default position (a parameter, a
# dataclass field, `default=`, a module constant) is a restatement whatever its name. The block
# size (16) is too common a number to refuse alone: it counts where the name says block.
BY_VALUE = {
    defaults.PORT: "",
    vllm_image.grammar().block_size: "block",
}


def _default_positions(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    """(name, value) of every default position in a module."""
    found = [pair for node in ast.walk(tree) for pair in _defaults_of(node)]
    found += [
        (node.arg, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg == "default"
    ]
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            found.append((statement.targets[0].id, statement.value))
    return found


def restated_values(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name = literal` for each default position holding a value of BY_VALUE."""
    found = []
    for name, value in _default_positions(ast.parse(path.read_text())):
        literal = value.value if isinstance(value, ast.Constant) else None
        if type(literal) is int and literal in BY_VALUE and BY_VALUE[literal] in name.lower():
            found.append(f"{path.relative_to(root)}:{value.lineno} {name} = {literal!r}")
    return found


def _modules() -> list[Path]:
    return [p for p in sorted((ROOT / "pdctl").rglob("*.py")) if p.name != "defaults.py"]


def test_no_module_restates_a_shared_default() -> None:
    assert [line for path in _modules() for line in restated(path)] == []


def test_no_module_restates_a_default_by_value() -> None:
    assert [line for path in _modules() for line in restated_values(path)] == []


def test_the_value_scan_finds_a_restated_port_and_block_size(tmp_path: Path) -> None:
    module = tmp_path / "restates.py"
    module.write_text(
        "import argparse\n"
        "LISTEN = 8000\n"
        "KV_BLOCK = 16\n"
        "MAX_TOKENS = 16\n"
        "def serve(where: int = 8000): ...\n"
        "argparse.ArgumentParser().add_argument('--listen', type=int, default=8000)\n"
    )
    assert restated_values(module, tmp_path) == [
        "restates.py:5 where = 8000",
        "restates.py:6 default = 8000",
        "restates.py:2 LISTEN = 8000",
        "restates.py:3 KV_BLOCK = 16",
    ]


def test_the_scan_finds_a_restated_default(tmp_path: Path) -> None:
    module = tmp_path / "restates.py"
    module.write_text(
        "from dataclasses import dataclass\n"
        "def f(release: str = 'pd', *, port: int = 1, namespace: str | None = None): ...\n"
        "@dataclass\nclass C:\n    gpus_per_node: int = 8\n"
    )
    assert restated(module, tmp_path) == [
        "restates.py:2 release = 'pd'",
        "restates.py:5 gpus_per_node = 8",
    ]


def _options(command: str) -> dict[str, Any]:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    found = group.commands[command]
    return {p.name: p.default for p in found.params if p.name}


def _fields(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("command", "library", "names"),
    [
        (
            "bench",
            BenchSettings,
            ["input_len", "output_len", "max_in_flight", "prefix_share", "timeout"],
        ),
        ("bench", BenchSettings, ["slo_attainment", "seed", "connector", "model"]),
        ("verify", Settings, ["requests", "max_tokens", "prompt_words", "timeout", "settle"]),
        ("plan", PlanWorkload, ["input_len", "output_len", "concurrency"]),
        ("init", PlanWorkload, ["input_len", "output_len", "concurrency"]),
        ("plan", Request, ["gpus_per_node"]),
        ("init", Request, ["gpus_per_node"]),
    ],
)
def test_a_commands_defaults_are_the_librarys(
    command: str, library: type, names: list[str]
) -> None:
    options, fields = _options(command), _fields(library)
    assert {n: options[n] for n in names} == {n: fields[n] for n in names}


@pytest.mark.parametrize("command", ["plan", "init"])
def test_utilization_default_is_the_planners(command: str) -> None:
    assert _options(command)["gpu_memory_utilization"] == _fields(Request)["utilization"]


def test_bench_steps_default_to_the_workloads() -> None:
    options, fields = _options("bench"), _fields(BenchSettings)
    assert (int(options["concurrency"]),) == fields["concurrency"]
    assert options["requests"] is None  # not given: the workload's count, unless --duration
    assert fields["requests"] == defaults.BENCH_REQUESTS


@pytest.mark.parametrize("command", ["validate", "template", "deploy", "status", "verify", "bench"])
def test_release_and_namespace_default_alike(command: str) -> None:
    from pdctl.naming import Release

    options = _options(command)
    assert (options["release"], options["namespace"]) == (defaults.RELEASE, Release("x").namespace)


def test_block_size_is_the_charts() -> None:
    from pdctl.models import memory
    from pdctl.simulator import engine

    chart = yaml.safe_load((CHART / "files" / "vllm-image.yaml").read_text())["blockSize"]
    assert memory.BLOCK_SIZE == engine.BLOCK_SIZE == chart


def test_port_is_the_charts_container_port() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart_ports = {
        values["servingEngineSpec"]["containerPort"],
        values["routerSpec"]["containerPort"],
    }
    assert chart_ports == {defaults.PORT}
    options = _options("verify")
    assert (options["router_port"], options["engine_port"]) == (defaults.PORT, defaults.PORT)
