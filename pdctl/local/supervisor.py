"""The supervisor of a local release: starts its processes (engines first, then the router), waits
until each answers its readiness path, then watches them until told to stop (SIGTERM, SIGINT: Ctrl-C
or `pdctl down`) or until one of them exits; then stops them all. Engines that share a GPU start one
after another, each once the one before is ready (pdctl.local.layout.start_waves says why); the
others together. One deadline holds for the whole start.

Each process runs in a process group of its own (so that stopping it reaches the programs it
started, as vLLM's engine core), with its output in a log file, and on Linux with
PR_SET_PDEATHSIG: should the supervisor die without stopping it (SIGKILL), the kernel sends it
SIGTERM. Stopping sends SIGTERM to each group, and SIGKILL to what is left GRACE seconds later.
While it runs, SIGINT and SIGTERM are noted, not raised (pdctl.process.signals_noted): it acts on
them between two looks at its processes, never in the middle of a call to subprocess or urllib.

`pdctl up` runs the supervisor as its own program (`python -m pdctl.local.supervisor FOLDER`, in
a new session, holding the release's lock), reading its progress lines from its standard output
until READY; `pdctl up --foreground` runs `supervise` in its own process. The GPU benchmark
harness (benchmarks/real_engines/run.py) starts its engines with `launch` and `wait_ready`, in the
same waves.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from pdctl import process
from pdctl.local import ownership, state
from pdctl.local.layout import SUPERVISOR, Layout, Process, gpus

READY = "READY"  # the last progress line of a supervisor whose release is up
GRACE = process.GRACE
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHANED = 128 + signal.SIGTERM  # a child whose parent died before it started: as if signalled
POLL = 0.2  # seconds between looks at the processes
PROFILING = "vLLM's start-up memory profiling measures the whole device"  # why engines wait

Running = list[tuple[Process, "subprocess.Popen[bytes]"]]


class StartFailed(Exception):
    """A process exited, or was not ready in time: the message says which, with its log's tail."""


def _die_with(parent: int) -> Callable[[], None]:
    """The child's part of PR_SET_PDEATHSIG (run between fork and exec): SIGTERM to it when the
    thread that forked it ends. A parent that died before the child asked has nobody left to
    signal it, so the child checks, after asking, that `parent` (this process's pid, taken before
    the fork) is still its parent, and exits (ORPHANED) before running anything when it is not.
    prctl is looked up here, in the parent: a child of a threaded process runs no loader code."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def child() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:
            os._exit(ORPHANED)

    return child


def launch(
    proc: Process, log: Path, extra_env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `proc` in a process group of its own, its output appended to `log`. Called from a
    thread that lives as long as the child (the main thread): PR_SET_PDEATHSIG fires when the
    thread that forked it ends, not the process."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with state.append(log) as out:
        return subprocess.Popen(
            proc.argv,
            env={**os.environ, **proc.env, **(extra_env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with(os.getpid()),
        )


def answers(url: str) -> bool:
    """Whether GET `url` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def tail(log: Path, lines: int = 30) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_ready(
    proc: Process,
    popen: subprocess.Popen[bytes],
    deadline: float,
    log: Path,
    check: Callable[[], None] = lambda: None,
) -> None:
    """Until `proc` answers its readiness path; StartFailed (with its log's tail) when it exits
    first or the monotonic `deadline` passes. `check` runs before each look (it may raise)."""
    while True:  # asked at least once, even past the deadline
        check()
        if popen.poll() is not None:
            raise StartFailed(f"{proc.name} exited with {popen.returncode}:\n{tail(log)}")
        if answers(proc.url + proc.ready_path):
            return
        if time.monotonic() >= deadline:
            raise StartFailed(f"{proc.name} was not ready in time:\n{tail(log)}")
        time.sleep(POLL)


def waiting(waves: list[list[Process]]) -> list[str]:
    """A line for each engine that waits for earlier ones on its GPUs (layout.start_waves): which,
    and why."""
    lines = []
    for n, wave in enumerate(waves):
        earlier = [other for before in waves[:n] for other in before]
        for proc in wave:
            ahead = [other for other in earlier if set(gpus(other)) & set(gpus(proc))]
            if ahead:
                shared = [d for d in gpus(proc) if any(d in gpus(other) for other in ahead)]
                lines.append(
                    f"{proc.name} waits for {', '.join(other.name for other in ahead)} (same GPU "
                    f"{','.join(shared)}): {PROFILING}"
                )
    return lines


def stop(popens: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each one's process group; SIGKILL to what is left GRACE seconds later."""
    for popen in popens:
        if popen.poll() is None:
            process.signal_group(popen.pid, signal.SIGTERM)
    ends = time.monotonic() + GRACE
    for popen in popens:
        try:
            popen.wait(timeout=max(0.0, ends - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        process.signal_group(popen.pid, signal.SIGKILL)  # the group's stragglers too
        popen.wait()


def _identity(pid: int) -> dict[str, object] | None:
    """What `pdctl down` checks before it signals `pid`, a process this one started (taken once
    its exec has set its command line: ownership.record)."""
    found = ownership.record(pid)
    return found.as_dict() if found else None


class Supervisor:
    """The processes of one local release (see the module docstring)."""

    def __init__(self, folder: state.Folder, say: Callable[[str], None]) -> None:
        self.folder = folder
        self.layout: Layout = folder.read_layout()
        self.say = say
        self.running: Running = []
        self.state: dict[str, object] = {}
        self.noted: list[int] = []  # the signals received (process.signals_noted): stop
        me = ownership.identify(os.getpid())
        self.owners = {"supervisor": me.as_dict() if me else None}  # what `pdctl down` may signal

    def check(self) -> None:
        """Interrupted, between two steps, once a signal was received."""
        process.raise_noted(self.noted)

    def record(self, status: str, detail: str = "") -> None:
        self.state.update(status=status, detail=detail)
        self.folder.write_state(self.state)

    def start(self, timeout: float) -> None:
        layout = self.layout
        self.state = {
            "release": layout.release,
            "supervisor": os.getpid(),
            "engine": layout.engine,
            "router": layout.router.url if layout.router else None,
            "router_by": layout.router_by,
            "engines": [{"name": e.name, "role": e.role, "url": e.url} for e in layout.engines],
            "logs": str(self.folder.logs),
            "pids": {},
            "owners": self.owners,
        }
        self.record(state.STARTING)
        deadline = time.monotonic() + timeout
        waves = layout.engine_waves()
        for line in waiting(waves):
            self.say(line)
        for group in [*waves, [layout.router] if layout.router else []]:  # router last
            self.check()
            started = [(p, launch(p, self.folder.log(p.name))) for p in group]
            self.running += started
            self.state["pids"] = {p.name: popen.pid for p, popen in self.running}
            self.owners.update({p.name: _identity(popen.pid) for p, popen in started})
            self.record(state.STARTING)
            for proc, popen in started:
                wait_ready(proc, popen, deadline, self.folder.log(proc.name), self.check)
                self.say(f"{proc.name} ({proc.role}) ready at {proc.url}")
        self.record(state.READY)

    def watch(self, tick: Callable[[], None] = lambda: None) -> str:
        """Until one process exits: why (the name, its exit status, its log's tail)."""
        while True:
            tick()
            self.check()
            for proc, popen in self.running:
                if popen.poll() is not None:
                    log = self.folder.log(proc.name)
                    return f"{proc.name} exited with {popen.returncode}:\n{tail(log, 10)}"
            time.sleep(POLL)

    def stop(self) -> None:
        stop([popen for _, popen in self.running])


def supervise(
    folder: state.Folder,
    timeout: float,
    say: Callable[[str], None],
    on_ready: Callable[[], None] = lambda: None,
    tick: Callable[[], None] = lambda: None,
) -> int:
    """Start the release, then watch it until a signal (SIGINT, SIGTERM: exit 0) or a process's
    end (exit 1); either way stop them all. The state records the outcome."""
    supervisor = Supervisor(folder, say)
    outcome, detail = state.STOPPED, ""
    with process.signals_noted() as noted:
        supervisor.noted = noted
        try:
            supervisor.start(timeout)
            say(READY)
            on_ready()
            outcome, detail = state.FAILED, supervisor.watch(tick)
            say(f"stopping the release: {detail}")
        except StartFailed as failed:
            outcome, detail = state.FAILED, str(failed)
            say(f"FAILED: {detail}")
        except process.Interrupted as interrupted:
            detail = f"stopped by {interrupted}"
        finally:
            supervisor.stop()  # a second signal is noted, and stops nothing halfway
            supervisor.record(outcome, detail)
    return 1 if outcome == state.FAILED else 0


def _detach(log: IO[bytes]) -> None:
    """From now on print into the supervisor's log, not to `pdctl up` (which has returned)."""
    sys.stdout.flush()
    os.dup2(log.fileno(), sys.stdout.fileno())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m pdctl.local.supervisor")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args()
    folder = state.Folder(args.folder)
    folder.mark_holder()  # the lock it inherited from `pdctl up` is this process's now
    with state.append(folder.log(SUPERVISOR)) as log:

        def say(line: str) -> None:
            print(line, flush=True)

        with process.signals_raise():
            return supervise(folder, args.timeout, say, on_ready=lambda: _detach(log))


if __name__ == "__main__":
    sys.exit(main())
