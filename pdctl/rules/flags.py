"""Flags in `extraArgs` that the chart's refusals leave to a warning (PD117), read from the render.

The chart refuses every flag of the engine's and the argparse routers' rendered commands in
`extraArgs`, in every spelling their parsers take (PD026, helm/templates/_checks-pools.tpl). Left
here: `--config FILE`, which can set any flag, and a flag that the llm-d EPP's rendered command
has too (a Go program: flag names are exact, `--flag=value` alike; the later one wins).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pdctl.findings import Finding, Severity
from pdctl.manifests import Manifest
from pdctl.rules.registry import Rule, register
from pdctl.values.paths import KeyPath

PD117 = register(
    Rule(
        "PD117",
        "extraArgs set no --config file and leave the llm-d EPP's rendered flags alone",
        Severity.warning,
        None,
        "`--config FILE` in `vllmConfig.extraArgs` or `routerSpec.extraArgs`, which can set any "
        "flag, the chart's too; and a flag in the llm-d EPP's `routerSpec.extraArgs` that its "
        "rendered command has too (`--flag=value` alike): the later one wins, so the chart's key "
        "for it stops working (PD026 refuses the engines' and the other routers' flags). Read "
        "from the render `pdctl validate` makes",
        "pdctl/rules/flags.py",
    )
)


def flag(arg: str) -> str | None:
    """The flag an argument sets; None for a value."""
    return arg.split("=", 1)[0] if arg.startswith("--") else None


def _arg_lists(node: Any) -> Iterator[list[str]]:
    """Every container's `args` in a rendered object."""
    if isinstance(node, dict):
        args = node.get("args")
        if "name" in node and isinstance(args, list) and all(isinstance(a, str) for a in args):
            yield args
        for value in node.values():
            yield from _arg_lists(value)
    elif isinstance(node, list):
        for value in node:
            yield from _arg_lists(value)


def _chart_flags(objects: list[Manifest], extra: list[str]) -> set[str]:
    """The flags of the rendered commands that end with these extraArgs, before them."""
    found: set[str] = set()
    for args in (a for obj in objects for a in _arg_lists(obj)):
        if len(args) > len(extra) and args[len(args) - len(extra) :] == extra:
            found |= {f for f in map(flag, args[: len(args) - len(extra)]) if f}
    return found


def _extra_args(values: dict[str, Any]) -> Iterator[tuple[KeyPath, list[str]]]:
    """(key path, list) of each extraArgs of string items in the user's values."""
    engine = values.get("servingEngineSpec")
    pools = engine.get("modelSpec") if isinstance(engine, dict) else None
    for i, spec in enumerate(pools if isinstance(pools, list) else []):
        vllm = spec.get("vllmConfig") if isinstance(spec, dict) else None
        extra = vllm.get("extraArgs") if isinstance(vllm, dict) else None
        if isinstance(extra, list) and extra:
            yield ("servingEngineSpec", "modelSpec", i, "vllmConfig", "extraArgs"), extra
    router = values.get("routerSpec")
    extra = router.get("extraArgs") if isinstance(router, dict) else None
    if isinstance(extra, list) and extra:
        yield ("routerSpec", "extraArgs"), extra


def overridden_flags(values: dict[str, Any], objects: list[Manifest]) -> list[Finding]:
    """PD117 for each extraArgs item that sets a flag of the chart's rendered command, or
    --config."""
    findings = []
    for path, extra in _extra_args(values):
        strings = [str(a) for a in extra]
        rendered = _chart_flags(objects, strings)
        for j, given in enumerate(map(flag, strings)):
            if given == "--config":
                why = "--config FILE can set any flag, the chart's too"
            elif given in rendered:
                why = f"the chart renders {given} too; the later one wins"
            else:
                continue
            findings.append(
                Finding(
                    PD117.id,
                    PD117.severity,
                    f"{strings[j]}: {why}",
                    (*path, j),
                    "set the chart's key for it instead (helm/README.md lists them), or drop it",
                )
            )
    return findings
