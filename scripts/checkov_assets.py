"""checkov over the chart rendered with every tutorial asset (`make checkov`, which CI runs).

Each tutorials/assets/*.yaml is rendered by the pinned Helm 4 into namespace pd-stack (a release's
own namespace, as docs/production-checklist.md advises; checkov's CKV_K8S_21 flags `default`), and
checkov's Kubernetes checks run over the renders. The run fails when:
- more than MAX_FAILED distinct checks fail (the bar docs/production-checklist.md states);
- a check fails that docs/production-checklist.md does not list with its reason;
- the page lists a check that no longer fails (so that the page stays true);
- a check is suppressed in a rendered object (checkov.io/skip annotations) that the page does not
  list.

Usage: python scripts/checkov_assets.py --checkov PATH --helm PATH [--keep DIR] [-o json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "tutorials" / "assets"
CHECKLIST = ROOT / "docs" / "production-checklist.md"
NAMESPACE = "pd-stack"
MAX_FAILED = 6
_ROW = re.compile(r"^\|\s*`?(CKV2?_K8S_\d+)`?\s*\|")


def documented(section: str) -> set[str]:
    """Check ids in the table rows of the checklist section whose heading contains `section`."""
    found: set[str] = set()
    inside = False
    for line in CHECKLIST.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            inside = section in line
        elif inside and (match := _ROW.match(line)):
            found.add(match[1])
    return found


def render(helm: str, out: Path) -> None:
    for values in sorted(ASSETS.glob("*.yaml")):
        target = out / values.name
        result = subprocess.run(
            [helm, "template", "pd", str(ROOT / "helm"), "-n", NAMESPACE, "-f", str(values)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SystemExit(f"helm template failed for {values.name}:\n{result.stderr}")
        target.write_text(result.stdout, encoding="utf-8")


def scan(checkov: str, directory: Path) -> dict[str, Any]:
    """checkov's results: {failed: {id: {asset: [resource]}}, skipped: {id: {...}}, names}."""
    result = subprocess.run(
        [checkov, "-d", str(directory), "--framework", "kubernetes", "--skip-download"]
        + ["--compact", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode not in (0, 1) or not result.stdout.strip():
        raise SystemExit(f"checkov failed ({result.returncode}):\n{result.stderr[-3000:]}")
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    out: dict[str, Any] = {"failed": defaultdict(dict), "skipped": defaultdict(dict), "names": {}}
    for report in reports:
        results = report.get("results", {})
        for status, key in (("failed", "failed_checks"), ("skipped", "skipped_checks")):
            for check in results.get(key, []):
                asset = Path(check["file_path"]).name
                out[status][check["check_id"]].setdefault(asset, []).append(check["resource"])
                out["names"][check["check_id"]] = check["check_name"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkov", required=True)
    parser.add_argument("--helm", required=True)
    parser.add_argument("--keep", type=Path, help="write the renders here instead of a temp dir")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        directory = args.keep or Path(temp)
        directory.mkdir(parents=True, exist_ok=True)
        render(args.helm, directory)
        results = scan(args.checkov, directory)
    failed, skipped = set(results["failed"]), set(results["skipped"])
    accepted, suppressed = documented("remain"), documented("suppressed")
    problems = []
    if len(failed) > MAX_FAILED:
        problems.append(f"{len(failed)} distinct checks fail, more than {MAX_FAILED}")
    for check in sorted(failed - accepted):
        assets = ", ".join(sorted(results["failed"][check]))
        problems.append(f"{check} fails ({assets}) but {CHECKLIST.name} does not list it")
    for check in sorted(accepted - failed):
        problems.append(f"{CHECKLIST.name} lists {check}, which no longer fails: remove it")
    for check in sorted(skipped - suppressed):
        problems.append(f"{check} is suppressed in a rendered object but not listed as such")
    if args.output == "json":
        print(
            json.dumps(
                {
                    "failed": {k: dict(v) for k, v in sorted(results["failed"].items())},
                    "skipped": {k: dict(v) for k, v in sorted(results["skipped"].items())},
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        count = len(list(ASSETS.glob("*.yaml")))
        print(f"checkov: {len(failed)} distinct failed checks over {count} tutorial assets")
        for check in sorted(failed):
            where = ", ".join(sorted(results["failed"][check]))
            print(f"  {check} {results['names'][check]}: {where}")
        for check in sorted(skipped):
            print(f"  suppressed {check} {results['names'][check]}")
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
