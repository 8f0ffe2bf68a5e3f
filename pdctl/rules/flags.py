"""Flags in `extraArgs` that the chart renders too (PD117): read from the render, not restated.

The chart refuses the flags it owns (PD026: --host, --port, --kv-transfer-config, --max-model-len
with maxModelLen). Any other flag of the chart's command given again in `extraArgs` wins (argparse
keeps the last), so the chart's key for it silently stops working; `--config FILE` can set any of
them. Flags are compared as vLLM's FlexibleArgumentParser reads them: `--flag=value` is `--flag`,
and underscores are dashes (vllm/utils FlexibleArgumentParser).
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
        "extraArgs leave the flags the chart renders alone, and set no --config file",
        Severity.warning,
        None,
        "a flag in `vllmConfig.extraArgs` or `routerSpec.extraArgs` that the chart's rendered "
        "command has too (`--flag=value` and `--flag_name` alike, as vLLM's parser reads them): "
        "the later one wins, so the chart's key for it stops working; and `--config FILE`, "
        "which can set any of them. Read from the render `pdctl validate` makes",
        "pdctl/rules/flags.py",
    )
)


def flag(arg: str) -> str | None:
    """The flag an argument sets, spelled with dashes; None for a value."""
    name = arg.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else None


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
