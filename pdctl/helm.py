"""The real helm binary, found and called as a subprocess.

Lookup order: --helm, $PDCTL_HELM, the project's tools folder ($PDCTL_TOOLS_DIR, or .tools in a
checkout, newest version first), then PATH. Supported: Helm 3.14+ and 4.x.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pdctl.chart import REPO_ROOT
from pdctl.errors import EnvironmentProblem, InputError

MIN_VERSION = (3, 14, 0)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Helm:
    path: Path
    version: str  # as helm reports it, e.g. "v4.1.4"

    @property
    def major(self) -> int:
        return parse_version(self.version)[0]

    def run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.path), *args], capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class TemplateRequest:
    chart: Path
    release: str = "pd"
    namespace: str = "default"
    values_files: tuple[Path, ...] = ()
    set_values: tuple[str, ...] = ()
    kube_version: str | None = None
    output_dir: Path | None = None

    def args(self) -> list[str]:
        args = ["template", self.release, str(self.chart), "--namespace", self.namespace]
        for path in self.values_files:
            args += ["--values", str(path)]
        for assignment in self.set_values:
            args += ["--set", assignment]
        if self.kube_version:
            args += ["--kube-version", self.kube_version]
        if self.output_dir:
            args += ["--output-dir", str(self.output_dir)]
        return args


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
    if explicit:
        return [("--helm", Path(explicit))]
    if os.environ.get("PDCTL_HELM"):
        return [("PDCTL_HELM", Path(os.environ["PDCTL_HELM"]))]
    found = [("tools folder", directory / "helm") for directory in tools_dirs()]
    on_path = shutil.which("helm")
    if on_path:
        found.append(("PATH", Path(on_path)))
    return found


def find_helm(explicit: str | None = None) -> Helm:
    options = candidates(explicit)
    if not options:
        raise EnvironmentProblem(
            "helm was not found (looked at --helm, PDCTL_HELM, the tools folder and PATH)",
            hint="install Helm 3.14+ or 4.x, or run `make helm` in a pd-stack checkout",
        )
    source, path = options[0]
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EnvironmentProblem(f"helm from {source} is not an executable file: {path}")
    result = subprocess.run(
        [str(path), "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise EnvironmentProblem(f"{path} version failed: {result.stderr.strip()}")
    version = result.stdout.strip()
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
