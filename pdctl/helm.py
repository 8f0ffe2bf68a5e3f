"""The real helm binary, found and called as a subprocess.

Lookup order: --helm, $PDCTL_HELM, the project's tools folder ($PDCTL_TOOLS_DIR, or .tools in a
checkout, newest version first), then PATH. Supported: Helm 3.14+ and 4.x.

Each command runs through pdctl.process, with a deadline (see VERSION_DEADLINE), in its own
process group. Positional arguments (release, chart, revision) follow `--`, so a name can never
be read as a flag.
Release commands (upgrade --install, rollback, uninstall, history, get) are spelled for the
binary's major version: Helm 4 waits with `--wait=watcher` (kstatus: every pod of a Deployment
updated and available) and rolls back with `--rollback-on-failure`; Helm 3 with
`--atomic --wait` (its legacy ready check). Helm reads the cluster from $KUBECONFIG as kubectl
does; a cluster it cannot reach is an EnvironmentProblem (exit 3).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl import defaults, helm_install, process
from pdctl.chart import REPO_ROOT
from pdctl.errors import EnvironmentProblem, InputError

MIN_VERSION = (3, 14, 0)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")

# How long one helm command may run (seconds): `version` and the commands that only render or
# read (template, history, get) by these; a command given its own --timeout (upgrade, rollback,
# uninstall) gets that plus TIMEOUT_MARGIN for helm's own clean-up after it.
VERSION_DEADLINE = 30.0
COMMAND_DEADLINE = 120.0
TIMEOUT_MARGIN = 60.0


@contextmanager
def values_file(data: dict[str, Any]) -> Iterator[Path]:
    """Values as one file for helm (deleted afterwards), written as JSON: a YAML document helm's
    parser reads back to exactly these values (no bare y, 1e9 or dates to reinterpret)."""
    with tempfile.TemporaryDirectory(prefix="pdctl-values-") as directory:
        path = Path(directory) / "values.json"
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        yield path


@dataclass(frozen=True)
class Helm:
    path: Path
    version: str  # as helm reports it, e.g. "v4.1.4"

    @property
    def major(self) -> int:
        return parse_version(self.version)[0]

    def run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return process.run([str(self.path), *args], deadline(args))

    def start(self, args: list[str]) -> AbstractContextManager[process.Child]:
        """Run helm in the background for a `with` block (pdctl.process.start)."""
        return process.start([str(self.path), *args], deadline(args))


def deadline(args: list[str]) -> float:
    """How long pdctl lets helm run `args` (see VERSION_DEADLINE)."""
    flags = args[: args.index("--")] if "--" in args else args
    if "--timeout" in flags:
        return parse_duration(flags[flags.index("--timeout") + 1]) + TIMEOUT_MARGIN
    return VERSION_DEADLINE if args[:1] == ["version"] else COMMAND_DEADLINE


@dataclass(frozen=True)
class TemplateRequest:
    chart: Path
    release: str = defaults.RELEASE
    namespace: str = defaults.NAMESPACE
    values_files: tuple[Path, ...] = ()
    set_values: tuple[str, ...] = ()
    kube_version: str | None = None
    output_dir: Path | None = None
    skip_schema_validation: bool = False  # for values pdctl's own schema pass checked

    def args(self) -> list[str]:
        args = ["template", "--namespace", self.namespace]
        if self.skip_schema_validation:
            args.append("--skip-schema-validation")
        for path in self.values_files:
            args += ["--values", str(path)]
        for assignment in self.set_values:
            args += ["--set", assignment]
        if self.kube_version:
            args += ["--kube-version", self.kube_version]
        if self.output_dir:
            args += ["--output-dir", str(self.output_dir)]
        return [*args, "--", self.release, str(self.chart)]


def parse_version(text: str) -> tuple[int, int, int]:
    match = _VERSION.match(text.strip())
    if not match:
        raise EnvironmentProblem(f"cannot read a helm version from {text.strip()!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def tools_dirs() -> list[Path]:
    base = Path(os.environ.get("PDCTL_TOOLS_DIR") or REPO_ROOT / ".tools")
    found = [path.parent for path in base.glob("helm-*/helm") if path.is_file()]
    return sorted(found, key=lambda d: parse_version(d.name.removeprefix("helm-")), reverse=True)


def candidates(explicit: str | None) -> list[tuple[str, Path]]:
    """Every place helm may be, in lookup order, with where the choice came from."""
    # Absolute: Path("./helm") prints as "helm", which exec would look up on PATH instead.
    if explicit:
        return [("--helm", Path(explicit).absolute())]
    if os.environ.get("PDCTL_HELM"):
        return [("PDCTL_HELM", Path(os.environ["PDCTL_HELM"]).absolute())]
    found = [("tools folder", directory / "helm") for directory in tools_dirs()]
    on_path = shutil.which("helm")
    if on_path:
        found.append(("PATH", Path(on_path)))
    fetched = helm_install.cache_dir() / f"helm-{helm_install.FETCHED}" / "helm"
    if fetched.is_file():
        found.append(("the user cache", fetched))
    return found


# Each binary's `helm version`, kept in the user's cache (pdctl.helm_install.cache_dir()): asking
# helm costs a process start on every pdctl command. Keyed by the binary's path, inode, size,
# mtime and ctime, so a binary replaced or changed in place is asked again; the newest
# VERSIONS_KEPT entries are kept.
VERSIONS_FILE = "helm-versions.json"
VERSIONS_KEPT = 32


def _binary_key(path: Path) -> str:
    stat = path.stat()
    return f"{path}|{stat.st_ino}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"


def _known_versions() -> dict[str, str]:
    """The cached versions; an unreadable or foreign file is an empty cache."""
    try:
        text = (helm_install.cache_dir() / VERSIONS_FILE).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str) and _VERSION.match(v)}


def _remember(versions: dict[str, str]) -> None:
    """Write the cache (replaced whole, so a reader never sees half of it); a cache that cannot
    be written only costs the next run one `helm version`."""
    path = helm_install.cache_dir() / VERSIONS_FILE
    kept = dict(list(versions.items())[-VERSIONS_KEPT:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{VERSIONS_FILE}.")
    except OSError:
        return
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(kept, out)
        os.replace(partial, path)
    except OSError:
        Path(partial).unlink(missing_ok=True)


@functools.lru_cache(maxsize=8)
def _version(path: Path, key: str) -> str:
    """`helm version` of the binary at path (key: _binary_key), from the cache or asked once."""
    versions = _known_versions()
    if key in versions:
        return versions[key]
    result = process.run([str(path), "version", "--template", "{{.Version}}"], VERSION_DEADLINE)
    if result.returncode != 0:
        raise EnvironmentProblem(f"{path} version failed: {result.stderr.strip()}")
    version = result.stdout.strip()
    if _VERSION.match(version):
        _remember({**versions, key: version})
    return version


def find_helm(explicit: str | None = None) -> Helm:
    """The helm to run: --helm, else PDCTL_HELM, else the tools folder, else PATH, else the one
    pdctl fetched before; with none, the pinned Helm 4 fetched and checksum-verified into the
    user cache (pdctl.helm_install; EnvironmentProblem, exit 3, when that is not possible)."""
    options = candidates(explicit)
    if not options:
        pin = helm_install.PINS[helm_install.FETCHED]
        options = [("the user cache", helm_install.install(pin, helm_install.cache_dir()))]
    source, path = options[0]
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EnvironmentProblem(f"helm from {source} is not an executable file: {path}")
    version = _version(path, _binary_key(path))
    if parse_version(version) < MIN_VERSION:
        raise EnvironmentProblem(
            f"helm {version} at {path} is too old; pdctl needs Helm 3.14 or newer (or 4.x)"
        )
    return Helm(path=path, version=version)


def template(helm: Helm, request: TemplateRequest) -> str:
    """Render the chart; helm's own message becomes an InputError when it refuses the values."""
    if request.output_dir:
        request.output_dir.mkdir(parents=True, exist_ok=True)
    result = helm.run(request.args())
    if result.returncode != 0:
        raise InputError(f"helm template failed:\n{result.stderr.strip()}")
    return result.stdout


# ---- releases --------------------------------------------------------------------------------

_UNREACHABLE = re.compile(
    r"kubernetes cluster unreachable|connection refused|no such host|i/o timeout|"
    r"no configuration has been provided|couldn't get current server API group list",
    re.IGNORECASE,
)
_NO_ACCESS = re.compile(r"\bis forbidden: User\b|\bUnauthorized\b")


class ReleaseNotFound(InputError):
    """helm knows no release of that name in that namespace."""


def duration(seconds: int) -> str:
    """A --timeout value both majors read."""
    return f"{seconds}s"


def parse_duration(text: str) -> int:
    """Seconds from a duration() text."""
    return int(text.removesuffix("s"))


@dataclass(frozen=True)
class UpgradeRequest:
    """`helm upgrade --install` that waits for the release's resources and rolls back (or, on a
    first install, uninstalls) when they are not ready within `timeout` seconds."""

    release: str
    chart: Path
    namespace: str
    values_files: tuple[Path, ...]
    timeout: int
    create_namespace: bool = False

    def args(self, major: int) -> list[str]:
        args = ["upgrade", "--install", "--namespace", self.namespace]
        for path in self.values_files:
            args += ["--values", str(path)]
        if self.create_namespace:
            args.append("--create-namespace")
        args += ["--timeout", duration(self.timeout)]
        args += (
            ["--wait=watcher", "--rollback-on-failure"] if major >= 4 else ["--atomic", "--wait"]
        )
        return [*args, "--", self.release, str(self.chart)]


def wait_flags(major: int) -> list[str]:
    """Waiting for resources in rollback and uninstall, per major."""
    return ["--wait=watcher"] if major >= 4 else ["--wait"]


def rollback_args(
    helm: Helm, release: str, namespace: str, revision: int, timeout: int
) -> list[str]:
    return [
        "rollback", "--namespace", namespace, "--timeout", duration(timeout),
        *wait_flags(helm.major), "--", release, str(revision),
    ]  # fmt: skip


def uninstall_args(helm: Helm, release: str, namespace: str, timeout: int) -> list[str]:
    return [
        "uninstall", "--namespace", namespace, "--timeout", duration(timeout),
        *wait_flags(helm.major), "--", release,
    ]  # fmt: skip


def failure(result: subprocess.CompletedProcess[str], what: str) -> Exception:
    """The error for a failed helm command: no cluster access is an EnvironmentProblem (3), an
    unknown release ReleaseNotFound, anything else an InputError with helm's message."""
    message = (result.stderr or result.stdout).strip().removeprefix("Error: ")
    if "release: not found" in message:
        return ReleaseNotFound(f"{what}: release not found")
    if _UNREACHABLE.search(message) or _NO_ACCESS.search(message):
        return EnvironmentProblem(
            f"{what}: helm cannot reach the cluster: {message}",
            hint="check KUBECONFIG / the current kubectl context and that the API server answers",
        )
    return InputError(f"{what} failed: {message}")


def check(helm: Helm, args: list[str], what: str) -> str:
    """Run helm; its stdout, or the error of failure()."""
    result = helm.run(args)
    if result.returncode != 0:
        raise failure(result, what)
    return result.stdout


def history(helm: Helm, release: str, namespace: str) -> list[dict[str, Any]]:
    """Revisions, oldest first: revision, updated, status, chart, app_version, description.
    Empty when the release does not exist."""
    try:
        text = check(
            helm,
            ["history", "--namespace", namespace, "--output", "json", "--", release],
            "helm history",
        )
    except ReleaseNotFound:
        return []
    entries = json.loads(text or "[]")
    return sorted(entries, key=lambda entry: int(entry["revision"]))


def manifest(helm: Helm, release: str, namespace: str, revision: int | None = None) -> str:
    """The release's manifest (hooks excluded), as helm stored it."""
    args = ["get", "manifest", "--namespace", namespace]
    if revision is not None:
        args += ["--revision", str(revision)]
    return check(helm, [*args, "--", release], "helm get manifest")
