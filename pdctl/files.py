"""Reading a user's input file (values, model config, dataset, bench result) without trusting it,
and writing one (init's values, bench's report files, plots) whole, never through a symbolic
link already at its name.

Only regular files are read: a FIFO would block the open or the read forever, `/dev/zero` or
`/dev/urandom` never end, a directory is no file. Symbolic links are followed, then the target is
checked with os.stat before it is opened (opening some devices has effects of its own) and again
with os.fstat after (the path may have changed in between). At most `limit` bytes plus one are
read, whatever st_size says (files under /proc report 0; a file may grow while it is read), so a
file over its limit is refused without reading the rest. Standard input is read the same way.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from pdctl.errors import InputError

CHUNK = 64 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnreadableFile(InputError):
    """An input file that is missing, not a regular file, not text or too large."""

    def __init__(self, name: str, reason: str, too_large: bool = False) -> None:
        super().__init__(f"{name}: {reason}")
        self.reason = reason
        self.too_large = too_large


def _kind(mode: int) -> str | None:
    """What the file is when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _not_regular(mode: int) -> str | None:
    kind = _kind(mode)
    if kind is None:
        return None
    return f"{kind}, not a regular file; pdctl reads only regular files (- reads standard input)"


def _bounded(read: Any, name: str, limit: int) -> bytes:
    """At most limit bytes from read(n); UnreadableFile as soon as there is one more."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = read(min(CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UnreadableFile(
                name, f"larger than {_size(limit)}, the most pdctl reads here", too_large=True
            )


def _size(limit: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit} bytes"


def _os_error(name: str, error: OSError) -> UnreadableFile:
    if isinstance(error, FileNotFoundError):
        return UnreadableFile(name, "cannot be read: no such file")
    return UnreadableFile(name, f"cannot be read: {error.strerror or error}")


def read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes: a regular file (after symbolic links) of at most limit bytes."""
    name = str(path)
    try:
        problem = _not_regular(os.stat(path).st_mode)
        if problem:
            raise UnreadableFile(name, problem)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise _os_error(name, error) from None
    try:
        problem = _not_regular(os.fstat(fd).st_mode)
        if problem:
            raise UnreadableFile(name, problem)
        return _bounded(lambda n: os.read(fd, n), name, limit)
    except OSError as error:
        raise _os_error(name, error) from None
    finally:
        os.close(fd)


def read_stream(stream: BinaryIO, name: str, limit: int) -> bytes:
    """At most limit bytes of an open stream such as standard input."""
    try:
        return _bounded(stream.read, name, limit)
    except OSError as error:
        raise _os_error(name, error) from None


def text(data: bytes, name: str) -> str:
    """UTF-8 text, or UnreadableFile naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UnreadableFile(
            name,
            f"cannot be read as UTF-8 text (a binary file?): byte {error.start + 1}, line {line}",
        ) from None


def read_text(path: Path, limit: int) -> str:
    """A regular UTF-8 text file of at most limit bytes."""
    return text(read_bytes(path, limit), str(path))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(source: str, where: str, hint: str | None = None) -> Any:
    """JSON text as Python data; InputError (never RecursionError or ValueError) for text that is
    not JSON, nested too deeply for the parser, or holding a number Python will not convert
    (NaN and Infinity, which JSON does not have, included)."""
    try:
        return json.loads(source, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not JSON: {error.msg} (line {error.lineno})", hint) from None
    except RecursionError:
        raise InputError(f"{where}: not readable JSON: nested too deeply", hint) from None
    except ValueError as error:  # e.g. an integer of more than 4,300 digits
        raise InputError(f"{where}: not readable JSON: {error}", hint) from None


@contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A new file beside `path` to write, renamed over `path` when the block ends without an
    error (removed otherwise). A reader never sees half of it, and a write never follows a link:
    a symbolic link at `path` is replaced by the file, its target left as it was. A FIFO or
    device at `path` is refused, never written into (opening a FIFO to write waits for a reader
    forever)."""
    try:
        kind = _kind(os.stat(path).st_mode) if path.exists() else None
        if kind:
            raise InputError(f"{path}: {kind}, not a regular file; pdctl writes only regular files")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                yield out
            os.replace(staging, path)
        finally:
            if os.path.exists(staging):
                os.unlink(staging)
    except OSError as error:
        raise InputError(f"{path}: cannot write: {error.strerror or error}") from None


def write_text(path: Path, text: str) -> None:
    """Write a regular UTF-8 text file whole (`replacing`: never through a link at `path`)."""
    with replacing(path) as out:
        out.write(text.encode("utf-8"))
