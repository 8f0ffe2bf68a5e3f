"""Where a local release (`pdctl up`) keeps what it needs between commands: a folder per release
under the user's state folder ($XDG_STATE_HOME/pdctl/local/RELEASE, by default
~/.local/state/pdctl/local/RELEASE) holding

- `lock`: held (flock) by `pdctl up` while it renders and starts the supervisor, then by the
  supervisor for as long as it runs: a release is up (or coming up) exactly while its lock is
  held, so a second `up` is refused and a crashed supervisor leaves no stale claim behind. The
  lock file names its holder (pdctl.local.ownership's identity), which `pdctl down` signals;
- `layout.json`: the processes to run (pdctl.local.layout), written by `up`;
- `state.json`: what runs now: the supervisor's pid, each process's pid, identity, URL and
  role, and the status (starting, ready, failed, stopped) with why. A state whose lock is free
  but whose status says it runs (its supervisor was killed) is reported `dead`;
- `logs/`: each process's output, kept after `down` until the next `up` of the release.

Nothing in the folder is written through a symbolic link (O_NOFOLLOW; the release's folder itself
must not be one): a link placed there would make `up` write where it points.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pdctl.errors import InputError, UsageError
from pdctl.local import ownership
from pdctl.local.layout import Layout, Process

STARTING, READY, FAILED, STOPPED = "starting", "ready", "failed", "stopped"
DEAD = "dead"  # said, never written: the state says it runs, its lock is free


def root() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pdctl" / "local"


@dataclass(frozen=True)
class Folder:
    path: Path

    @classmethod
    def of(cls, release: str) -> Folder:
        return cls(root() / release)

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    # ---- the lock
    def claim(self, release: str) -> int:
        """Take the release's lock (an open file descriptor holding it): UsageError when its
        supervisor runs already."""
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)  # the processes' env and logs
        if self.path.is_symlink():
            raise _linked(self.path)
        fd = _open(self.path / "lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder()
            pid = holder.pid if holder else "?"
            raise UsageError(
                f"the local release {release} is up already (supervisor pid {pid})",
                hint=f"pdctl down --release {release} first, or choose another --release",
            ) from None
        self.mark_holder()
        return fd

    def mark_holder(self) -> None:
        """Name this process as the lock's holder (the lock is held: by `up`, or by the
        supervisor that inherited it)."""
        me = ownership.identify(os.getpid())
        fd = os.open(self.path / "lock", os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(me.as_dict() if me else {}).encode())
        finally:
            os.close(fd)

    def holder(self) -> ownership.Identity | None:
        """The process the lock file names as its holder (None: unnamed, or being rewritten)."""
        try:
            fd = os.open(self.path / "lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                text = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
            return ownership.Identity.from_dict(json.loads(text))
        except (OSError, ValueError):
            return None

    def held(self) -> bool:
        """Whether a supervisor holds the release's lock (the release is up)."""
        if not (self.path / "lock").is_file():
            return False
        fd = os.open(self.path / "lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases a lock taken just now
        return False

    # ---- the files
    def write_layout(self, layout: Layout) -> None:
        _write(self.path / "layout.json", asdict(layout))

    def read_layout(self) -> Layout:
        data = json.loads((self.path / "layout.json").read_text(encoding="utf-8"))
        engines = [Process(**e) for e in data.pop("engines")]
        router = data.pop("router")
        return Layout(engines, Process(**router) if router else None, **data)

    def write_state(self, state: dict[str, Any]) -> None:
        _write(self.path / "state.json", state)

    def read_state(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads((self.path / "state.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data


def emptied(path: Path) -> None:
    """An empty folder at `path` (parents made): what was there removed; a link found in its
    place is removed, never followed."""
    if path.is_symlink():
        path.unlink()
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, mode=0o700)


def _linked(path: Path) -> InputError:
    return InputError(
        f"{path}: a symbolic link; pdctl up follows no link in its state folder",
        hint=f"remove it (the state folder is {path.parent})",
    )


def _open(path: Path, flags: int) -> int:
    """os.open of a file in the state folder, never through a symbolic link."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _linked(path) from None
        raise


def append(path: Path) -> BinaryIO:
    """A log in the state folder, opened to append (created if missing), not through a link."""
    return os.fdopen(_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


def _write(path: Path, data: dict[str, Any]) -> None:
    """Whole or not at all: a reader never sees half a file."""
    partial = path.with_name(f".{path.name}.partial")
    with os.fdopen(
        _open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8"
    ) as out:
        out.write(json.dumps(data, indent=1))
    partial.replace(path)


def live(release: str) -> dict[str, Any] | None:
    """The state of the release's local processes when they are up and ready, else None."""
    folder = Folder.of(release)
    if not folder.held():
        return None
    state = folder.read_state()
    return state if state and state.get("status") == READY else None
