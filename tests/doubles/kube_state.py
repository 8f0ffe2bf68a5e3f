"""Part of the Kubernetes API server TEST DOUBLE (tests/doubles/kube_api.py): the object store
(resourceVersion, generation, a watch log) and the controllers it plays.

What it imitates: one node with `gpus` nvidia.com/gpu; a Deployment controller that keeps one
ReplicaSet per pod template (labels + pod-template-hash, owner references, the revision
annotation) and fills in the status fields helm's ready checks read; a ReplicaSet controller that
creates and deletes pods; a scheduler that leaves a pod Pending with a FailedScheduling event when
its GPU request does not fit; a kubelet that makes a scheduled pod Ready at once, or fails it as
the test says (image pull error, crash loop with log lines); a Job controller that runs one pod
per Job and ends it when the test's `job_outcome` says how (exit code, log lines), with the Job's
Complete/Failed status; garbage collection through owner
references; a bound volume for every PVC; a cluster IP for every Service.

What it leaves out: real rollouts (every strategy replaces all pods of the old ReplicaSet at
once: the readiness rules helm applies still read the Deployment's declared strategy), probes,
time passing (a pod is in its final state when created), admission, RBAC, quotas, CPU and
memory accounting, more than one node.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.doubles.kube_patch import fields_match, labels_match

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (resource plural, namespace or "", name)

GPU = "nvidia.com/gpu"
NODE = "gpu-node-1"
_HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class ApiError(Exception):
    """An error the API answers with a Status object."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _hash(value: Any, length: int = 10) -> str:
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return "".join(_HASH_ALPHABET[b % len(_HASH_ALPHABET)] for b in digest[:length])


def _controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences", []):
        if ref.get("controller"):
            return str(ref["uid"])
    return None


def _owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod_gpus(pod: Obj) -> int:
    total = 0
    for container in pod["spec"].get("containers", []):
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(
            GPU, (resources.get("requests") or {}).get(GPU)
        )
        total += int(amount or 0)
    return total


def _scaled(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = replicas * int(value[:-1]) / 100
        return int(-(-exact // 1)) if round_up else int(exact // 1)
    return int(value)


def max_unavailable(deployment: Obj) -> int:
    """As deploymentutil.MaxUnavailable: 0 for Recreate."""
    spec = deployment["spec"]
    replicas = spec.get("replicas", 1)
    strategy = spec.get("strategy") or {}
    if strategy.get("type") != "RollingUpdate" or replicas == 0:
        return 0
    rolling = strategy.get("rollingUpdate") or {}
    surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return min(unavailable, replicas)


@dataclass
class Behaviour:
    """What happens to pods, set by each test."""

    gpus: int = 8  # nvidia.com/gpu allocatable on the one node
    pull_errors: set[str] = field(default_factory=set)  # images that cannot be pulled
    crashing: dict[str, list[str]] = field(default_factory=dict)  # image -> its last log lines
    # A Job's pod runs (Running, Ready) until this says how it ends: (exit code, log lines), or
    # None to keep it running. Called at each reconcile with the pod; default: exit 0, no logs.
    job_outcome: Callable[[Obj], tuple[int, list[str]] | None] = lambda _pod: (0, [])


class State:
    """Objects, the watch log and the controllers; every method holds the lock."""

    def __init__(self, behaviour: Behaviour):
        self.behaviour = behaviour
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[Key, Obj] = {}
        self.version = 0
        self.log: list[tuple[int, str, str, Obj]] = []  # (resourceVersion, type, plural, object)
        self.pod_logs: dict[tuple[str, str], list[str]] = {}
        self._counter = itertools.count(1)
        for name in ("default", "kube-system"):
            self.create(
                "namespaces",
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )

    # ---- storage
    def _record(self, event: str, plural: str, obj: Obj) -> None:
        self.version += 1
        if event != "DELETED":
            obj["metadata"]["resourceVersion"] = str(self.version)
        self.log.append((self.version, event, plural, copy.deepcopy(obj)))
        self.changed.notify_all()

    def get(self, plural: str, namespace: str, name: str) -> Obj:
        obj = self.objects.get((plural, namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        return copy.deepcopy(obj)

    def find(self, plural: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((plural, namespace, name))

    def list(
        self,
        plural: str,
        namespace: str | None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[Obj]:
        return [
            copy.deepcopy(obj)
            for (kind, ns, _), obj in sorted(self.objects.items())
            if kind == plural
            and (namespace is None or ns == namespace)
            and labels_match(labels, obj["metadata"].get("labels"))
            and fields_match(fields, obj)
        ]

    def create(self, plural: str, namespace: str, obj: Obj, reconcile: bool = True) -> Obj:
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + _hash(next(self._counter), 5)
            name = meta.get("name")
            if not name:
                raise ApiError(422, "Invalid", "metadata.name: Required value")
            if (
                namespace
                and plural != "namespaces"
                and ("namespaces", "", namespace) not in self.objects
            ):
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
            if (plural, namespace, name) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            if namespace:
                meta["namespace"] = namespace
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            defaults(plural, obj, None)
            validate(plural, obj)
            self.objects[(plural, namespace, name)] = obj
            self._record("ADDED", plural, obj)
            if reconcile:
                self.reconcile()
            return copy.deepcopy(obj)

    def replace(
        self, plural: str, namespace: str, obj: Obj, expect_version: str | None = None
    ) -> Obj:
        with self.lock:
            name = obj["metadata"]["name"]
            current = self.objects.get((plural, namespace, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            if expect_version and expect_version != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {plural} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                )
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            for key in ("uid", "creationTimestamp", "generation", "namespace", "name"):
                if key in current["metadata"]:
                    meta[key] = current["metadata"][key]
            if "status" in current and plural not in ("pods",):
                obj["status"] = current["status"]
            defaults(plural, obj, current)
            validate(plural, obj)
            if obj.get("spec") != current.get("spec"):
                meta["generation"] = current["metadata"].get("generation", 1) + 1
            if obj == current:  # a no-op write does not change resourceVersion
                return copy.deepcopy(current)
            self.objects[(plural, namespace, name)] = obj
            self._record("MODIFIED", plural, obj)
            self.reconcile()
            return copy.deepcopy(obj)

    def set_status(self, plural: str, obj: Obj, status: Obj) -> None:
        if obj.get("status") != status:
            obj["status"] = status
            self._record("MODIFIED", plural, obj)

    def delete(self, plural: str, namespace: str, name: str, orphan: bool = False) -> Obj:
        with self.lock:
            obj = self.objects.pop((plural, namespace, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            self._record("DELETED", plural, obj)
            if plural == "namespaces":
                for key in [k for k in self.objects if k[1] == name]:
                    self.delete(key[0], key[1], key[2])
            elif not orphan:
                uid = obj["metadata"]["uid"]
                for key, child in list(self.objects.items()):
                    refs = child["metadata"].get("ownerReferences", [])
                    if key in self.objects and any(ref.get("uid") == uid for ref in refs):
                        self.delete(*key)
            self.reconcile()
            return obj

    # ---- controllers
    def reconcile(self) -> None:
        with self.lock:
            for (plural, ns, name), obj in list(self.objects.items()):
                if plural == "deployments" and (plural, ns, name) in self.objects:
                    self._deployment(obj)
                if plural == "jobs" and (plural, ns, name) in self.objects:
                    self._job(obj)
            self._schedule()
            for (plural, _, _), obj in list(self.objects.items()):
                if plural == "deployments":
                    self._deployment_status(obj)
                if plural == "jobs":
                    self._job_pods(obj)

    def _owned(self, plural: str, owner: Obj) -> builtins.list[Obj]:
        uid = owner["metadata"]["uid"]
        ns = owner["metadata"].get("namespace", "")
        return [
            obj
            for (kind, namespace, _), obj in self.objects.items()
            if kind == plural and namespace == ns and _controller_uid(obj) == uid
        ]

    def _deployment(self, deployment: Obj) -> None:
        meta, spec = deployment["metadata"], deployment["spec"]
        template = spec["template"]
        owned = self._owned("replicasets", deployment)

        def bare(rs: Obj) -> Obj:
            labels = dict(rs["spec"]["template"]["metadata"].get("labels", {}))
            labels.pop("pod-template-hash", None)
            t = copy.deepcopy(rs["spec"]["template"])
            t["metadata"]["labels"] = labels
            return t

        revisions = [
            int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]) for rs in owned
        ]
        current = next((rs for rs in owned if bare(rs) == template), None)
        if current is None:
            template_hash = _hash(template)
            rs_template = copy.deepcopy(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = (
                template_hash
            )
            selector = copy.deepcopy(spec["selector"])
            selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
            current = self.create(
                "replicasets",
                meta["namespace"],
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": f"{meta['name']}-{template_hash}",
                        "labels": rs_template["metadata"]["labels"],
                        "annotations": {
                            "deployment.kubernetes.io/revision": str(max(revisions, default=0) + 1)
                        },
                        "ownerReferences": [_owner_ref(deployment)],
                    },
                    "spec": {"replicas": 0, "selector": selector, "template": rs_template},
                },
                reconcile=False,
            )
            current = self.objects[("replicasets", meta["namespace"], current["metadata"]["name"])]
            owned.append(current)
        elif revisions and int(
            current["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        ) != max(revisions):
            # A rollback to an older template: the old ReplicaSet becomes the newest revision again.
            current["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = str(
                max(revisions) + 1
            )
            self._record("MODIFIED", "replicasets", current)
        revision = current["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        if meta.setdefault("annotations", {}).get("deployment.kubernetes.io/revision") != revision:
            meta["annotations"]["deployment.kubernetes.io/revision"] = revision
            self._record("MODIFIED", "deployments", deployment)
        for rs in owned:
            want = spec.get("replicas", 1) if rs is current and not spec.get("paused") else 0
            if rs is current or rs["spec"]["replicas"] != 0:
                if rs["spec"]["replicas"] != want:
                    rs["spec"]["replicas"] = want
                    rs["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
                    self._record("MODIFIED", "replicasets", rs)
            self._replicaset(rs)

    def _job(self, job: Obj) -> None:
        """The Job controller, as far as preflight needs it: one pod per Job (parallelism 1,
        no retries), labelled and owned as Kubernetes does."""
        if self._owned("pods", job):
            return
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        labels = {
            **template.get("metadata", {}).get("labels", {}),
            "batch.kubernetes.io/job-name": meta["name"],
            "job-name": meta["name"],
            "batch.kubernetes.io/controller-uid": meta["uid"],
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{_hash(meta['uid'], 5)}",
                "labels": labels,
                "ownerReferences": [_owner_ref(job)],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending", "conditions": []},
        }
        self.create("pods", meta["namespace"], pod, reconcile=False)

    def _job_pods(self, job: Obj) -> None:
        """End a Job's running pod when Behaviour.job_outcome says so: Succeeded or Failed, its
        log lines, and the Job's status (succeeded/failed, Complete/Failed condition)."""
        for pod in self._owned("pods", job):
            if pod["status"].get("phase") != "Running":
                continue
            outcome = self.behaviour.job_outcome(copy.deepcopy(pod))
            if outcome is None:
                continue
            code, lines = outcome
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            self.pod_logs[(ns, name)] = list(lines)
            status = copy.deepcopy(pod["status"])
            status["phase"] = "Succeeded" if code == 0 else "Failed"
            for condition in status["conditions"]:
                if condition["type"] in ("Ready", "ContainersReady"):
                    condition.update(status="False", reason="PodCompleted")
            for container in status.get("containerStatuses", []):
                container.update(ready=False, started=False)
                container["state"] = {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": now(),
                        "finishedAt": now(),
                    }
                }
            self.set_status("pods", pod, status)
            done = "Complete" if code == 0 else "Failed"
            self.set_status(
                "jobs",
                job,
                {
                    "succeeded" if code == 0 else "failed": 1,
                    "conditions": [{"type": done, "status": "True", "lastTransitionTime": now()}],
                },
            )

    def _replicaset(self, rs: Obj) -> None:
        ns = rs["metadata"]["namespace"]
        pods = self._owned("pods", rs)
        want = rs["spec"]["replicas"]
        for pod in pods[want:]:
            self.delete("pods", ns, pod["metadata"]["name"])
        for _ in range(want - len(pods)):
            template = copy.deepcopy(rs["spec"]["template"])
            name = f"{rs['metadata']['name']}-{_hash(next(self._counter), 5)}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    **template.get("metadata", {}),
                    "name": name,
                    "ownerReferences": [_owner_ref(rs)],
                },
                "spec": template["spec"],
                "status": {"phase": "Pending", "conditions": []},
            }
            self.create("pods", ns, pod, reconcile=False)

    def _schedule(self) -> None:
        """Bind Pending pods in creation order while their GPUs fit; run the kubelet on them."""
        # The store keeps creation order: the oldest Pending pod is bound first.
        pods = [obj for (kind, _, _), obj in self.objects.items() if kind == "pods"]
        used = sum(_pod_gpus(p) for p in pods if p["spec"].get("nodeName"))
        for pod in pods:
            if pod["spec"].get("nodeName"):
                continue
            need = _pod_gpus(pod)
            if need and used + need > self.behaviour.gpus:
                self._unschedulable(pod)
                continue
            used += need
            pod["spec"]["nodeName"] = NODE
            self._event(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} "
                f"to {NODE}",
                "default-scheduler",
            )
            self._kubelet(pod)

    def _unschedulable(self, pod: Obj) -> None:
        conditions = pod.get("status", {}).get("conditions", [])
        if any(c.get("reason") == "Unschedulable" for c in conditions):
            return
        message = (
            f"0/1 nodes are available: 1 Insufficient {GPU}. preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod."
        )
        status = {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now(),
                }
            ],
        }
        self.set_status("pods", pod, status)
        self._event(pod, "Warning", "FailedScheduling", message, "default-scheduler")

    def _kubelet(self, pod: Obj) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        statuses, phase = [], "Running"
        for container in pod["spec"]["containers"]:
            image, cname = container["image"], container["name"]
            base = {"name": cname, "image": image, "imageID": "", "containerID": ""}
            if image in self.behaviour.pull_errors:
                phase = "Pending" if phase == "Running" else phase
                for reason, message in (
                    (
                        "Failed",
                        f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                        f'failed to pull and unpack image "{image}": not found',
                    ),
                    ("Failed", "Error: ErrImagePull"),
                    ("Failed", "Error: ImagePullBackOff"),
                ):
                    self._event(pod, "Warning", reason, message, "kubelet")
                self._event(
                    pod, "Normal", "BackOff", f'Back-off pulling image "{image}"', "kubelet"
                )
                statuses.append(
                    {
                        **base,
                        "ready": False,
                        "started": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": f'Back-off pulling image "{image}"',
                            }
                        },
                    }
                )
            elif image in self.behaviour.crashing:
                self.pod_logs[(ns, name)] = list(self.behaviour.crashing[image])
                self._event(
                    pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {cname} in pod "
                    f"{name}_{ns}({pod['metadata']['uid']})",
                    "kubelet",
                )
                statuses.append(
                    {
                        **base,
                        "containerID": f"containerd://{_hash(name, 12)}",
                        "ready": False,
                        "started": False,
                        "restartCount": 4,
                        "state": {
                            "waiting": {
                                "reason": "CrashLoopBackOff",
                                "message": f"back-off 1m20s restarting failed container="
                                f"{cname} pod={name}_{ns}({pod['metadata']['uid']})",
                            }
                        },
                        "lastState": {
                            "terminated": {
                                "exitCode": 1,
                                "reason": "Error",
                                "startedAt": now(),
                                "finishedAt": now(),
                            }
                        },
                    }
                )
            else:
                self.pod_logs.setdefault((ns, name), [f"{cname}: serving"])
                statuses.append(
                    {
                        **base,
                        "containerID": f"containerd://{_hash(name, 12)}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now()}},
                    }
                )
        ready = all(s["ready"] for s in statuses)
        flag = "True" if ready else "False"
        conditions = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": now()},
            {"type": "Ready", "status": flag, "lastTransitionTime": now()},
        ]
        if not ready:
            for condition in conditions[2:]:
                condition.update(
                    reason="ContainersNotReady",
                    message="containers with unready status: ["
                    + " ".join(s["name"] for s in statuses if not s["ready"])
                    + "]",
                )
        self.set_status(
            "pods",
            pod,
            {
                "phase": phase,
                "conditions": conditions,
                "hostIP": "192.168.0.10",
                "podIP": f"10.244.0.{next(self._counter) % 250 + 2}",
                "startTime": now(),
                "qosClass": "Burstable",
                "containerStatuses": statuses,
            },
        )

    def _event(self, obj: Obj, kind: str, reason: str, message: str, component: str) -> None:
        meta = obj["metadata"]
        stamp = now()
        self.create(
            "events",
            meta["namespace"],
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{_hash(next(self._counter), 16)}"},
                "involvedObject": {
                    "apiVersion": obj["apiVersion"],
                    "kind": obj["kind"],
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": component},
                "reportingComponent": component,
            },
            reconcile=False,
        )

    def _deployment_status(self, deployment: Obj) -> None:
        spec = deployment["spec"]
        want = spec.get("replicas", 1)
        sets = self._owned("replicasets", deployment)
        newest = max(
            sets,
            key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]),
            default=None,
        )
        pods = {id(rs): self._owned("pods", rs) for rs in sets}

        def is_ready(pod: Obj) -> bool:
            return any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in pod.get("status", {}).get("conditions", [])
            )

        for rs in sets:
            mine = pods[id(rs)]
            ready = sum(map(is_ready, mine))
            self.set_status(
                "replicasets",
                rs,
                {
                    "replicas": len(mine),
                    "fullyLabeledReplicas": len(mine),
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                    "observedGeneration": rs["metadata"].get("generation", 1),
                },
            )
        everything = [pod for group in pods.values() for pod in group]
        ready = sum(map(is_ready, everything))
        updated = len(pods[id(newest)]) if newest is not None else 0
        new_ready = sum(map(is_ready, pods[id(newest)])) if newest is not None else 0
        available = ready >= want - max_unavailable(deployment)
        done = updated == want and new_ready == want and len(everything) == want
        rs_name = newest["metadata"]["name"] if newest is not None else ""
        old = deployment.get("status", {}).get("conditions", [])
        stamp = {c["type"]: c.get("lastTransitionTime") for c in old}
        status = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": len(everything),
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available else "False",
                    "reason": "MinimumReplicasAvailable"
                    if available
                    else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if available
                    else "Deployment does not have minimum availability.",
                    "lastTransitionTime": stamp.get("Available") or now(),
                    "lastUpdateTime": stamp.get("Available") or now(),
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{rs_name}" has successfully progressed.'
                    if done
                    else f'ReplicaSet "{rs_name}" is progressing.',
                    "lastTransitionTime": stamp.get("Progressing") or now(),
                    "lastUpdateTime": stamp.get("Progressing") or now(),
                },
            ],
        }
        if len(everything) - ready > 0:
            status["unavailableReplicas"] = len(everything) - ready
        self.set_status("deployments", deployment, status)


# ---- API server defaulting and validation (the parts helm's checks and the chart touch) -------

_cluster_ips = itertools.count(10)


def _quantities(node: Any, key: str = "") -> None:
    """Quantities come back as strings from the API server (1 -> "1"), as clients expect."""
    if isinstance(node, dict):
        for name, value in node.items():
            if key in ("limits", "requests", "capacity") or name == "sizeLimit":
                if isinstance(value, int | float) and not isinstance(value, bool):
                    node[name] = str(value)
            _quantities(value, name)
    elif isinstance(node, list):
        for item in node:
            _quantities(item)


def defaults(plural: str, obj: Obj, current: Obj | None) -> None:
    _quantities(obj)
    spec = (
        obj.setdefault("spec", {})
        if plural
        not in (
            "secrets",
            "configmaps",
            "serviceaccounts",
            "roles",
            "rolebindings",
            "events",
            "namespaces",
        )
        else None
    )
    if plural == "deployments" and spec is not None:
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
    elif plural == "services" and spec is not None:
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        old_ip = (current or {}).get("spec", {}).get("clusterIP")
        ip = spec.get("clusterIP") or old_ip or f"10.96.0.{next(_cluster_ips) % 250 + 2}"
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        for port in spec.get("ports", []):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj.setdefault("status", {"loadBalancer": {}})
    elif plural == "persistentvolumeclaims" and spec is not None:
        old = (current or {}).get("spec", {})
        spec.setdefault("volumeMode", "Filesystem")
        spec.setdefault("storageClassName", old.get("storageClassName", "standard"))
        spec["volumeName"] = old.get("volumeName") or f"pvc-{obj['metadata']['uid']}"
        size = spec.get("resources", {}).get("requests", {}).get("storage")
        obj["status"] = {
            "phase": "Bound",
            "accessModes": spec.get("accessModes", []),
            "capacity": {"storage": size},
        }
    elif plural == "secrets":
        import base64

        obj.setdefault("type", "Opaque")
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()
    elif plural == "namespaces":
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
            "name"
        ]
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}


def validate(plural: str, obj: Obj) -> None:
    """The API server's refusals that the chart's rollout settings can run into."""
    if plural != "deployments":
        return
    spec = obj["spec"]
    selector = (spec.get("selector") or {}).get("matchLabels", {})
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        raise ApiError(
            422,
            "Invalid",
            "spec.template.metadata.labels: Invalid value: `selector` does not match template "
            "`labels`",
        )
    strategy = spec["strategy"]
    if strategy["type"] == "Recreate" and strategy.get("rollingUpdate") is not None:
        raise ApiError(
            422,
            "Invalid",
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` "
            "is 'Recreate'",
        )
    if strategy["type"] == "RollingUpdate":
        rolling = strategy["rollingUpdate"]
        replicas = max(spec.get("replicas", 1), 1)
        if (
            _scaled(rolling.get("maxSurge", 0), replicas, True) == 0
            and _scaled(rolling.get("maxUnavailable", 0), replicas, False) == 0
            and str(rolling.get("maxUnavailable")) in ("0", "0%")
        ):
            raise ApiError(
                422,
                "Invalid",
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when "
                "`maxSurge` is 0",
            )
