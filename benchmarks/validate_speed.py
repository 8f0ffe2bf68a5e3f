"""How fast is `pdctl validate` next to `helm template` of the same file?

Each measurement starts a fresh process and reports the median wall time (and the median CPU
time of the process and its children) of several runs. `pdctl validate` of one file and
`helm template` of it run side by side (alternating, in one run, so both see the same load);
the verdict says whether validate stays within helm template + 0.3 s. Python's bytecode is
cached first (compileall, and PYTHONDONTWRITEBYTECODE left out of the children's environment),
as it is for a user; one untimed run of each command warms the disk cache. `pdctl --help`,
validate of many files and `helm lint` of the file are measured too.

    python benchmarks/validate_speed.py                      # median of 7
    python benchmarks/validate_speed.py --runs 11 --record   # and keep the figures in
                                                             # benchmarks/records/
    python benchmarks/validate_speed.py --quick              # 1 run and 10 files, for the tests
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml"
RECORDS = ROOT / "benchmarks" / "records"
BUDGET = 0.3  # seconds validate may take beyond helm template of the same file (issue 45)
RELEASE = "pd"  # pdctl's default release name


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


def _environment(helm: str | None) -> dict[str, str]:
    """The children's environment: bytecode written and read (as a user's Python does), and the
    same helm for pdctl as for the helm measurements."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if helm:
        env["PDCTL_HELM"] = helm
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timer:
    """Runs commands and keeps each one's wall and CPU times (seconds)."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def once(self, name: str, command: list[str], ok_codes: tuple[int, ...] = (0,)) -> None:
        cpu, start = _children_cpu(), time.perf_counter()
        result = subprocess.run(command, capture_output=True, check=False, env=self.env)
        self.wall.setdefault(name, []).append(time.perf_counter() - start)
        self.cpu.setdefault(name, []).append(_children_cpu() - cpu)
        if result.returncode not in ok_codes:
            raise SystemExit(f"{' '.join(command)} failed: {result.stderr.decode()[-400:]}")

    def median(self, name: str) -> float:
        return statistics.median(self.wall[name])

    def median_cpu(self, name: str) -> float:
        return statistics.median(self.cpu[name])


def side_by_side(timer: Timer, commands: dict[str, list[str]], runs: int) -> None:
    """Each command once untimed (warm-up), then `runs` rounds of all of them in turn."""
    for command in commands.values():
        subprocess.run(command, capture_output=True, check=False, env=timer.env)
    for _ in range(runs):
        for name, command in commands.items():
            timer.once(name, command)


def measure(runs: int, files: int) -> dict[str, float | int | str | bool | None]:
    pdctl, helm = _pdctl(), _helm()
    compileall.compile_dir(ROOT / "pdctl", quiet=1)
    timer = Timer(_environment(helm))
    one = {"validate 1 file": [*pdctl, "validate", str(VALUES)]}
    if helm:
        chart = str(ROOT / "helm")
        one["helm template 1 file"] = [helm, "template", RELEASE, chart, "-f", str(VALUES)]
    side_by_side(timer, one, runs)
    side_by_side(timer, {"pdctl --help": [*pdctl, "--help"]}, runs)
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for index in range(files):
            path = Path(tmp) / f"values-{index:03}.yaml"
            path.write_text(VALUES.read_text())
            copies.append(str(path))
        side_by_side(timer, {f"validate {files} files": [*pdctl, "validate", *copies]}, runs)
    if helm:
        for _ in range(runs):
            lint = [helm, "lint", str(ROOT / "helm"), "--values", str(VALUES)]
            timer.once("helm lint 1 file", lint, (0, 1))
    figures: dict[str, float | int | str | bool | None] = {
        "runs": runs,
        "cpus": os.cpu_count(),
        "helm": helm,
        "load average": round(os.getloadavg()[0], 2),
    }
    for name in timer.wall:
        figures[name] = timer.median(name)
        figures[f"{name} (cpu)"] = timer.median_cpu(name)
    if helm:
        over = timer.median("validate 1 file") - timer.median("helm template 1 file")
        figures["validate over helm template"] = over
        figures["within budget"] = over <= BUDGET
    return figures


def report(figures: dict[str, float | int | str | bool | None]) -> str:
    lines = [
        f"median of {figures['runs']}, {figures['cpus']} CPU(s) (load {figures['load average']}), "
        "bytecode cached, "
        f"helm {figures['helm'] or '(not found)'}:",
        f"  {'command':<26} {'wall':>8} {'cpu':>8}",
    ]
    for name, value in figures.items():
        cpu = figures.get(f"{name} (cpu)")
        if isinstance(value, float) and isinstance(cpu, float):
            lines.append(f"  {name:<26} {value * 1000:5.0f} ms {cpu * 1000:5.0f} ms")
    over = figures.get("validate over helm template")
    if isinstance(over, float):
        verdict = "within" if figures["within budget"] else "NOT within"
        lines.append(
            f"validate 1 file - helm template 1 file = {over * 1000:.0f} ms: "
            f"{verdict} the {BUDGET * 1000:.0f} ms budget"
        )
    return "\n".join(lines) + "\n"


def _commit() -> str:
    result = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run each, 10 files, for tests")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write the report to benchmarks/records/validate-speed-<commit>.txt",
    )
    args = parser.parse_args()
    figures = measure(1 if args.quick else args.runs, 10 if args.quick else 100)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(report(figures), end="")
    if args.record:
        commit = _commit()
        command = "python benchmarks/validate_speed.py " + " ".join(sys.argv[1:])
        header = f"# {command.strip()} on commit {commit}, {time.strftime('%Y-%m-%d')}\n"
        (RECORDS / f"validate-speed-{commit}.txt").write_text(header + report(figures))


if __name__ == "__main__":
    main()
