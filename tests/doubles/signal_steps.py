"""A profile hook that raises a signal at one step of the code it watches (each call, return and
C call sys.setprofile sees counts as a step), for the tests that stop a wait at every step of it
and show no step hangs. `seen()` says how many steps the hook saw."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

Hook = Callable[[FrameType, str, Any], None]


def raising_at(
    step: int, signum: int, blocking: frozenset[str] = frozenset()
) -> tuple[Hook, Callable[[], int]]:
    """A hook that raises `signum` at step `step`, and at each C call named in `blocking` (so
    that a wait past the last step ends too); and a function that says how many steps it saw."""
    seen = 0

    def hook(_frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == step or (event == "c_call" and getattr(arg, "__name__", "") in blocking):
            signal.raise_signal(signum)

    return hook, lambda: seen
