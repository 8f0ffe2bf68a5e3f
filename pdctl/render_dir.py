"""The folder a render is written to (`pdctl template --output-dir`): pdctl's own, replaced whole.

A folder pdctl wrote holds MARKER. Any other folder that is not empty is refused unless `force`
(its files would mix with the render's, and a summary would count them). The render goes to a new
folder beside the target, which replaces the target only once complete: a failed or interrupted
render leaves the old folder as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pdctl.errors import UsageError

MARKER = ".pdctl-render"
_MARKER_TEXT = "Written by pdctl template, which replaces this folder whole on each render.\n"


def check(target: Path, force: bool = False) -> None:
    """UsageError unless `target` is absent, empty, pdctl's own, or `force` allows replacing it."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise UsageError(f"{target} is not a folder: name a folder to write the render into")
    if force or not target.exists() or (target / MARKER).is_file() or not any(target.iterdir()):
        return
    raise UsageError(
        f"{target} holds files pdctl did not write (it has no {MARKER})",
        hint="name a new or empty folder, or pass --force to replace this one and all it holds",
    )


@contextmanager
def replacing(target: Path, force: bool = False) -> Iterator[Path]:
    """A new folder beside `target` to render into; it replaces `target` when the block ends
    without an error, and is removed otherwise."""
    check(target, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.pdctl-new-", dir=target.parent))
    try:
        yield staging
        (staging / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
        _swap(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already after a swap


def _swap(new: Path, target: Path) -> None:
    if not target.exists():
        new.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.pdctl-old-", dir=target.parent))
    target.replace(old)  # a folder renamed onto an empty one replaces it
    try:
        new.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
