"""The chart as an OCI artifact, against a real registry (the CNCF distribution registry, Debian's
docker-registry 2.8, started on loopback by these tests; `make test` installs it into .tools/):
push with each pinned Helm, pull it back byte for byte, install --dry-run from it. The archive is
reproducible, and a signed archive verifies while a tampered one is refused (a throwaway GnuPG key
made here)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import pdctl
from pdctl import naming
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.helpers import ROOT, TUTORIAL_VALUES, server

sys.path.insert(0, str(ROOT / "scripts"))  # as `python scripts/package_chart.py` has it
import install_debian_tools  # noqa: E402
import package_chart  # noqa: E402

VERSION = pdctl.__version__
REGISTRY = install_debian_tools.destination("docker-registry")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert REGISTRY.is_file(), f"{REGISTRY} is missing: run `make test` (install_debian_tools.py)"
    work = tmp_path_factory.mktemp("registry")
    address = ""

    def command(port: int, _: int) -> list[str]:
        nonlocal address
        address = f"127.0.0.1:{port}"
        config = {
            "version": 0.1,
            "storage": {"filesystem": {"rootdirectory": str(work / "data")}},
            "http": {"addr": address},
            "log": {"level": "error"},
        }
        (work / "config.yml").write_text(yaml.safe_dump(config))
        return [str(REGISTRY), "serve", str(work / "config.yml")]

    def v2(port: int) -> str:
        return f"http://127.0.0.1:{port}/v2/"

    with server(command, v2, work / "registry.log"):
        yield address


@pytest.fixture(scope="module")
def archive(helm4: Helm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_chart.package(str(helm4.path), tmp_path_factory.mktemp("dist"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _helm(helm: Helm, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CONFIG_HOME": str(cwd or ROOT)}
    return subprocess.run([str(helm.path), *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_the_same_tree_packs_to_the_same_digest(helm4: Helm, tmp_path: Path) -> None:
    """File times differ between checkouts; the archive does not."""
    digests = set()
    for i, stamp in enumerate((1_600_000_000, 1_700_000_000)):
        chart = tmp_path / f"tree{i}" / "pd-stack"
        shutil.copytree(ROOT / "helm", chart)
        for path in chart.rglob("*"):
            os.utime(path, (stamp, stamp))
        digests.add(
            _sha256(package_chart.package(str(helm4.path), tmp_path / f"out{i}", chart=chart))
        )
    assert len(digests) == 1


@pytest.mark.parametrize("helm_name", ["helm3", "helm4"])
def test_push_pull_and_install_from_the_registry(
    helm_name: str,
    registry: str,
    archive: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    kube: KubeAPIDouble,
) -> None:
    """install --dry-run reaches the Kubernetes API double (not Kubernetes) for its checks."""
    helm: Helm = request.getfixturevalue(helm_name)
    repository = f"oci://{registry}/{helm_name}"
    pushed = _helm(helm, "push", str(archive), repository, "--plain-http", cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert f"Pushed: {registry}/{helm_name}/pd-stack:{VERSION}" in pushed.stdout + pushed.stderr
    reference = f"{repository}/pd-stack"
    pulled = _helm(
        helm,
        "pull",
        reference,
        "--version",
        VERSION,
        "--plain-http",
        "-d",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert _sha256(tmp_path / archive.name) == _sha256(archive)  # byte for byte
    installed = _helm(
        helm, "install", "pd", reference, "--version", VERSION, "--plain-http",
        "--dry-run=client", "-f", str(TUTORIAL_VALUES), cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    names = naming.Release("pd")
    assert f"name: {names.router_deployment}" in installed.stdout  # the manifests it would apply


@pytest.fixture(scope="module")
def keyrings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway signing key: (secret keyring, public keyring) in the legacy format Helm reads."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}

    def gpg(*args: str) -> bytes:
        return subprocess.run(
            ["gpg", "--batch", *args], env=env, check=True, capture_output=True
        ).stdout

    gpg("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
        "pd-stack test <test@example.invalid>", "rsa2048", "sign", "never")  # fmt: skip
    secret, public = home / "secring.gpg", home / "pubring.gpg"
    secret.write_bytes(
        gpg("--pinentry-mode", "loopback", "--passphrase", "", "--export-secret-keys")
    )
    public.write_bytes(gpg("--export"))
    # gpg started an agent for this home; it would outlive the suite.
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=True, capture_output=True)
    return secret, public


@pytest.mark.parametrize("helm_name", ["helm3", "helm4"])
def test_a_signed_archive_verifies_and_a_tampered_one_is_refused(
    helm_name: str,
    registry: str,
    keyrings: tuple[Path, Path],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    kube: KubeAPIDouble,
) -> None:
    helm: Helm = request.getfixturevalue(helm_name)
    secret, public = keyrings
    signed = package_chart.package(
        str(request.getfixturevalue("helm4").path), tmp_path / "signed", "pd-stack test", secret
    )
    provenance = Path(f"{signed}.prov")
    assert provenance.is_file() and "BEGIN PGP SIGNATURE" in provenance.read_text()
    verified = _helm(helm, "verify", str(signed), "--keyring", str(public), cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "Signed by: pd-stack test" in verified.stdout + verified.stderr
    installed = _helm(
        helm, "install", "pd", str(signed), "--verify", "--keyring", str(public),
        "--dry-run=client", "-f", str(TUTORIAL_VALUES), cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    # The .prov travels with the archive through the registry: pull --verify checks it.
    (tmp_path / "pulled").mkdir()
    repository = f"oci://{registry}/signed-{helm_name}"
    pushed = _helm(helm, "push", str(signed), repository, "--plain-http", cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    pulled = _helm(
        helm, "pull", f"{repository}/pd-stack", "--version", VERSION, "--plain-http",
        "--verify", "--keyring", str(public), "-d", str(tmp_path / "pulled"), cwd=tmp_path,
    )  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "pulled" / f"{signed.name}.prov").is_file()

    # Tampered: another chart packed under the same name, the original .prov beside it.
    chart = tmp_path / "tampered" / "pd-stack"
    shutil.copytree(ROOT / "helm", chart)
    with (chart / "values.yaml").open("a") as values:
        values.write("\n# changed after signing\n")
    tampered = package_chart.package(
        str(request.getfixturevalue("helm4").path), tmp_path / "tampered-out", chart=chart
    )
    shutil.copyfile(provenance, f"{tampered}.prov")
    refused = _helm(helm, "verify", str(tampered), "--keyring", str(public), cwd=tmp_path)
    assert refused.returncode != 0
    assert "sha256" in refused.stderr.lower()
