"""Install the pinned programs that some tests run, taken from Debian packages, into .tools/ (never
system-wide): the CNCF distribution registry (`docker-registry`, for the chart's OCI push/pull
tests, tests/test_oci.py) and Prometheus's `promtool` (for the alert rules, tests/test_alerts.py).

Each package is downloaded from the Debian archive ($DEBIAN_MIRROR names a mirror), checked against
its pinned SHA-256, and the one program extracted (a .deb is an `ar` archive holding data.tar.xz).
Result: .tools/<program>-<version>/<program>.
Usage: python scripts/install_debian_tools.py [PROGRAM ...]   (default: all)
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Tool:
    package: str
    version: str  # the Debian package's version (bookworm)
    sha256: dict[str, str]  # of the .deb, per Debian architecture

    @property
    def upstream(self) -> str:
        return self.version.split("+")[0]

    def url(self, mirror: str, arch: str) -> str:
        pool = f"pool/main/{self.package[0]}/{self.package}"
        return f"{mirror}/{pool}/{self.package}_{self.version}_{arch}.deb"


TOOLS = {
    "docker-registry": Tool(
        "docker-registry",
        "2.8.2+ds1-1",
        {
            "amd64": "a9bd06c0e006854608f8469b4371743f40604ad90975532bb3b7ceeb72fe2913",
            "arm64": "652d4e3fe828ccf9b80962dce13f813fb969f1d5e1dae7d7ceff79ec9a5ed651",
        },
    ),
    "promtool": Tool(
        "prometheus",
        "2.42.0+ds-5+deb12u1",
        {
            "amd64": "81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55",
            "arm64": "ca131aa102390083398afbc80be9c8dd1dda78f9f92154fc00df8f7f1f4556e9",
        },
    ),
}


def destination(program: str, tools: Path = ROOT / ".tools") -> Path:
    return tools / f"{program}-{TOOLS[program].upstream}" / program


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
        if name.startswith(prefix):
            return archive[position + 60 : position + 60 + size]
        position += 60 + size + (size % 2)
    raise ValueError(f"no {prefix}* in the package")


def install(program: str, dest: Path) -> Path:
    tool, arch = TOOLS[program], _architecture()
    url = tool.url(os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian"), arch)
    with urllib.request.urlopen(url, timeout=300) as response:
        package = response.read()
    digest = hashlib.sha256(package).hexdigest()
    if digest != tool.sha256[arch]:
        raise SystemExit(f"{url}: SHA-256 {digest}, expected {tool.sha256[arch]}")
    member = f"./usr/bin/{program}"
    with tarfile.open(fileobj=io.BytesIO(_ar_member(package, "data.tar"))) as tar:
        extracted = tar.extractfile(member)
        if extracted is None:
            raise SystemExit(f"{url}: no {member}")
        binary = extracted.read()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(binary)
    dest.chmod(0o755)
    return dest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", metavar="PROGRAM", help=", ".join(TOOLS))
    programs = parser.parse_args().programs or list(TOOLS)
    unknown = sorted(set(programs) - set(TOOLS))
    if unknown:
        parser.error(f"unknown program(s) {unknown}; known: {', '.join(TOOLS)}")
    for program in programs:
        dest = destination(program)
        if not dest.is_file():
            print(f"installed {install(program, dest)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
