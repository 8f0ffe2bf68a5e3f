"""Where the bundled chart is: inside the wheel (pdctl/_chart) or, from a checkout, helm/."""

from __future__ import annotations

from pathlib import Path

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
