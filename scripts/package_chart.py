"""Package the chart reproducibly: the same tree packs to the same archive (same digest, so the
same OCI artifact), whenever and wherever it is packed.

Helm writes each file's modification time into the archive, and a checkout's times differ from
clone to clone. So the chart is copied to a temporary folder whose files all get one time:
$SOURCE_DATE_EPOCH when set (the reproducible-builds convention), else the time of the last commit
that changed the chart, else 2000-01-01. Then `helm package` (Helm 4: Helm 3.17 stamps the
current time whatever the files say). With --sign KEY, `helm package --sign` also writes the
provenance file (.prov), signed with KEY from the GnuPG secret keyring --keyring (helm verify and
helm install --verify check it).

Usage: python scripts/package_chart.py --helm HELM --dest DIR [--sign KEY --keyring FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm"
FALLBACK_EPOCH = 946684800  # 2000-01-01T00:00:00Z


def source_epoch() -> int:
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        found = subprocess.run(
            ["git", "log", "-1", "--format=%ct", "--", "helm"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:  # no git: a source archive
        return FALLBACK_EPOCH
    stamp = found.stdout.strip() if found.returncode == 0 else ""
    return int(stamp) if stamp else FALLBACK_EPOCH


def package(
    helm: str, dest: Path, key: str | None = None, keyring: Path | None = None, chart: Path = CHART
) -> Path:
    epoch = source_epoch()
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "pd-stack"
        shutil.copytree(chart, copy)
        for path in [copy, *copy.rglob("*")]:
            os.utime(path, (epoch, epoch), follow_symlinks=False)
        command = [helm, "package", str(copy), "-d", str(dest)]
        if key:
            command += ["--sign", "--key", key, "--keyring", str(keyring)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"helm package failed: {result.stderr.strip()}")
    (archive,) = [line.rsplit(": ", 1)[-1] for line in result.stdout.splitlines() if ".tgz" in line]
    return Path(archive)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helm", required=True)
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--sign", metavar="KEY", help="sign with this key (name or email)")
    parser.add_argument("--keyring", type=Path, help="GnuPG secret keyring (legacy format)")
    args = parser.parse_args()
    if args.sign and not args.keyring:
        parser.error("--sign needs --keyring")
    args.dest.mkdir(parents=True, exist_ok=True)
    print(f"packaged {package(args.helm, args.dest.resolve(), args.sign, args.keyring)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
