"""Where the bundled chart is: inside the wheel (pdctl/_chart) or, from a checkout, helm/."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
# libyaml's loader where PyYAML has it: the data files (connector and compatibility tables,
# catalogs) load several times faster, which `pdctl validate` start-up feels.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """One of pdctl's own YAML data files (trusted: not for user values, see pdctl/values)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506


def bundled_chart_dir() -> Path:
    wheel_copy = PACKAGE_DIR / "_chart"
    if (wheel_copy / "Chart.yaml").is_file():
        return wheel_copy
    return REPO_ROOT / "helm"


def bundled_chart_origin(chart_dir: Path) -> str:
    """Where bundled_chart_dir() found the chart, in words."""
    return "inside the installed pdctl" if chart_dir == PACKAGE_DIR / "_chart" else "the checkout"


def chart_version(chart_dir: Path) -> str:
    metadata = read_yaml(chart_dir / "Chart.yaml")
    return str(metadata["version"])


def chart_name(chart_dir: Path) -> str:
    return str(read_yaml(chart_dir / "Chart.yaml")["name"])


@functools.cache
def default_values(chart_dir: Path) -> dict[str, Any]:
    """The chart's values.yaml: the defaults helm coalesces user values with."""
    path = chart_dir / "values.yaml"
    data = read_yaml(path) if path.is_file() else None
    return data if isinstance(data, dict) else {}
