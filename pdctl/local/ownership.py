"""Whether a pid is still the process `pdctl up` started, so that `pdctl down` signals nothing
else.

A pid is reused once its process has ended and been reaped: a state file that names a pid names
whatever process holds that number now. So each process `up` starts is recorded with its
`Identity`: the pid, the start time the kernel gives it (field 22 of Linux's /proc/PID/stat,
clock ticks since boot: no two processes of one boot share a pid and a start time) and its
command line (/proc/PID/cmdline). A signal goes only to a process whose start time and command
line are still the recorded ones; on Linux through a pidfd, so that the process checked is the
process signalled. A process just started is recorded by `record`, which waits out the end of its
exec: Popen returns once the child's old program is gone, a few microseconds before the kernel
sets the new one's command line (read in between, /proc/PID/cmdline is empty: about once in a
thousand starts under CPU load), and an identity recorded then would never match the process.

A process group is signalled while its leader is still the recorded process, or, once the leader
has ended, while members of that group remain (Linux does not hand out a pid that is still a
process group's id, so those are the leader's children).

Without /proc (macOS, the BSDs) nothing can be proven: `identify` answers None, and `pdctl down`
signals only what the release's lock says (see pdctl.local.state) and names the rest.
"""

from __future__ import annotations

import os
import signal as signals
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
EXEC_WAIT = 5.0  # seconds `record` waits for a started process's command line (a bound only)


@dataclass(frozen=True)
class Identity:
    pid: int
    start: int  # /proc/PID/stat field 22: clock ticks after boot
    cmdline: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "start": self.start, "cmdline": list(self.cmdline)}

    @classmethod
    def from_dict(cls, data: Any) -> Identity | None:
        """The identity a state file recorded, or None when it is not one."""
        try:
            return cls(int(data["pid"]), int(data["start"]), tuple(map(str, data["cmdline"])))
        except (KeyError, TypeError, ValueError):
            return None


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 onwards), or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


def identify(pid: int) -> Identity | None:
    """The process that holds `pid` now; None when there is none (or no /proc to say)."""
    fields = _stat(pid)
    try:
        cmdline = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None  # gone, or a zombie: ended
    words = tuple(w.decode(errors="replace") for w in cmdline.split(b"\0") if w)
    return Identity(pid, int(fields[19]), words)


def record(pid: int) -> Identity | None:
    """The identity of a process this one has just started, once its exec has set its command
    line (see the module docstring); None when it has ended."""
    ends = time.monotonic() + EXEC_WAIT
    found = identify(pid)
    while found is not None and not found.cmdline and time.monotonic() < ends:
        _pause()
        found = identify(pid)
    return found


def _pause() -> None:
    time.sleep(0.001)


def is_ours(recorded: Identity) -> bool:
    return identify(recorded.pid) == recorded


def signal(recorded: Identity, signum: int) -> bool:
    """Send `signum` to the recorded process while it is still that process; whether it was."""
    try:
        pidfd = os.pidfd_open(recorded.pid)
    except ProcessLookupError:  # gone
        return False
    except (AttributeError, OSError):  # no pidfd here (Linux before 5.3): check, then signal
        return is_ours(recorded) and _kill(recorded.pid, signum)
    try:
        if not is_ours(recorded):  # checked while the pidfd pins this very process
            return False
        signals.pidfd_send_signal(pidfd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def _kill(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    members = []
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if entry.name.isdigit():
            fields = _stat(int(entry.name)) or []
            if fields[2:3] == [str(pgid)] and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def signal_group(recorded: Identity, signum: int) -> bool:
    """Send `signum` to the process group the recorded process leads, while the leader is still
    that process or, once it has ended, while the group has members; whether it did."""
    now = identify(recorded.pid)
    if now is not None and now != recorded:
        return False  # the pid is another process's now
    if now is None and not group_members(recorded.pid):
        return False  # the leader and its group have ended
    try:
        os.killpg(recorded.pid, signum)
    except ProcessLookupError:
        return False
    return True
