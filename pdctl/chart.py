"""Where the bundled chart is: inside the wheel (pdctl/_chart) or, from a checkout, helm/."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent


def bundled_chart_dir() -> Path:
    wheel_copy = PACKAGE_DIR / "_chart"
    if (wheel_copy / "Chart.yaml").is_file():
        return wheel_copy
    return REPO_ROOT / "helm"


def chart_version(chart_dir: Path) -> str:
    metadata = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8"))
    return str(metadata["version"])


@functools.cache
def default_values(chart_dir: Path) -> dict[str, Any]:
    """The chart's values.yaml: the defaults helm coalesces user values with."""
    path = chart_dir / "values.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    return data if isinstance(data, dict) else {}
