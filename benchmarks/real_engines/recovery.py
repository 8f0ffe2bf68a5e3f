"""The recovery loop of `run.py run --phase recovery`: with PD proven, kill one side of the pair,
start it again, and prove PD again, timing it. It takes callables, so the same loop runs on a GPU
host against vLLM and in the tests against the engine TEST DOUBLES (tests/doubles/vllm_engine.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Proof:
    """One attempt to prove PD: whether it was proven, and the checks that failed (id: summary)."""

    proven: bool
    failed: list[str] = field(default_factory=list)


def recover(
    prove: Callable[[], Proof],
    kill: Callable[[], None],
    start: Callable[[], None],
    limit: float = 300.0,
    interval: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Prove PD, `kill` one side, `start` it again (in a thread: it may block until the process
    answers /health, as a real engine's start does for minutes), and `prove` every `interval`
    seconds until PD is proven again or `limit` seconds have passed since the kill.

    Returns `recovered`, `seconds_to_recovery` (kill to the first proof, None when not recovered),
    `restart_seconds` (kill to `start` returning), `start_error`, and `attempts`: each with `at`
    (seconds after the kill), `proven` and `failed`."""
    before = prove()
    result: dict[str, Any] = {
        "proven_before": before.proven,
        "failed_before": before.failed,
        "recovered": False,
        "seconds_to_recovery": None,
        "restart_seconds": None,
        "start_error": None,
        "limit_seconds": limit,
        "attempts": [],
    }
    if not before.proven:
        return result
    killed = clock()
    kill()

    def restart() -> None:
        try:
            start()
        except BaseException as error:  # noqa: BLE001 (recorded; the loop ends at the limit)
            result["start_error"] = f"{type(error).__name__}: {error}"
        result["restart_seconds"] = round(clock() - killed, 2)

    starter = threading.Thread(target=restart, daemon=True)
    starter.start()
    while True:
        proof = prove()
        at = round(clock() - killed, 2)
        result["attempts"].append({"at": at, "proven": proof.proven, "failed": proof.failed})
        if proof.proven and result["restart_seconds"] is not None:
            result["recovered"] = True
            result["seconds_to_recovery"] = at
            break
        if at >= limit:
            break
        sleep(interval)
    return result


def failures_seen(result: dict[str, Any]) -> dict[str, int]:
    """How often each failed check was seen during the recovery (check id: attempts)."""
    seen: dict[str, int] = {}
    for attempt in result["attempts"]:
        for failure in attempt["failed"]:
            check = failure.split(":", 1)[0]
            seen[check] = seen.get(check, 0) + 1
    return seen
