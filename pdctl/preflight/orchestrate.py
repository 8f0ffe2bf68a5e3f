"""Running a preflight on the cluster: the ConfigMap, the target Job (prefill side), then, once
its pod has an IP, the initiator Job (decode side) pointed at it; wait for both pods to finish,
read the report line each printed, and delete everything created (on errors and Ctrl-C too),
unless asked to keep it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.cluster import Cluster, Pod
from pdctl.preflight.jobs import INITIATOR, PORT, TARGET, ProbeJobs

MARKER = "PDCTL-PREFLIGHT "  # the probe's report line (probe.MARKER)
LOG_LINES = 40


@dataclass
class Side:
    """One probe pod as it ended: where it ran, its phase, why it did not run, and its report."""

    side: str
    pool: str
    pod: str | None = None
    node: str | None = None
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    report: dict[str, Any] | None = None
    logs: list[str] = field(default_factory=list)  # the last lines when there is no report

    def as_dict(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "pool": self.pool,
            "pod": self.pod,
            "node": self.node,
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "report": self.report,
            "logs": self.logs,
        }


@dataclass
class ProbeRun:
    target: Side
    initiator: Side
    created: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    kept: bool = False
    timed_out: bool = False


def report_line(lines: list[str]) -> dict[str, Any] | None:
    """The probe's report: the last line that starts with the marker, parsed."""
    for line in reversed(lines):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


class Runner:
    """One preflight run on `cluster`. `say` reports progress; `sleep` and `clock` are the
    waits (tests pass quick ones)."""

    def __init__(
        self,
        cluster: Cluster,
        plan: ProbeJobs,
        say: Callable[[str], None] = lambda _: None,
        poll: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cluster, self.plan, self.say = cluster, plan, say
        self.poll, self.sleep, self.clock = poll, sleep, clock

    def run(self, keep: bool = False) -> ProbeRun:
        plan = self.plan
        result = ProbeRun(Side(TARGET, plan.target.name), Side(INITIATOR, plan.initiator.name))
        deadline = self.clock() + plan.timeout + 600  # image pulls on top of the probe's time
        try:
            self._create(result, plan.config_map())
            self._create(result, plan.job(TARGET))
            target = self._wait(TARGET, deadline, running=True)
            if target is not None and target.ip and not _finished(target) and not target.stuck:
                self.say(f"target pod {target.name} runs on {target.node} ({target.ip})")
                self._create(result, plan.job(INITIATOR, f"{target.ip}:{PORT}"))
                self._wait(INITIATOR, deadline, running=False)
                self._wait(TARGET, deadline, running=False)
            result.timed_out = self.clock() > deadline
            for side in (result.target, result.initiator):
                self._collect(side)
        finally:
            if keep:
                result.kept = True
            else:
                self._clean(result)
        return result

    def _create(self, result: ProbeRun, obj: dict[str, Any]) -> None:
        self.cluster.create(obj)
        result.created.append((obj["kind"], obj["metadata"]["name"]))
        self.say(f"created {obj['kind']} {obj['metadata']['name']}")

    def _pod(self, side: str) -> Pod | None:
        pods = self.cluster.pods(self.plan.namespace, self.plan.selector(side))
        return pods[-1] if pods else None

    def _wait(self, side: str, deadline: float, running: bool) -> Pod | None:
        """Until the side's pod runs with an IP (running) or has finished, is stuck (no node,
        no image), or the deadline passes; the pod as last seen."""
        while True:
            pod = self._pod(side)
            if pod is not None and (_finished(pod) or pod.stuck):
                return pod
            if running and pod is not None and pod.phase == "Running" and pod.ip:
                return pod
            if self.clock() > deadline:
                return pod
            self.sleep(self.poll)

    def _collect(self, side: Side) -> None:
        pod = self._pod(side.side)
        if pod is None:
            return
        side.pod, side.node, side.phase = pod.name, pod.node, pod.phase
        side.reason, side.message = pod.reason, pod.message
        if pod.phase in ("Running", "Succeeded", "Failed"):
            lines = self.cluster.logs(self.plan.namespace, pod.name, lines=LOG_LINES)
            side.report = report_line(lines)
            if side.report is None:
                side.logs = lines[-LOG_LINES:]
        if not side.logs and pod.events:
            side.logs = list(pod.events)

    def _clean(self, result: ProbeRun) -> None:
        for kind, name in reversed(result.created):
            try:
                self.cluster.delete(kind, self.plan.namespace, name)
            except Exception as error:  # keep deleting the others; say what is left
                self.say(f"could not delete {kind} {name}: {error}")
        if result.created:
            self.say(f"deleted what the preflight created ({len(result.created)} objects)")


def _finished(pod: Pod) -> bool:
    return pod.phase in ("Succeeded", "Failed")
