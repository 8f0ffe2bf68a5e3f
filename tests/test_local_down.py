"""`pdctl down` signals only what `pdctl up` provably started (pdctl.local.ownership): a state
file whose pids now name other processes (a killed supervisor, pids reused) leaves them alive;
the state then says what is true (`dead` in status, `stopped` after down); and a `down` while
`up` still renders stops that `up` cleanly (no traceback, no release afterwards)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.redteam.clients import alive
from pdctl.cli.app import app
from pdctl.local import lifecycle, ownership, state
from tests.helpers import ROOT

runner = CliRunner()
RELEASE = "pd"
DEADLINE = 60.0  # seconds: a bound on waits for processes, never a measurement


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived process that is not the release's, leading a process group of its own: `cat`,
    which echoes a line while it lives (clients.alive)."""
    child = subprocess.Popen(
        ["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    yield child
    child.kill()
    child.wait()


def until(condition: Any, what: str) -> None:
    ends = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < ends, f"{what}: not within {DEADLINE:g} s"
        time.sleep(0.05)


def stale_state(pid: int, owners: dict[str, Any] | None) -> None:
    """The state a supervisor killed with SIGKILL left: `ready`, its lock free."""
    folder = state.Folder.of(RELEASE)
    folder.path.mkdir(parents=True)
    found: dict[str, Any] = {
        "release": RELEASE,
        "status": state.READY,
        "detail": "",
        "supervisor": pid,
        "engine": "sim",
        "router": None,
        "engines": [],
        "logs": str(folder.logs),
        "pids": {"engine": pid},
    }
    if owners is not None:
        found["owners"] = owners
    folder.write_state(found)


def recycled(pid: int) -> dict[str, Any]:
    """An identity for `pid` as `up` would have recorded another process (another start time)."""
    now = ownership.record(pid)
    assert now is not None
    return {**now.as_dict(), "start": now.start - 1}


@pytest.mark.parametrize("form", ["recycled", "no-identity"])
def test_down_leaves_a_process_that_reused_a_recorded_pid_alive(
    form: str, state_home: Path, stranger: subprocess.Popen[bytes]
) -> None:
    owners = (
        {"supervisor": recycled(stranger.pid), "engine": recycled(stranger.pid)}
        if form == "recycled"
        else None  # a state that records no identity proves nothing
    )
    stale_state(stranger.pid, owners)
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 0, result.output
    assert "its supervisor ended without stopping it" in result.stderr
    assert alive(stranger)
    after = state.Folder.of(RELEASE).read_state()
    assert after is not None and after["status"] == state.STOPPED


def test_down_kills_what_a_killed_supervisor_left_when_it_is_provably_ours(
    state_home: Path, stranger: subprocess.Popen[bytes]
) -> None:
    mine = ownership.record(stranger.pid)
    assert mine is not None and mine.cmdline == ("cat",)
    stale_state(stranger.pid, {"engine": mine.as_dict()})
    assert runner.invoke(app, ["down"]).exit_code == 0
    until(lambda: stranger.poll() is not None, "the left process ends")


def test_status_says_a_release_whose_supervisor_was_killed_is_dead(
    state_home: Path, stranger: subprocess.Popen[bytes]
) -> None:
    stale_state(stranger.pid, {"supervisor": recycled(stranger.pid)})
    found = lifecycle.status(RELEASE)
    assert found is not None
    assert found["status"] == state.DEAD and found["up"] is False
    shown = runner.invoke(app, ["status"])
    assert shown.exit_code == 1 and "dead" in shown.stdout
    assert lifecycle.endpoints(RELEASE) is None


def test_a_signal_reaches_only_the_recorded_process(
    stranger: subprocess.Popen[bytes],
) -> None:
    mine = ownership.record(stranger.pid)
    assert mine is not None and mine.cmdline == ("cat",)
    other = ownership.Identity.from_dict(recycled(stranger.pid))
    assert other is not None
    assert not ownership.signal(other, 9) and not ownership.signal_group(other, 9)
    assert alive(stranger)
    assert ownership.group_members(stranger.pid) == [stranger.pid]
    assert ownership.signal_group(mine, 15)
    until(lambda: stranger.poll() is not None, "the recorded process ends")
    assert not ownership.signal(mine, 15)  # ended: nothing to signal


def test_a_process_caught_inside_its_exec_is_recorded_once_its_command_line_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Popen returns a few microseconds before the kernel sets the new program's command line:
    read then, /proc/PID/cmdline is empty (about once in a thousand starts under CPU load), and an
    identity with no command line never matches the process again, so `down` would leave it
    running. `record` reads again until it is set (here: a /proc of the test's own, whose
    command line appears at the first pause)."""
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "stat").write_text("42 (cat) S " + " ".join(["1"] * 18) + " 777 0 0\n")
    cmdline = proc / "42" / "cmdline"
    cmdline.write_bytes(b"")
    monkeypatch.setattr(ownership, "PROC", proc)
    monkeypatch.setattr(ownership, "_pause", lambda: cmdline.write_bytes(b"cat\0"))
    caught = ownership.identify(42)
    assert caught is not None and caught.cmdline == () and caught.start == 777
    assert ownership.record(42) == ownership.Identity(42, 777, ("cat",))


HOLD = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_down_gives_up_at_its_deadline_when_the_lock_holder_is_not_provably_ours(
    state_home: Path, stranger: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock file names a process that is not the one holding the lock (a stale name):
    nothing is signalled, and down ends with an error instead of waiting on the lock forever."""
    monkeypatch.setattr(lifecycle, "STOP_WAIT", 0.2)
    monkeypatch.setattr(lifecycle, "KILL_WAIT", 0.2)
    stale_state(stranger.pid, {"supervisor": recycled(stranger.pid)})
    lock = state.Folder.of(RELEASE).path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        lock.write_text(json.dumps(recycled(stranger.pid)), encoding="utf-8")
        ended: dict[str, Any] = {}
        down = threading.Thread(target=lambda: ended.update(result=runner.invoke(app, ["down"])))
        down.start()
        down.join(DEADLINE)
        assert not down.is_alive(), "pdctl down waits on the lock without end"
        result = ended["result"]
        assert result.exit_code == 1, result.output
        assert "did not stop: its lock is still held" in result.stderr
        assert alive(stranger) and holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_without_proc_nothing_is_proven_and_nothing_signalled(
    stranger: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """macOS, the BSDs: no /proc, so no identity can be checked: no signal is sent."""
    mine = ownership.record(stranger.pid)
    assert mine is not None
    monkeypatch.setattr(ownership, "PROC", tmp_path / "no-proc")
    assert ownership.identify(stranger.pid) is None
    assert not ownership.signal(mine, 9) and not ownership.signal_group(mine, 9)
    assert alive(stranger)


SLOW_HELM = """#!/bin/sh
case "$1" in
  version) echo v3.17.2 ;;
  template) touch "{marker}"; exec sleep 300 ;;
  *) exit 1 ;;
esac
"""


def test_down_while_up_renders_stops_that_up_cleanly(state_home: Path, tmp_path: Path) -> None:
    """`up` holds the release's lock while helm renders: down stops it (SIGTERM, proven ours),
    up ends with no traceback and starts nothing; the state says stopped."""
    marker = tmp_path / "rendering"
    helm = tmp_path / "helm"
    helm.write_text(SLOW_HELM.replace("{marker}", str(marker)), encoding="utf-8")
    helm.chmod(0o755)
    values = tmp_path / "values.yaml"
    init = ["init", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--offline"]
    assert runner.invoke(app, [*init, "--mode", "pd", "--out", str(values)]).exit_code == 0
    argv = [sys.executable, "-m", "pdctl", "up", "-f", str(values), "--engine", "sim"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    up = subprocess.Popen(
        [*argv, "--helm", str(helm)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        until(lambda: marker.exists() or up.poll() is not None, "helm renders")
        assert up.poll() is None, up.communicate()
        found = lifecycle.status(RELEASE)
        assert found is not None and found["status"] == state.STARTING and found["up"]
        shown = runner.invoke(app, ["status"])
        assert shown.exit_code == 1 and "engines: not chosen yet" in shown.stdout, shown.output
        stopped = runner.invoke(app, ["down"])
        assert stopped.exit_code == 0, stopped.output
        _, err = up.communicate(timeout=DEADLINE)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    text = err.decode()
    assert up.returncode == 143 and "stopped by SIGTERM" in text, text
    assert "Traceback" not in text + stopped.output
    assert not state.Folder.of(RELEASE).held()
    after = state.Folder.of(RELEASE).read_state()
    assert after is not None and after["status"] == state.STOPPED
    assert not (state.Folder.of(RELEASE).path / "layout.json").exists()
