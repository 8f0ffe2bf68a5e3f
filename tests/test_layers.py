"""pdctl imports its own modules at the top of each module, where the layers contract of
pyproject.toml ([tool.importlinter], checked by `make lint`) sees them. Only the CLI defers them,
to keep `pdctl --help` fast, and says so on each such line."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

TAG = "# lazy: start-up"


def deferred_imports(path: Path) -> list[tuple[int, str]]:
    """pdctl imports inside functions (not under `if TYPE_CHECKING:`), with their source line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            if any(module.startswith("pdctl") for module in modules):
                found.append((node.lineno, lines[node.lineno - 1]))
    return found


def test_only_the_cli_defers_pdctl_imports_and_says_why() -> None:
    library, untagged = [], []
    for path in sorted((ROOT / "pdctl").rglob("*.py")):
        for lineno, line in deferred_imports(path):
            where = f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}"
            if "cli" not in path.relative_to(ROOT / "pdctl").parts:
                library.append(where)
            elif TAG not in line:
                untagged.append(where)
    assert not library, "import these at the top of the module:\n" + "\n".join(library)
    assert not untagged, f"tag each deferred CLI import with {TAG!r}:\n" + "\n".join(untagged)


def test_the_check_sees_a_deferred_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pdctl import naming\n    return naming\n")
    assert deferred_imports(module) == [(2, "    from pdctl import naming")]


# Rooms a newcomer can read in one sitting: the modules that grew past this were split by concern.
SPLIT = ["pdctl/plan/sizing.py", "pdctl/release/deploy.py", "helm/templates/_checks.tpl"]
SPLIT += ["helm/templates/_helpers.tpl"]


def test_no_module_or_template_is_too_long_to_read() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for pattern in ("pdctl/**/*.py", "helm/templates/*.tpl", "helm/templates/*.yaml")
        for path in ROOT.glob(pattern)
    }
    assert all(sizes[name] <= 500 for name in SPLIT), {name: sizes[name] for name in SPLIT}
    assert {name: size for name, size in sizes.items() if size > 600} == {}


def test_no_library_module_imports_another_pdctl_package_by_name() -> None:
    """importlib.import_module("pdctl.x") hides an import from the layers contract: a library
    module may load its own package's modules so (the rule registry does), never another's."""
    hidden = []
    for path in sorted((ROOT / "pdctl").rglob("*.py")):
        own = ".".join(path.relative_to(ROOT).with_suffix("").parts[:2])  # pdctl.<package>
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
            ):
                continue
            target = node.args[0] if node.args else None
            text = ast.unparse(target) if target is not None else ""
            named = text.strip("f'\"").split("{")[0]
            if named.startswith("pdctl") and not named.startswith(own):
                hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text}")
    assert not hidden, hidden
