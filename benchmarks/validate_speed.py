"""How fast is a cold `pdctl validate`? One file, 100 files, and `helm lint` on the same file.

Each measurement starts a fresh process (cold: nothing cached across runs) and reports the
median wall time of several runs. `pdctl --help` start-up is measured too.

    python benchmarks/validate_speed.py            # full run (7 repetitions)
    python benchmarks/validate_speed.py --quick    # 1 repetition and 10 files, for the test suite
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml"


def _pdctl() -> list[str]:
    script = Path(sys.executable).parent / "pdctl"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pdctl"]


def _helm() -> str | None:
    for candidate in (
        os.environ.get("PDCTL_HELM"),
        str(ROOT / ".tools" / "helm-4.1.4" / "helm"),
        shutil.which("helm"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def median_seconds(command: list[str], runs: int, ok_codes: tuple[int, ...] = (0,)) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if result.returncode not in ok_codes:
            raise SystemExit(f"{' '.join(command)} failed: {result.stderr.decode()[-400:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run each, 10 files, for tests")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    files = 10 if args.quick else 100
    pdctl = _pdctl()
    figures: dict[str, float | int | str | None] = {"runs": runs, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for index in range(files):
            path = Path(tmp) / f"values-{index:03}.yaml"
            path.write_text(VALUES.read_text())
            copies.append(str(path))
        figures["pdctl --help"] = median_seconds([*pdctl, "--help"], runs)
        figures["validate 1 file"] = median_seconds([*pdctl, "validate", str(VALUES)], runs)
        figures[f"validate {files} files"] = median_seconds([*pdctl, "validate", *copies], runs)
        helm = _helm()
        figures["helm lint 1 file"] = (
            median_seconds(
                [helm, "lint", str(ROOT / "helm"), "--values", str(VALUES)], runs, (0, 1)
            )
            if helm
            else None
        )
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"cold runs, median of {runs}, {figures['cpus']} CPU(s):")
    for name, value in figures.items():
        if isinstance(value, float):
            print(f"  {name:<22} {value * 1000:7.0f} ms")
        elif value is None and name.startswith("helm"):
            print(f"  {name:<22}  (helm not found)")


if __name__ == "__main__":
    main()
