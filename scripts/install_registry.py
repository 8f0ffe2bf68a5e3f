"""Install the CNCF distribution registry (Debian's `docker-registry` package) into .tools/ for the
tests that push the chart to a real OCI registry (tests/test_oci.py). Never system-wide.

The pinned Debian package is downloaded from the Debian archive ($DEBIAN_MIRROR names a mirror),
checked against its SHA-256, and its `usr/bin/docker-registry` extracted (a .deb is an `ar`
archive holding data.tar.xz). Result: .tools/docker-registry-<version>/docker-registry.
Usage: python scripts/install_registry.py [--dest DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import sys
import tarfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2.8.2+ds1-1"  # Debian bookworm's docker-registry
SHA256 = {
    "amd64": "a9bd06c0e006854608f8469b4371743f40604ad90975532bb3b7ceeb72fe2913",
    "arm64": "652d4e3fe828ccf9b80962dce13f813fb969f1d5e1dae7d7ceff79ec9a5ed651",
}
MEMBER = "./usr/bin/docker-registry"


def destination(tools: Path = ROOT / ".tools") -> Path:
    return tools / f"docker-registry-{VERSION.split('+')[0]}" / "docker-registry"


def _architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[machine]


def _ar_member(archive: bytes, prefix: str) -> bytes:
    """The first member of an `ar` archive whose name starts with `prefix`."""
    if not archive.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    position = 8
    while position + 60 <= len(archive):
        header = archive[position : position + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = archive[position + 60 : position + 60 + size]
        if name.startswith(prefix):
            return body
        position += 60 + size + (size % 2)
    raise ValueError(f"no {prefix}* in the package")


def install(dest: Path) -> Path:
    arch = _architecture()
    mirror = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
    url = f"{mirror}/pool/main/d/docker-registry/docker-registry_{VERSION}_{arch}.deb"
    with urllib.request.urlopen(url, timeout=120) as response:
        package = response.read()
    digest = hashlib.sha256(package).hexdigest()
    if digest != SHA256[arch]:
        raise SystemExit(f"{url}: SHA-256 {digest}, expected {SHA256[arch]}")
    data = _ar_member(package, "data.tar")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise SystemExit(f"{url}: no {MEMBER}")
        binary = member.read()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(binary)
    dest.chmod(0o755)
    return dest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=destination())
    args = parser.parse_args()
    if args.dest.is_file():
        return 0
    print(f"installed {install(args.dest)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
