"""Make the wheels a GPU lease carries for vLLM 0.26.0 + NIXL 1.5.1 + LMCache 0.5.6's runtime
needs, as parts that fit one call each (lease.sh `stash N`, then `install SHA`).

The GPU host has torch 2.11.0+cu130 and no network; a call carries at most 64 MiB with the
working tree. So: every package these need that the host's image lacks (gpu-image-packages.txt),
as wheels for CPython 3.12 on x86-64, with vLLM's FlashAttention-2 kernels and Rust frontend and
NIXL's EP plugins for torch 2.12-2.14 left out of their wheels; one tar of them, split in 52 MiB
parts into .carry/1 ... .carry/N (git-ignored).

    python benchmarks/real_engines/carry_wheels.py [--dir DIR] [--carry .carry]

It needs pip and network access to the package index; it prints the tar's sha256 for `install`.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

HERE = Path(__file__).resolve().parent
IMAGE = HERE / "gpu-image-packages.txt"
# What the run starts: vLLM and NIXL (vLLM's NixlConnector and LMCache's nixl channel), and
# LMCache's runtime requirements (its sdist's requirements/common.txt; the wheel it builds is
# installed with --no-deps beside these).
ROOTS = ["vllm==0.26.0", "nixl==1.5.1", "nixl-cu13==1.5.1"]
LMCACHE_REQUIREMENTS = "requirements/common.txt"
# vLLM 0.26.0 requirements that its serve path imports only for features the runs do not use
# (video decoding, TileLang/CuTe DSL/QuACK/TokenSpeed/Humming kernels, FastSafeTensors
# loading) and that would not fit the carry; nixl-cu12 is the CUDA 12 build nixl also lists.
LEFT_OUT = {
    "torchcodec",
    "pynvvideocodec",
    "tilelang",
    "nvidia-cutlass-dsl",
    "quack-kernels",
    "tokenspeed-mla",
    "humming-kernels",
    "nixl-cu12",
}
# Versions chosen where the newest release of a package breaks another's pin: vLLM 0.26.0 pins
# apache-tvm-ffi 0.1.10, which xgrammar >= 0.2.8 and nvidia-cudnn-frontend >= 1.29
# (tvm-ffi >= 0.1.11) do not take; LMCache 0.5.6 caps
# opentelemetry-api at 1.40 (its exporter-prometheus 0.61b0 pins the SDK at 1.40), which
# google-api-core >= 2.31 (opentelemetry-api >= 1.44) does not take.
PINS = {
    "apache-tvm-ffi": "==0.1.10",
    "xgrammar": "==0.2.7",
    "nvidia-cudnn-frontend": "==1.28.0",
    "opentelemetry-api": "==1.40.0",
    "opentelemetry-sdk": "==1.40.0",
    "opentelemetry-exporter-otlp": "==1.40.0",
    "opentelemetry-exporter-otlp-proto-common": "==1.40.0",
    "opentelemetry-exporter-otlp-proto-grpc": "==1.40.0",
    "opentelemetry-exporter-otlp-proto-http": "==1.40.0",
    "opentelemetry-proto": "==1.40.0",
    "opentelemetry-semantic-conventions": "==0.61b0",
    "opentelemetry-exporter-prometheus": "==0.61b0",
    "google-api-core": "==2.30.0",
}
# Members left out of wheels so that the carry fits (on Hopper vLLM runs FlashAttention 3; the
# FA2 import is optional; the Rust frontend is not started by `vllm serve`).
STRIP = {
    "vllm": ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/vllm-rs"),
    "nixl-cu13": tuple(f"nixl_ep_cu13/nixl_ep_cpp_torch{v}" for v in (212, 213, 214)),
}
# The host's Python (3.12.3, Linux x86-64), for requirement markers and pip's wheel tags.
MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
PLATFORMS = ["manylinux1_x86_64", "manylinux2014_x86_64", "linux_x86_64"] + [
    f"manylinux_2_{n}_x86_64" for n in (5, 17, 24, 26, 27, 28, 31, 34, 35)
]
PART_BYTES = 52 * 1024 * 1024


def image_packages(path: Path = IMAGE) -> set[str]:
    names = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonicalize_name(name) for name in names if name}


def requirements_of(wheel: Path, extras: set[str]) -> list[Requirement]:
    """The wheel's Requires-Dist that apply on the host, with `extras` asked for."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode()
    found = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = Requirement(line.split(":", 1)[1].strip())
        marker = requirement.marker
        if marker is None or any(
            marker.evaluate({**MARKERS, "extra": extra}) for extra in {"", *extras}
        ):
            found.append(requirement)
    return found


def wheel_named(folder: Path, name: str) -> Path | None:
    return next(
        (w for w in folder.glob("*.whl") if canonicalize_name(w.name.split("-")[0]) == name), None
    )


def chosen(folder: Path, name: str) -> Path:
    """The wheel resolve() downloaded for `name`."""
    wheel = wheel_named(folder, name)
    if wheel is None:
        raise SystemExit(f"no wheel of {name} in {folder}")
    return wheel


def download(folder: Path, spec: str) -> None:
    tags = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", "3.12", "--implementation", "cp", *tags, "-d", str(folder), spec],
        check=False,
    )
    if done.returncode:
        raise SystemExit(
            f"no wheel of {spec} for the host (see pip above; PINS may need a version)"
        )


def resolve(folder: Path, roots: list[str], image: set[str]) -> dict[str, set[str]]:
    """Every package the roots need that the image lacks, breadth first, each wheel downloaded
    into `folder` within every specifier asked of it so far (and PINS): a wheel that a later
    requirement excludes is fetched again. {name: extras asked for}."""
    wanted: dict[str, set[str]] = {}
    specs: dict[str, SpecifierSet] = {}
    queue = [Requirement(root) for root in roots]
    while queue:
        requirement = queue.pop(0)
        name = canonicalize_name(requirement.name)
        if name in image or name in LEFT_OUT:
            continue
        extras = wanted.get(name, set()) | set(requirement.extras)
        spec = specs.get(name, SpecifierSet(PINS.get(name, ""))) & requirement.specifier
        wheel = wheel_named(folder, name)
        if wheel is not None and _version(wheel) not in spec:
            wheel.unlink()
            wheel = None
        elif name in wanted and extras == wanted[name] and spec == specs[name]:
            continue
        wanted[name], specs[name] = extras, spec
        if wheel is None:
            download(folder, f"{requirement.name}{spec}")
            wheel = wheel_named(folder, name)
        if wheel is None:
            raise SystemExit(f"pip downloaded no wheel for {name}{spec}")
        queue.extend(requirements_of(wheel, extras))
    return wanted


def _version(wheel: Path) -> Version:
    return Version(wheel.name.split("-")[1])


def conflicts(folder: Path, wanted: dict[str, set[str]]) -> list[str]:
    """Each requirement among the chosen wheels that a chosen version does not meet."""
    versions = {name: _version(chosen(folder, name)) for name in wanted}
    found = []
    for name in wanted:
        for requirement in requirements_of(chosen(folder, name), wanted[name]):
            needed = canonicalize_name(requirement.name)
            if needed in versions and versions[needed] not in requirement.specifier:
                found.append(f"{needed} {versions[needed]}: {name} needs {requirement.specifier}")
    return found


def strip(wheel: Path, prefixes: tuple[str, ...]) -> None:
    """Rewrite the wheel without the members under `prefixes` (entries copied as stored)."""
    kept = wheel.with_suffix(".kept")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(kept, "w") as target:
        for info in source.infolist():
            if not info.filename.startswith(prefixes):
                target.writestr(info, source.read(info), compress_type=info.compress_type)
    kept.replace(wheel)


def _same_every_time(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """No time or owner in the tar, so that the same wheels make the same sha256."""
    member.mtime, member.uid, member.gid, member.uname, member.gname = 0, 0, 0, "", ""
    return member


def split(tar: Path, carry: Path) -> list[Path]:
    """The tar in parts of PART_BYTES, one per .carry/N folder (N from 1)."""
    parts = []
    with tar.open("rb") as source:
        for index, chunk in enumerate(iter(lambda: source.read(PART_BYTES), b""), start=1):
            folder = carry / str(index)
            folder.mkdir(parents=True, exist_ok=True)
            part = folder / f"wheels.tar.part-{index:02d}"
            part.write_bytes(chunk)
            parts.append(part)
    return parts


def lmcache_requirements(sdist: Path) -> list[str]:
    """LMCache's runtime requirements from its sdist, less what the host's torch stack pins."""
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(LMCACHE_REQUIREMENTS))
        found = archive.extractfile(member)
        if found is None:
            raise SystemExit(f"{sdist}: {member.name} is not a file")
        text = found.read().decode()
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    host = {"torch", "transformers", "numpy"}
    return [r for r in lines if r and canonicalize_name(Requirement(r).name) not in host]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/carry-wheels"))
    parser.add_argument("--carry", type=Path, default=Path(".carry"))
    parser.add_argument(
        "--lmcache-sdist", type=Path, help="LMCache's sdist (build_lmcache.sh fetch) for its needs"
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    roots = ROOTS + (lmcache_requirements(args.lmcache_sdist) if args.lmcache_sdist else [])
    wanted = resolve(args.dir, roots, image_packages())
    if found := conflicts(args.dir, wanted):
        raise SystemExit("conflicting versions (set PINS):\n  " + "\n  ".join(found))
    for name, prefixes in STRIP.items():
        strip(chosen(args.dir, name), prefixes)
    tar = args.dir.with_suffix(".tar")
    with tarfile.open(tar, "w") as archive:
        for name in sorted(wanted):
            wheel = chosen(args.dir, name)
            archive.add(wheel, arcname=wheel.name, filter=_same_every_time)
    parts = split(tar, args.carry)
    digest = hashlib.sha256(tar.read_bytes()).hexdigest()
    size = tar.stat().st_size
    print(f"{len(wanted)} wheels, {size:,} bytes in {len(parts)} parts; sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
