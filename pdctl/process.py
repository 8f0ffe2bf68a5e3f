"""The one way pdctl runs another program: with a deadline, in its own process group, stopped
whatever way pdctl stops.

A child runs in a new session (its own process group), so a terminal's Ctrl-C does not reach it
directly: pdctl forwards SIGINT or SIGTERM to the whole group, waits GRACE seconds, then sends
SIGKILL. The same happens when the child runs past its deadline, which is then an
EnvironmentProblem naming the command and the time it had. Output goes to temporary files, not
pipes (a pipe nobody reads while the child waits could fill up and stop it).

`signals_raise()` (pdctl's entry point installs it) turns SIGINT and SIGTERM into `Interrupted`,
so every `with` block unwinds (temporary files removed, children stopped) before pdctl exits with
128 + the signal's number. While the main thread starts a child, a signal is held until pdctl
knows the child's process group, then raised: one that arrived just after the child started
would otherwise end pdctl and leave the child running. Children that other threads wait on (files
validated side by side) are stopped by `stop_all()` when the main thread is interrupted: only the
main thread gets the signal. Each call into a child's Popen (poll, reaping it) holds the signals
too: Interrupted in its middle could leave Popen's lock held, and stopping the child would then
wait for ever. A loop that watches children for long (the local release's supervisor) uses
`signals_noted()` instead: a signal is noted, and the loop raises it between its steps.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from types import FrameType
from typing import IO, TypeVar

from pdctl.errors import EnvironmentProblem

GRACE = 5.0  # seconds between the forwarded signal and SIGKILL
T = TypeVar("T")
FORWARDED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """pdctl received SIGINT or SIGTERM (a BaseException, like KeyboardInterrupt: no `except
    Exception` swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


# The signals received while the main thread starts a child (None: not starting one).
_held: list[int] | None = None
# Every running child, and the signal that stop_all() forwarded (None: none yet).
_running: set[Child] = set()
_running_lock = threading.Lock()
_stopped_by: int | None = None


def _raise(signum: int, _frame: FrameType | None) -> None:
    if _held is not None:
        _held.append(signum)
        return
    raise Interrupted(signum)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _hold() -> None:
    """Hold SIGINT and SIGTERM from now (on the main thread, where signal handlers run; other
    threads never get Interrupted)."""
    global _held
    if _on_main_thread():
        _held = []


def _release() -> None:
    """Raise signals again, and a held one now (on the main thread)."""
    global _held
    if not _on_main_thread():
        return
    held, _held = _held, None
    if held:
        raise Interrupted(held[0])


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block (main thread only), SIGINT and SIGTERM raise Interrupted."""
    previous = {signum: signal.signal(signum, _raise) for signum in FORWARDED}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def signals_noted() -> Iterator[list[int]]:
    """Within the block (main thread), SIGINT and SIGTERM raise nothing: each is noted in the list
    it yields, for a loop that looks at it between its steps (`raise_noted`). Interrupted raised
    in the middle of library code can leave it broken: Popen.poll, interrupted just after taking
    its lock, keeps it, and every later wait for that child (stopping it) waits for ever."""
    noted: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        noted.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in FORWARDED}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def raise_noted(noted: list[int]) -> None:
    """Interrupted for the first signal `signals_noted` noted, if one was."""
    if noted:
        raise Interrupted(noted[0])


class Child:
    """A program started by start(); see the module docstring."""

    def __init__(self, argv: Sequence[str], deadline: float, what: str, out: IO[str], err: IO[str]):
        self.what = what
        self.deadline = deadline
        self._out, self._err = out, err
        try:
            self._process = subprocess.Popen(
                list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
        except OSError as error:
            raise EnvironmentProblem(f"cannot run {argv[0]}: {error.strerror or error}") from None
        self._ends = _now() + deadline

    def poll(self) -> int | None:
        return _uninterrupted(self._process.poll)

    def wait(self, seconds: float) -> int | None:
        """Wait up to `seconds` for the child to end; its exit status, or None while it runs.
        Past the deadline the child is stopped and EnvironmentProblem raised."""
        status = self._exit_status(max(0.0, min(seconds, self._ends - _now())))
        if status is not None or _now() < self._ends:
            return status
        self.stop(signal.SIGTERM)
        raise EnvironmentProblem(
            f"{self.what} did not finish within {self.deadline:g}s and was stopped"
        )

    def stop(self, signum: int) -> None:
        """Send `signum` to the child's process group; once the group has ended, or GRACE
        seconds later, SIGKILL whatever is left of it (a member may ignore `signum`, as a shell's
        background job ignores SIGINT)."""
        if self.poll() is not None:
            return
        signal_group(self._process.pid, signum)
        try:
            self._group_ends(GRACE)
        finally:  # also when a second signal interrupts the grace period
            signal_group(self._process.pid, signal.SIGKILL)
            _uninterrupted(self._process.wait)

    def _exit_status(self, seconds: float) -> int | None:
        """The child's exit status once it ends within `seconds`, else None. Woken by its end
        (a pidfd), Popen only reaps it, with signals held (_uninterrupted); without a pidfd,
        Popen's own wait polls, interruptible as before."""
        if self._process.returncode is None and _sleep_until_exit(self._process.pid, seconds):
            seconds = 0.0
        try:
            if seconds == 0.0:
                return _uninterrupted(lambda: self._process.wait(timeout=0.0))
            return self._process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def _group_ends(self, seconds: float) -> None:
        ends = _now() + seconds
        if self._exit_status(seconds) is None:
            return
        while _now() < ends and signal_group(self._process.pid, 0):
            time.sleep(0.05)

    def finish(self) -> subprocess.CompletedProcess[str]:
        """Wait for the child to end (at most its deadline, see wait); what it printed."""
        while self.wait(self.deadline) is None:
            pass
        return self.result()

    def result(self) -> subprocess.CompletedProcess[str]:
        """What the ended child printed, and its exit status."""
        self._out.seek(0)
        self._err.seek(0)
        return subprocess.CompletedProcess(
            self._process.args, self._process.wait(), self._out.read(), self._err.read()
        )


def _uninterrupted(call: Callable[[], T]) -> T:
    """`call()` (a Popen method) with SIGINT and SIGTERM held on the main thread, one received
    raised after it: Interrupted in the middle of Popen.poll or wait can leave the Popen's lock
    held, and every later wait for that child (stopping it) then waits for ever."""
    if _held is not None:  # held already, by the caller
        return call()
    _hold()
    try:
        return call()
    finally:
        _release()


def stop_all(signum: int) -> None:
    """Forward `signum` to every running child, whichever thread waits on it, and start no more
    (start() then raises Interrupted): for a main thread interrupted while workers run helm."""
    global _stopped_by
    with _running_lock:
        _stopped_by = signum
        children = list(_running)
    for child in children:
        child.stop(signum)


@contextmanager
def _tracked(child: Child) -> Iterator[None]:
    with _running_lock:
        _running.add(child)
        stopped_by = _stopped_by
    try:
        if stopped_by is not None:
            raise Interrupted(stopped_by)
        yield
    finally:
        with _running_lock:
            _running.discard(child)


@contextmanager
def start(argv: Sequence[str], deadline: float, what: str | None = None) -> Iterator[Child]:
    """Run `argv` in the background for the block; a child still running when the block ends
    (an error, Interrupted) is stopped: the signal received forwarded, else SIGTERM."""
    with ExitStack() as stack:
        out = stack.enter_context(_output_file())
        err = stack.enter_context(_output_file())
        _hold()
        try:
            child = Child(argv, deadline, what or describe(argv), out, err)
        except BaseException:
            _release()
            raise
        try:
            _release()
            with _tracked(child):
                yield child
        except Interrupted as interrupted:
            child.stop(interrupted.signum)
            raise
        finally:
            child.stop(signal.SIGTERM)


def run(
    argv: Sequence[str], deadline: float, what: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to its end (at most `deadline` seconds, see Child.wait)."""
    with start(argv, deadline, what) as child:
        return child.finish()


def describe(argv: Sequence[str]) -> str:
    """The program's name and its leading sub-command words: `helm get manifest`."""
    words = [os.path.basename(argv[0])]
    for arg in argv[1:]:
        if arg.startswith("-"):
            break
        words.append(arg)
    return " ".join(words[:3])


def _sleep_until_exit(pid: int, seconds: float) -> bool:
    """Sleep until the process ends or `seconds` pass, woken by its end (a pidfd, Linux 5.3+):
    Popen.wait(timeout) polls, with sleeps that grow to 50 ms, so it wakes up to 50 ms after
    the child ended. False, having slept not at all, where there is no pidfd."""
    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or the child already reaped
        return False
    try:
        poller = select.poll()
        poller.register(descriptor, select.POLLIN)
        poller.poll(seconds * 1000)
    finally:
        os.close(descriptor)
    return True


def _output_file() -> IO[str]:
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


def signal_group(pgid: int, signum: int) -> bool:
    """Whether the group still had a member to signal."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:  # the group has ended
        return False
    return True


def _now() -> float:
    return time.monotonic()
