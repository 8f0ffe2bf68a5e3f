"""Watching a release's pods while helm waits: their state and, for a pod that is not Ready, why
(its recent warnings, the last log lines after a restart)."""

from __future__ import annotations

from dataclasses import replace

from pdctl import naming
from pdctl.cluster import Cluster, Pod
from pdctl.release.pods import Group, rolled_out, selector

EVENTS_PER_POD = 3


class Watch:
    """Observes a release's groups; remembers every pod it saw (its last state) as evidence."""

    def __init__(
        self, kube: Cluster, names: naming.Release, groups: list[Group], log_lines: int = 20
    ):
        self.kube, self.names, self.groups, self.log_lines = kube, names, groups, log_lines
        self.seen: dict[str, tuple[Group, Pod]] = {}
        self._logs: dict[tuple[str, int], list[str]] = {}

    def observe(self) -> list[Group]:
        namespace = self.names.namespace
        warnings: dict[str, list[str]] = {}
        for event in self.kube.events(namespace):  # oldest first
            if event.kind == "Pod":
                texts = warnings.setdefault(event.name, [])
                text = f"{event.reason}: {event.message}"
                if text in texts:
                    texts.remove(text)
                texts.append(text)
        observed = []
        for group in self.groups:
            pods = self.kube.pods(namespace, selector(self.names, group))
            for pod in pods:
                self._explain(pod, warnings.get(pod.name, []))
                self.seen[pod.name] = (group, pod)
            observed.append(
                replace(
                    group,
                    pods=pods,
                    ready=sum(pod.ready and not pod.terminating for pod in pods),
                    rolled_out=rolled_out(self.kube, namespace, group, pods),
                )
            )
        return observed

    def _explain(self, pod: Pod, warnings: list[str]) -> None:
        """A pod that is not Ready gets its recent distinct warnings and, if its container
        restarted, the last lines of its log (fetched once per restart)."""
        if pod.ready:
            return
        pod.events = warnings[-EVENTS_PER_POD:]
        if pod.reason == "CrashLoopBackOff" or pod.restarts:
            key = (pod.name, pod.restarts)
            if key not in self._logs:
                self._logs[key] = self.kube.logs(self.names.namespace, pod.name, self.log_lines)
            pod.logs = self._logs[key]

    def stuck(self) -> list[tuple[Group, Pod]]:
        """Pods whose last observed state was not Ready (deleted ones too: a rollback removes
        the pods that failed), the evidence of a failed deploy."""
        return [(g, p) for g, p in self.seen.values() if not p.ready and not p.terminating]
