"""Key paths into a values document, and how they are written for people."""

from __future__ import annotations

from collections.abc import Iterable

KeyPath = tuple[str | int, ...]


def format_path(path: Iterable[str | int]) -> str:
    """("a", "b", 0, "c") -> "a.b[0].c"."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"
