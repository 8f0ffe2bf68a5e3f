"""Printing a release for deploy and status: the pod table, the live view while deploy waits,
the evidence of pods that did not become Ready, and the changes of an upgrade."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pdctl.cli import _output

if TYPE_CHECKING:
    from pdctl.cluster import Pod
    from pdctl.release import Change, Group


def why(pod: Pod) -> str:
    """Why a pod is not Ready, in one line: its reason and the scheduler's or kubelet's words."""
    if pod.ready:
        return ""
    text = pod.reason or pod.phase
    detail = pod.message or (pod.events[-1].split(": ", 1)[-1] if pod.events else None)
    return f"{text}: {detail}" if detail else text


def _cell(text: str) -> Text:
    """A table cell of the cluster's words: no markup, secrets masked, controls escaped."""
    return Text(_output.clean(text))


def pod_table(groups: Sequence[Group], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("pool", "role", "ready", "pod", "phase", "restarts", "why not ready"):
        table.add_column(column, overflow="fold")
    for group in groups:
        counts = f"{group.ready}/{group.replicas}"
        if not group.pods:
            table.add_row(group.name, group.role, counts, "(no pod yet)", "", "", "")
        for index, pod in enumerate(group.pods):
            table.add_row(
                group.name if index == 0 else "",
                group.role if index == 0 else "",
                counts if index == 0 else "",
                _cell(pod.name),
                _cell("Terminating" if pod.terminating else pod.phase),
                str(pod.restarts),
                _cell(why(pod)),
            )
    return table


def pool_line(groups: Sequence[Group]) -> str:
    return ", ".join(
        f"{g.name} ({g.role}) {g.ready}/{g.replicas}" if g.role != "router" else
        f"router {g.ready}/{g.replicas}"
        for g in groups
    )  # fmt: skip


def evidence(stuck: Sequence[tuple[Group, Pod]]) -> list[str]:
    """Each pod that did not become Ready: its pool, why, its warnings, its last log lines."""
    lines = []
    for group, pod in stuck:
        lines.append(
            f"  {pod.name} ({group.name}, {group.role}): {pod.phase}, restarts {pod.restarts}, "
            f"{why(pod)}"
        )
        lines += [f"    event {event}" for event in pod.events]
        if pod.logs:
            lines.append("    last log lines:")
            lines += [f"      | {line}" for line in pod.logs]
    return lines


def change_lines(action: str, release: str, changes: Sequence[Change]) -> list[str]:
    if action == "install":
        kinds: dict[str, int] = {}
        for change in changes:
            kinds[change.kind] = kinds.get(change.kind, 0) + 1
        listed = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        return [f"install of release {release}: {len(changes)} objects ({listed})"]
    if not changes:
        return [f"upgrade of release {release}: no object changes"]
    lines = [f"upgrade of release {release}: {len(changes)} object(s) change"]
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for change in changes:
        lines.append(f"  {marks[change.change]} {change.kind} {change.name} ({change.change})")
        lines += [f"      {line}" for line in change.diff.splitlines()]
    return lines


class LiveView:
    """deploy's Reporter: a live table on a terminal; elsewhere (CI logs, pipes) one line each
    time a pod's state changes."""

    def __init__(self, release: str) -> None:
        self.console = Console(stderr=True)
        self.release = release
        self.live: Live | None = None
        self.last: dict[str, str] = {}

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def changes(self, action: str, changes: list[Change]) -> None:
        for line in change_lines(action, self.release, changes):
            _output.info(line)

    def progress(self, groups: list[Group], elapsed: float) -> None:
        if self.console.is_terminal:
            title = f"release {self.release}: waiting for every pod to be Ready ({elapsed:.0f}s)"
            if self.live is None:
                self.live = Live(console=self.console, refresh_per_second=4, transient=False)
                self.live.start()
            self.live.update(pod_table(groups, title))
            return
        for group in groups:
            for pod in group.pods:
                state = "Ready" if pod.ready else why(pod)
                if self.last.get(pod.name) != state:
                    self.last[pod.name] = state
                    _output.info(f"[{elapsed:5.0f}s] {group.name} {pod.name}: {state}")
