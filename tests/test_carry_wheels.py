"""What a GPU lease carries (benchmarks/real_engines/carry_wheels.py): the packages a run needs
beyond the host's image, each within every version asked of it, the wheels too large to carry
stripped, and one tar in parts that fit a call. The package index is replaced by a folder of
made-up wheels (a test double), so no network is needed."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from benchmarks.real_engines import carry_wheels


def make_wheel(
    folder: Path, name: str, version: str, requires: list[str], files: tuple[str, ...] = ()
) -> Path:
    wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        meta = [f"Name: {name}", f"Version: {version}"]
        meta += [f"Requires-Dist: {r}" for r in requires]
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(meta) + "\n")
        for path in files:
            archive.writestr(path, b"x" * 64)
    return wheel


# A made-up index: name -> {version: requirements}.
INDEX: dict[str, dict[str, list[str]]] = {
    "app": {
        "1.0": [
            "lib>=1",
            "tool; python_version < '3.11'",
            "extra-only; extra == 'gpu'",
            "plugin[fast]",
            "numpy",
        ]
    },
    "lib": {"1.0": [], "2.0": []},
    "late": {"1.0": ["lib<2"]},
    "plugin": {"1.0": ["fastdep; extra == 'fast'"]},
    "fastdep": {"1.0": []},
    "tool": {"1.0": []},
}


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """pip download replaced by the newest made-up wheel that meets the spec; what was asked."""
    asked: list[str] = []

    def download(folder: Path, spec: str) -> None:
        from packaging.requirements import Requirement

        requirement = Requirement(spec)
        asked.append(spec)
        versions = [v for v in INDEX[requirement.name] if v in requirement.specifier]
        version = max(versions)
        make_wheel(folder, requirement.name, version, INDEX[requirement.name][version])

    monkeypatch.setattr(carry_wheels, "download", download)
    return asked


def test_only_what_the_host_lacks_and_the_markers_admit(index: list[str], tmp_path: Path) -> None:
    wanted = carry_wheels.resolve(tmp_path, ["app==1.0"], image={"numpy"})
    # numpy is on the host; tool only below Python 3.11; extra-only needs an extra nobody asked;
    # plugin was asked with [fast], so its fast extra's requirement comes too.
    assert sorted(wanted) == ["app", "fastdep", "lib", "plugin"]
    assert wanted["plugin"] == {"fast"}
    assert not carry_wheels.conflicts(tmp_path, wanted)


def test_a_later_requirement_refetches_a_wheel_it_excludes(
    index: list[str], tmp_path: Path
) -> None:
    """lib>=1 first takes 2.0; late's lib<2 then fetches 1.0 in its place, within both."""
    wanted = carry_wheels.resolve(tmp_path, ["app==1.0", "late==1.0"], image={"numpy"})
    assert [w.name for w in tmp_path.glob("lib-*.whl")] == ["lib-1.0-py3-none-any.whl"]
    assert "lib<2,>=1" in index
    assert not carry_wheels.conflicts(tmp_path, wanted)


def test_left_out_packages_are_not_fetched(index: list[str], tmp_path: Path) -> None:
    wanted = carry_wheels.resolve(tmp_path, ["tool==1.0", "nixl-cu12==1.5.1"], image=set())
    assert sorted(wanted) == ["tool"] and not any("nixl" in a for a in index)


def test_a_version_that_breaks_another_s_requirement_is_reported(tmp_path: Path) -> None:
    make_wheel(tmp_path, "a", "1.0", ["b==1.0"])
    make_wheel(tmp_path, "b", "2.0", [])
    assert carry_wheels.conflicts(tmp_path, {"a": set(), "b": set()}) == ["b 2.0: a needs ==1.0"]


def test_stripped_members_are_gone_and_the_rest_reads(tmp_path: Path) -> None:
    files = ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/vllm-rs", "vllm/__init__.py")
    wheel = make_wheel(tmp_path, "vllm", "0.26.0", [], files)
    carry_wheels.strip(wheel, carry_wheels.STRIP["vllm"])
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.testzip() is None
    assert "vllm/__init__.py" in names and "vllm-0.26.0.dist-info/METADATA" in names
    assert not [n for n in names if "fa2" in n or n.endswith("vllm-rs")]


def test_the_tar_splits_into_one_part_a_folder_that_join_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(carry_wheels, "PART_BYTES", 1000)
    tar = tmp_path / "w.tar"
    tar.write_bytes(bytes(range(256)) * 10)
    parts = carry_wheels.split(tar, tmp_path / "carry")
    assert [p.relative_to(tmp_path / "carry").as_posix() for p in parts] == [
        "1/wheels.tar.part-01",
        "2/wheels.tar.part-02",
        "3/wheels.tar.part-03",
    ]
    # lease.sh install joins them with `cat wheels.tar.part-*` in name order.
    assert b"".join(p.read_bytes() for p in sorted(parts, key=lambda p: p.name)) == tar.read_bytes()


def test_the_image_list_is_names_only() -> None:
    image = carry_wheels.image_packages()
    assert {"torch", "transformers", "numpy", "triton"} <= image
    assert "vllm" not in image and "nixl" not in image
    assert all(name == name.lower() and " " not in name for name in image)


def test_a_poll_on_a_machine_where_no_driver_ran_ends_at_once(tmp_path: Path) -> None:
    """lease.sh wait on a fresh machine (the lease's went back while idle) says so and exits 1
    instead of waiting out its seconds; the subprocess limit is far below the seconds asked."""
    script = Path(carry_wheels.__file__).with_name("lease.sh")
    env = {**os.environ, "LEASE_RESULTS": str(tmp_path / "out"), "OUT": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(script), "wait", "3600"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "no driver ran on this machine" in done.stderr
