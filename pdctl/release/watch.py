"""Watching a release's pods while helm waits: their state and, for a pod that is not Ready, why
(its recent warnings, the last log lines after a restart). Looks show progress; the evidence of a
failed deploy is every state the pods took since the first look, replayed from the API server's
history, so a pod that lived between two looks (helm's rollback removes the pods that failed) is
not missed however late the looks come."""

from __future__ import annotations

from dataclasses import replace

from pdctl import naming
from pdctl.cluster import Cluster, Pod
from pdctl.errors import PdctlError
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
        self._since: str | None = None  # the resourceVersion of the first look's first list

    def observe(self) -> list[Group]:
        namespace = self.names.namespace
        warnings = self._warnings()
        observed = []
        for group in self.groups:
            pods, version = self.kube.pod_list(namespace, selector(self.names, group))
            if self._since is None:
                self._since = version
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

    def replay(self) -> None:
        """Records each pod the groups had since the first look (from the API server's history):
        its last state, or for a pod deleted since, its last stuck one if it got stuck (a
        rollback may free the GPUs a pod waited for, so it runs, before it deletes it). An API
        that cannot replay (its history expired) leaves what the looks saw."""
        if self._since is None:
            return
        try:
            changes = self.kube.pod_changes(
                self.names.namespace, self.names.pods_selector, self._since
            )
            warnings = self._warnings()
        except PdctlError:
            return
        last: dict[str, Pod] = {}
        stuck: dict[str, Pod] = {}
        for change, pod in changes:
            if change == "DELETED":
                last[pod.name] = stuck.get(pod.name, last.get(pod.name, pod))
            elif not pod.terminating:
                last[pod.name] = pod
                if pod.stuck:
                    stuck[pod.name] = pod
        for pod in last.values():
            group = self._group_of(pod)
            if group is not None and not pod.terminating:
                self._explain(pod, warnings.get(pod.name, []))
                self.seen[pod.name] = (group, pod)

    def _group_of(self, pod: Pod) -> Group | None:
        for group in self.groups:
            wanted = selector(self.names, group).items()
            if all(pod.labels.get(key) == value for key, value in wanted):
                return group
        return None

    def _warnings(self) -> dict[str, list[str]]:
        """Each pod's distinct warning events, oldest first."""
        warnings: dict[str, list[str]] = {}
        for event in self.kube.events(self.names.namespace):  # oldest first
            if event.kind == "Pod":
                texts = warnings.setdefault(event.name, [])
                text = f"{event.reason}: {event.message}"
                if text in texts:
                    texts.remove(text)
                texts.append(text)
        return warnings

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
