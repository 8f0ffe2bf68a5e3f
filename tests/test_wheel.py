"""The chart travels in the wheel: an installed pdctl renders without the repository."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from pdctl.helm import Helm
from tests.helpers import ROOT, TUTORIAL_VALUES


def test_installed_wheel_renders_from_another_directory(tmp_path: Path, helm4: Helm) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = wheels.glob("pdctl-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Install the wheel itself (no dependencies) into the fresh venv ...
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            str(wheel),
        ],
        check=True,
    )
    # ... and borrow the dependencies from the test environment (not its pdctl, which is an
    # editable install whose hook is not processed from a borrowed path).
    (target / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {"PDCTL_HELM": str(helm4.path), "PATH": "/usr/bin:/bin"}
    where = subprocess.run(
        [str(python), "-c", "import pdctl.chart as c; print(c.bundled_chart_dir())"],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where == str(target / "pdctl" / "_chart")
    version = subprocess.run(
        [str(env_dir / "bin" / "pdctl"), "version", "-o", "json"],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    reported = json.loads(version)
    assert reported["chart_path"] == where
    assert reported["chart_origin"] == "inside the installed pdctl"
    result = subprocess.run(
        [str(env_dir / "bin" / "pdctl"), "template", "-f", str(TUTORIAL_VALUES)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "name: pd-llama-decode-engine-service" in result.stdout
