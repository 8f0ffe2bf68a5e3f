"""Subprocesses and what pdctl leaves behind: deadlines, SIGINT/SIGTERM reaching helm's process
group, temporary values removed on every path, and `template --output-dir` folders.

The hanging helm here is a test double (a shell script that answers `version` and then sleeps),
not helm. Waits poll for a state with generous deadlines; nothing asserts how long a step took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import helm as helm_mod
from pdctl import process
from pdctl.cli.app import app
from pdctl.errors import EnvironmentProblem
from pdctl.helm import Helm
from pdctl.render_dir import MARKER
from tests.helpers import ROOT, TUTORIAL_VALUES

runner = CliRunner()
PATIENCE = 120.0  # seconds a poll waits for a state before the test fails


def eventually(condition: Callable[[], bool], what: str) -> None:
    ends = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > ends:
            pytest.fail(f"not within {PATIENCE:g}s: {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def pids(path: Path) -> list[int]:
    text = path.read_text() if path.exists() else ""
    return [int(word) for word in text.split()] if text.endswith("\n") else []


def hanging_helm(directory: Path, hangs_on: str, pid_file: Path) -> Path:
    """A test double, not helm: answers `version` with v4.1.4 unless told to hang on it; on
    `hangs_on` it starts a sleeping child, writes its own pid and the child's, and waits."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "helm"
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "{hangs_on}" ]; then\n'
        f'  sleep 1000 & echo "$$ $!" > {pid_file}; wait\n'
        "fi\n"
        'if [ "$1" = "version" ]; then echo v4.1.4; fi\n'
    )
    path.chmod(0o755)
    return path


# ---- pdctl.process -----------------------------------------------------------------------------


def test_a_child_past_its_deadline_is_stopped_with_its_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = hanging_helm(tmp_path / "double", "template", pid_file)
    with pytest.raises(EnvironmentProblem) as stopped:
        process.run([str(script), "template", "--namespace", "x"], deadline=1)
    assert stopped.value.message == "helm template did not finish within 1s and was stopped"
    shell, sleeper = pids(pid_file)
    eventually(lambda: not alive(shell) and not alive(sleeper), "the double and its child end")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_received_is_forwarded_to_the_childs_group(tmp_path: Path, signum: int) -> None:
    pid_file = tmp_path / "pids"
    script = hanging_helm(tmp_path / "double", "upgrade", pid_file)
    with pytest.raises(process.Interrupted), process.start([str(script), "upgrade"], 600):
        eventually(lambda: len(pids(pid_file)) == 2, "the double starts")
        raise process.Interrupted(signum)  # as the handler of signals_raise() would
    shell, sleeper = pids(pid_file)
    eventually(lambda: not alive(shell) and not alive(sleeper), "the double and its child end")


def test_a_signal_just_after_the_child_started_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM delivered while pdctl starts the child, once the child runs (a loaded machine
    once delayed pdctl there): pdctl still stops the child's group before it exits."""
    pid_file = tmp_path / "pids"
    script = hanging_helm(tmp_path / "double", "template", pid_file)
    started = process.Child.__init__

    def start_then_signal(self: process.Child, *args: Any) -> None:
        started(self, *args)
        eventually(lambda: len(pids(pid_file)) == 2, "the double starts")
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before __init__ returns

    monkeypatch.setattr(process.Child, "__init__", start_then_signal)
    with process.signals_raise(), pytest.raises(process.Interrupted):
        process.run([str(script), "template"], 600)
    shell, sleeper = pids(pid_file)
    eventually(lambda: not alive(shell) and not alive(sleeper), "the double and its child end")


def test_a_child_started_on_another_thread_leaves_the_main_threads_hold() -> None:
    """validate runs helm on worker threads: one of them starting and ending a child neither
    drops a signal the main thread holds nor raises it on the worker."""
    import threading

    process._hold()
    try:
        process._raise(signal.SIGTERM, None)  # received while the main thread starts a child
        worker = threading.Thread(target=process.run, args=(["true"], 30))
        worker.start()
        worker.join()
        with pytest.raises(process.Interrupted) as raised:
            process._release()
        assert raised.value.signum == signal.SIGTERM
    finally:
        process._held = None


# process.run's loop (Child.wait) once per step of its first waits (each call, return and C call a
# profile hook sees), with SIGINT raised at that step under pdctl's entry point's handler.
EVERY_WAIT_STEP = """
import signal, sys
from pdctl import process
from tests.doubles.signal_steps import raising_at

steps = int(sys.argv[1])
for step in range(1, steps + 1):
    hook, _ = raising_at(step, signal.SIGINT)
    try:
        with process.signals_raise(), process.start(["sleep", "600"], 600) as child:
            sys.setprofile(hook)
            while child.wait(0.0) is None:
                pass
    except process.Interrupted:
        pass
    finally:
        sys.setprofile(None)
print("stopped at each of", steps, "steps")
"""


def test_a_signal_at_any_step_of_a_wait_still_stops_the_child() -> None:
    """Interrupted raised inside Popen.poll or wait, just after it took its lock, left the lock
    held: stopping the child then waited for ever on it (Ctrl-C never ended pdctl). Child calls
    Popen with the signals held (raised just after); here SIGINT comes at each step in turn."""
    steps = 40  # the old code hung at step 29
    done = subprocess.run(
        [sys.executable, "-c", EVERY_WAIT_STEP, str(steps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"stopped at each of {steps} steps" in done.stdout


def test_a_program_that_cannot_start_is_an_environment_problem(tmp_path: Path) -> None:
    not_a_program = tmp_path / "helm"
    not_a_program.write_text("no interpreter line")
    not_a_program.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match="cannot run"):
        process.run([str(not_a_program), "version"], deadline=30)


def test_helm_commands_that_wait_get_their_timeout_plus_a_margin(helm4: Helm) -> None:
    assert helm_mod.deadline(helm_mod.uninstall_args(helm4, "pd", "ns", 600)) == (
        600 + helm_mod.TIMEOUT_MARGIN
    )
    assert helm_mod.deadline(["version"]) == helm_mod.VERSION_DEADLINE
    assert helm_mod.deadline(["template", "--", "pd", "chart"]) == helm_mod.COMMAND_DEADLINE


# ---- a helm that hangs -------------------------------------------------------------------------


def test_a_helm_hanging_on_version_ends_pdctl_with_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pids"
    double = hanging_helm(tmp_path / "double", "version", pid_file)
    monkeypatch.setattr(helm_mod, "VERSION_DEADLINE", 1.0)
    result = runner.invoke(app, ["template", str(TUTORIAL_VALUES), "--helm", str(double)])
    assert result.exit_code == 3, result.output
    assert "error: helm version did not finish within 1s and was stopped" in result.output
    shell, sleeper = pids(pid_file)
    eventually(lambda: not alive(shell) and not alive(sleeper), "the double and its child end")


@pytest.mark.parametrize("command", ["template", "validate"])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_helm_and_removes_the_merged_values(
    tmp_path: Path, signum: int, code: int, command: str
) -> None:
    """pdctl as a subprocess, stopped while helm renders: the double's whole group ends, the
    temporary folder with the merged values (tokens included) is gone, no traceback. validate
    of one file runs helm on the main thread, as template does."""
    pid_file = tmp_path / "pids"
    double = hanging_helm(tmp_path / "double", "template", pid_file)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PDCTL_DEBUG": ""}
    pdctl = subprocess.Popen(
        [sys.executable, "-m", "pdctl", command, str(TUTORIAL_VALUES), "--helm", str(double)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: len(pids(pid_file)) == 2, "helm template starts")
        assert list(temp.glob("pdctl-values-*")), "the merged values are in TMPDIR meanwhile"
        pdctl.send_signal(signum)
        _, stderr = pdctl.communicate(timeout=PATIENCE)
    finally:
        if pdctl.poll() is None:
            pdctl.kill()
            pdctl.wait()
    assert pdctl.returncode == code, stderr
    assert f"error: stopped by {signal.Signals(signum).name}" in stderr
    assert "Traceback" not in stderr
    shell, sleeper = pids(pid_file)
    eventually(lambda: not alive(shell) and not alive(sleeper), "helm's process group ends")
    assert list(temp.iterdir()) == []


# ---- template --output-dir ---------------------------------------------------------------------


@pytest.fixture
def render_to(helm4: Helm) -> Callable[..., subprocess.CompletedProcess[str]]:
    def render(folder: Path, *more: str) -> subprocess.CompletedProcess[str]:
        args = ["template", str(TUTORIAL_VALUES), "--output-dir", str(folder), *more]
        result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
        return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.output)

    return render


def listing(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_output_dir_of_someone_else_is_refused(
    render_to: Callable[..., Any], tmp_path: Path
) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = render_to(folder)
    assert result.returncode == 2, result.stderr
    assert f"{folder} holds files pdctl did not write (it has no {MARKER})" in result.stderr
    assert listing(folder) == {"notes.txt": "mine"}


def test_force_replaces_a_folder_pdctl_did_not_write(
    render_to: Callable[..., Any], tmp_path: Path
) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert render_to(folder, "--force").returncode == 0
    files = listing(folder)
    assert "notes.txt" not in files and MARKER in files
    assert any(name.endswith("deployment-router.yaml") for name in files)


def test_a_reused_output_dir_holds_only_the_new_render(
    render_to: Callable[..., Any], tmp_path: Path
) -> None:
    fresh, reused = tmp_path / "fresh", tmp_path / "reused"
    expected = render_to(fresh, "--summary", "-o", "json")
    assert expected.returncode == 0, expected.stderr
    assert render_to(reused).returncode == 0
    stale = reused / "pd-stack" / "templates" / "stale-service.yaml"
    stale.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: stale\n")
    again = render_to(reused, "--summary", "-o", "json")
    assert again.returncode == 0, again.stderr
    assert again.stdout == expected.stdout  # the stale Service is not counted
    assert listing(reused) == listing(fresh)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fresh", "reused"]


def test_a_failed_render_leaves_the_old_folder_as_it_was(
    render_to: Callable[..., Any], tmp_path: Path
) -> None:
    folder = tmp_path / "manifests"
    assert render_to(folder).returncode == 0
    before = listing(folder)
    # The chart's schema refuses this and helm says so (pdctl's checks skipped to reach helm).
    failed = render_to(folder, "--skip-validation", "--set", "routerSpec.replicaCount=-1")
    assert failed.returncode == 1, failed.stderr
    assert "helm template failed" in failed.stderr
    assert listing(folder) == before
    assert [path.name for path in tmp_path.iterdir()] == ["manifests"]
