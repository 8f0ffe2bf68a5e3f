"""Write the chart's canary script, helm/files/canary/pd_canary.py: one standard-library Python file
made of pdctl's PD core (the /metrics parser, pdctl/verify/exposition.py, the judging,
pdctl/verify/judge.py, and the probe's procedure, pdctl/verify/probe.py) and the canary's own
driver (scripts/canary_driver.py), so that the canary and `pdctl verify` probe and judge with the
same code.

The driver and the core import from the core by name (`from pdctl.verify.judge import ...`); the
script has the driver's docstring, the imports of all (the imports of the core dropped), the
core's code in CORE's order, then the driver's. Refused: an import of anything else from pdctl,
an import below the top of a file, and a name two files define. scripts/build_docs.py writes the
script with the other generated files (`make docs`), and its `--check` fails when it is stale.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The core's modules, by import name, in the script's order.
CORE = {
    "pdctl.verify.exposition": ROOT / "pdctl" / "verify" / "exposition.py",
    "pdctl.verify.judge": ROOT / "pdctl" / "verify" / "judge.py",
    "pdctl.verify.probe": ROOT / "pdctl" / "verify" / "probe.py",
}
DRIVER = ROOT / "scripts" / "canary_driver.py"
TARGET = ROOT / "helm" / "files" / "canary" / "pd_canary.py"


class SourceError(Exception):
    """A source the script cannot be made from."""


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def _split(path: Path) -> tuple[str, list[ast.stmt], str]:
    """A module's docstring (as written), its top-level imports and the code after them."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    body = list(tree.body)
    docstring = ""
    if ast.get_docstring(tree, clean=False) is not None:
        docstring = ast.get_source_segment(text, body.pop(0)) or ""
    imports: list[ast.stmt] = []
    while body and isinstance(body[0], (ast.Import, ast.ImportFrom)):
        imports.append(body.pop(0))
    late = [
        n for n in ast.walk(ast.Module(body, [])) if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    if late:
        raise SourceError(f"{_shown(path)}:{late[0].lineno}: an import below the top")
    start = (imports[-1].end_lineno or 0) if imports else 0
    return docstring, imports, "".join(lines[start:]).strip("\n")


def _defined(code: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _import_lines(imports: list[ast.stmt], path: Path) -> set[str]:
    """The import statements to keep, one name a line (imports of the core dropped: its code is in
    the script, before the code that uses it)."""
    lines: set[str] = set()
    for node in imports:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            shown = [f"import {module}" for module in modules]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "__future__" or node.module in CORE:
                continue  # the core's code is in the script itself
            modules = [node.module]
            shown = [f"from {node.module} import {alias.name}" for alias in node.names]
        else:
            raise SourceError(f"{_shown(path)}:{node.lineno}: a relative import")
        pdctl = [m for m in modules if m.split(".")[0] == "pdctl"]
        if pdctl:
            raise SourceError(f"{_shown(path)}:{node.lineno}: imports {pdctl[0]}")
        lines.update(shown)
    return lines


def _rule(source: str) -> str:
    return f"# ---- {source} ".ljust(99, "-")


def _refuse_twice_defined(codes: dict[Path, str]) -> None:
    seen: dict[str, Path] = {}
    for path, code in codes.items():
        for name in sorted(_defined(code)):
            if name in seen:
                raise SourceError(f"defined in both {seen[name].name} and {path.name}: {[name]}")
            seen[name] = path


def render() -> str:
    parts = {path: _split(path) for path in [*CORE.values(), DRIVER]}
    _refuse_twice_defined({path: code for path, (_, _, code) in parts.items()})
    docstring = parts[DRIVER][0]
    lines = set().union(*(_import_lines(imports, path) for path, (_, imports, _) in parts.items()))
    plain = sorted(line for line in lines if line.startswith("import "))
    grouped: dict[str, list[str]] = {}
    for line in sorted(line for line in lines if line.startswith("from ")):
        module, name = line.removeprefix("from ").split(" import ")
        grouped.setdefault(module, []).append(name)
    froms = [f"from {module} import {', '.join(names)}" for module, names in grouped.items()]
    sources = [_shown(path) for path in parts]
    note = textwrap.fill(
        f"Generated by scripts/build_canary.py (`make docs`) from {', '.join(sources[:-1])} and "
        f"{sources[-1]}; edit those, not this file.",
        width=99,
    )
    code = [part for path in parts for part in (_rule(_shown(path)), "", parts[path][2], "", "")]
    return "\n".join(
        [
            docstring.removesuffix('"""').rstrip() + f"\n\n{note}\n" + '"""',
            "",
            "from __future__ import annotations",
            "",
            *plain,
            *froms,
            "",
            *code[:-1],
        ]
    )
