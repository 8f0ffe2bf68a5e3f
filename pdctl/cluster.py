"""Cluster access through the official `kubernetes` client: pods, events, logs, Deployments,
Services, PVCs, and port-forwarding. The only module that imports `kubernetes`, inside the
functions that need it, so `pdctl --help` never pays for it.

The cluster is the one kubectl would use: $KUBECONFIG (or ~/.kube/config) and its current
context, else the in-cluster service account. No kubeconfig, an API server that does not answer,
or credentials it refuses are an EnvironmentProblem (exit 3).
"""

from __future__ import annotations

import base64
import os
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pdctl import hints, naming
from pdctl.errors import EnvironmentProblem

T = TypeVar("T")
REQUEST_TIMEOUT = 15  # seconds, each API call

# Container waiting reasons that mean the pod will not become Ready by itself.
STUCK = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}


@dataclass
class Pod:
    """One pod as pdctl reports it."""

    name: str
    labels: dict[str, str]
    phase: str
    ready: bool
    restarts: int
    reason: str | None = None  # Unschedulable, ImagePullBackOff, CrashLoopBackOff, ...
    message: str | None = None  # the scheduler's or the kubelet's words
    terminating: bool = False
    node: str | None = None
    events: list[str] = field(default_factory=list)  # recent warnings, "Reason: message"
    logs: list[str] = field(default_factory=list)  # last lines, for a crash loop
    ports: dict[str, int] = field(default_factory=dict)  # named container ports
    ip: str | None = None  # status.podIP (pdctl preflight reaches a probe pod by it)

    @property
    def stuck(self) -> bool:
        """Waiting on something that will not resolve by itself (no GPU, no image, crashes)."""
        return self.reason in STUCK or self.reason == "Unschedulable"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("labels")
        data.pop("ports")
        data.pop("ip")
        return data


@dataclass
class Event:
    type: str
    reason: str
    message: str
    kind: str
    name: str
    count: int
    last_seen: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DeploymentRollout:
    name: str
    replicas: int  # wanted
    ready: int
    updated: int
    total: int  # pods of every ReplicaSet, old ones too
    observed: bool  # the controller has seen the latest spec

    @property
    def rolled_out(self) -> bool:
        """Every wanted pod is of the current template and Ready, and no old pod is left."""
        return self.observed and self.replicas == self.updated == self.ready == self.total


@dataclass
class Service:
    name: str
    type: str
    cluster_ip: str | None
    ports: list[int]
    external: list[str]  # load balancer addresses

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Cluster:
    """The API of one cluster (connect() builds it)."""

    def __init__(self, api_client: Any):
        from kubernetes import client

        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.host = str(api_client.configuration.host)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        """One API call; errors become EnvironmentProblems naming what pdctl was doing."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call()
        except ApiException as error:
            if error.status in (401, 403):
                raise EnvironmentProblem(
                    f"{what}: the API server at {self.host} refused the credentials "
                    f"({error.status} {error.reason})",
                    hint="check the current kubectl context and your RBAC permissions",
                ) from None
            raise EnvironmentProblem(
                f"{what}: the API server at {self.host} answered {error.status} {error.reason}"
            ) from None
        except (HTTPError, OSError) as error:
            raise EnvironmentProblem(
                f"{what}: cannot reach the API server at {self.host}: {error}",
                hint="check KUBECONFIG / the current kubectl context",
            ) from None
        except ValueError as error:  # the client's models refused the answer
            first = str(error).splitlines()[0]
            raise EnvironmentProblem(
                f"{what}: the answer of the API server at {self.host} is not what the kubernetes "
                f"client expects: {first}"
            ) from None

    def _find(self, what: str, call: Callable[[], T]) -> T | None:
        """As _call, None when the object does not exist."""
        from kubernetes.client.exceptions import ApiException

        def call_or_none() -> T | None:
            try:
                return call()
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

        return self._call(what, call_or_none)

    def ping(self) -> str:
        """The server's version, proving it answers."""
        from kubernetes import client

        info = self._call(
            "reading the server version",
            lambda: client.VersionApi(self.api_client).get_code(_request_timeout=REQUEST_TIMEOUT),
        )
        return str(getattr(info, "git_version", ""))

    # ---- pods, events, logs
    def pods(self, namespace: str, selector: dict[str, str]) -> list[Pod]:
        found = self._call(
            "listing pods",
            lambda: self.core.list_namespaced_pod(
                namespace,
                label_selector=naming.selector_text(selector),
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )
        return sorted((_pod(item) for item in found.items), key=lambda pod: pod.name)

    def events(self, namespace: str, warnings_only: bool = True) -> list[Event]:
        """Events in the namespace, newest last."""
        found = self._call(
            "listing events",
            lambda: self.core.list_namespaced_event(
                namespace,
                field_selector="type=Warning" if warnings_only else None,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )
        events = [_event(item) for item in found.items]
        return sorted(events, key=lambda event: event.last_seen or "")

    def logs(self, namespace: str, pod: str, lines: int = 20) -> list[str]:
        """The last lines of the pod's previous container (a crash), else of the current one."""
        for previous in (True, False):
            try:
                text = self.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    tail_lines=lines,
                    previous=previous,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            except Exception:  # no previous container, or the container has not started
                continue
            if text:
                return str(text).splitlines()[-lines:]
        return []

    # ---- workloads, services, claims
    def deployment(self, namespace: str, name: str) -> DeploymentRollout | None:
        found = self._find(
            f"reading Deployment {name}",
            lambda: self.apps.read_namespaced_deployment(
                name, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        return None if found is None else _deployment(found)

    def service(self, namespace: str, name: str) -> Service | None:
        found = self._find(
            f"reading Service {name}",
            lambda: self.core.read_namespaced_service(
                name, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        return None if found is None else _service(found)

    def claim_exists(self, namespace: str, name: str) -> bool:
        found = self._find(
            f"reading PersistentVolumeClaim {name}",
            lambda: self.core.read_namespaced_persistent_volume_claim(
                name, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        return found is not None

    def delete_claim(self, namespace: str, name: str) -> bool:
        """Delete a PVC; False when it was not there."""
        found = self._find(
            f"deleting PersistentVolumeClaim {name}",
            lambda: self.core.delete_namespaced_persistent_volume_claim(
                name, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        return found is not None

    def env_value(self, namespace: str, deployment: str, variable: str) -> str | None:
        """The value of env `variable` in the Deployment's containers, read from its Secret for a
        secretKeyRef; None when unset, or when the Deployment or the Secret is not there or not
        readable (RBAC)."""
        found = self._readable(
            f"reading Deployment {deployment}",
            lambda: self.apps.read_namespaced_deployment(
                deployment, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        pod = found.spec.template.spec if found is not None else None
        containers = pod.containers if pod is not None else []
        entry = next((e for c in containers for e in c.env or [] if e.name == variable), None)
        if entry is None or entry.value is not None:
            return None if entry is None else str(entry.value)
        ref = entry.value_from.secret_key_ref if entry.value_from else None
        if ref is None or not ref.name:
            return None
        name = str(ref.name)
        secret = self._readable(
            f"reading Secret {name}",
            lambda: self.core.read_namespaced_secret(
                name, namespace, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        value = (secret.data or {}).get(ref.key) if secret is not None else None
        return None if value is None else base64.b64decode(value).decode("latin-1")

    def _readable(self, what: str, call: Callable[[], T]) -> T | None:
        """As _call, None when the object is not there or RBAC does not let pdctl read it."""
        from kubernetes.client.exceptions import ApiException

        def call_or_none() -> T | None:
            try:
                return call()
            except ApiException as error:
                if error.status in (403, 404):
                    return None
                raise

        return self._call(what, call_or_none)

    # ---- objects pdctl creates itself (preflight's ConfigMap and Jobs)
    def create(self, obj: dict[str, Any]) -> None:
        """Create a ConfigMap or a Job (a manifest as a dict) in its namespace."""
        kind, namespace = obj["kind"], obj["metadata"]["namespace"]
        body: Any = obj  # the client serializes a dict as it is
        what = f"creating {kind} {obj['metadata']['name']} in namespace {namespace}"
        if kind == "ConfigMap":
            self._call(
                what,
                lambda: self.core.create_namespaced_config_map(
                    namespace, body, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        elif kind == "Job":
            self._call(
                what,
                lambda: self.batch.create_namespaced_job(
                    namespace, body, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        else:
            raise ValueError(f"Cluster.create does not create {kind}")

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete a ConfigMap or a Job (with its pods); False when it was not there."""
        from kubernetes import client

        if kind == "ConfigMap":
            found = self._find(
                f"deleting ConfigMap {name}",
                lambda: self.core.delete_namespaced_config_map(
                    name, namespace, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        elif kind == "Job":
            options = client.V1DeleteOptions(propagation_policy="Background")
            found = self._find(
                f"deleting Job {name}",
                lambda: self.batch.delete_namespaced_job(
                    name, namespace, body=options, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        else:
            raise ValueError(f"Cluster.delete does not delete {kind}")
        return found is not None


def connect() -> Cluster:
    """The cluster of the current kubeconfig context (or in-cluster config), checked to answer."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise EnvironmentProblem(
            "the kubernetes client is not installed (pdctl depends on it)",
            hint=hints.reinstall(),
        ) from None
    configuration = client.Configuration()
    try:
        # $KUBECONFIG read now: the client reads it once, when it is imported.
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.environ.get("KUBECONFIG") or "~/.kube/config",
            client_configuration=configuration,
        )
    except (config.ConfigException, OSError) as error:
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except config.ConfigException:
            raise EnvironmentProblem(
                f"no cluster configured: {error}",
                hint="set KUBECONFIG or a current kubectl context (kubectl config current-context)",
            ) from None
    configuration.retries = 1
    cluster = Cluster(client.ApiClient(configuration))
    cluster.ping()
    return cluster


# ---- converting the client's objects ----------------------------------------------------------


def _pod(item: Any) -> Pod:
    status = item.status
    conditions = {c.type: c for c in status.conditions or []}
    statuses = list(status.init_container_statuses or []) + list(status.container_statuses or [])
    ready_condition = conditions.get("Ready")
    pod = Pod(
        name=item.metadata.name,
        labels=dict(item.metadata.labels or {}),
        phase=status.phase or "Unknown",
        ready=bool(ready_condition and ready_condition.status == "True"),
        restarts=sum(s.restart_count or 0 for s in status.container_statuses or []),
        terminating=item.metadata.deletion_timestamp is not None,
        node=item.spec.node_name,
        ip=status.pod_ip,
        ports={
            port.name: port.container_port
            for container in list(item.spec.init_containers or []) + list(item.spec.containers)
            for port in container.ports or []
            if port.name
        },
    )
    scheduled = conditions.get("PodScheduled")
    if pod.terminating:
        pod.reason = "Terminating"
    elif scheduled is not None and scheduled.status == "False":
        pod.reason, pod.message = scheduled.reason or "Unschedulable", scheduled.message
    else:
        for container in statuses:
            state = container.state
            if state and state.waiting and state.waiting.reason:
                pod.reason, pod.message = state.waiting.reason, state.waiting.message
                last = container.last_state.terminated if container.last_state else None
                if last is not None and state.waiting.reason == "CrashLoopBackOff":
                    pod.message = f"last exit code {last.exit_code} ({last.reason or 'Error'})"
                break
            if state and state.terminated and not pod.ready:
                pod.reason = state.terminated.reason or "Terminated"
                pod.message = f"exit code {state.terminated.exit_code}"
                break
        if pod.reason is None and not pod.ready and pod.phase == "Running":
            pod.reason = "NotReady"
            pod.message = ready_condition.message if ready_condition else None
    return pod


def _deployment(item: Any) -> DeploymentRollout:
    spec, status = item.spec, item.status
    return DeploymentRollout(
        name=item.metadata.name,
        replicas=spec.replicas if spec.replicas is not None else 1,
        ready=status.ready_replicas or 0,
        updated=status.updated_replicas or 0,
        total=status.replicas or 0,
        observed=(status.observed_generation or 0) >= (item.metadata.generation or 0),
    )


def _service(item: Any) -> Service:
    balancer = item.status.load_balancer if item.status else None
    ingress = (balancer.ingress if balancer else None) or []
    return Service(
        name=item.metadata.name,
        type=item.spec.type or "ClusterIP",
        cluster_ip=item.spec.cluster_ip,
        ports=[port.port for port in item.spec.ports or []],
        external=[entry.ip or entry.hostname for entry in ingress if entry.ip or entry.hostname],
    )


def _event(item: Any) -> Event:
    stamp = item.last_timestamp or item.event_time or item.first_timestamp
    return Event(
        type=item.type or "",
        reason=item.reason or "",
        message=(item.message or "").strip(),
        kind=item.involved_object.kind or "",
        name=item.involved_object.name or "",
        count=item.count or 1,
        last_seen=stamp.isoformat() if stamp else None,
    )


# ---- port-forward -----------------------------------------------------------------------------


@contextmanager
def port_forward(namespace: str, pod: str, port: int) -> Iterator[str]:
    """Forward a local port to `pod`:`port` through the API server (as kubectl port-forward);
    yields the local base URL "http://127.0.0.1:<local port>". Each connection to it opens its
    own forwarding stream; everything stops when the block ends."""
    cluster = connect()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(32)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(
                target=_relay,
                args=(cluster, namespace, pod, port, connection, stop),
                daemon=True,
            ).start()

    thread = threading.Thread(target=accept, name=f"port-forward {pod}:{port}", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def _relay(
    cluster: Cluster,
    namespace: str,
    pod: str,
    port: int,
    connection: socket.socket,
    stop: threading.Event,
) -> None:
    """Copy bytes between one local connection and one forwarding stream to the pod."""
    from kubernetes import client
    from kubernetes.stream import portforward

    def setup() -> Any:
        # A client of its own: the stream helper swaps the ApiClient's request method while
        # it connects, which is not safe to share between threads.
        api = client.CoreV1Api(client.ApiClient(cluster.api_client.configuration))
        return portforward(
            api.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
        )

    # The websocket client connects without a timeout: bounded here (a setup that is still
    # hanging is left to its daemon thread, and the local connection is closed).
    forward = _within(REQUEST_TIMEOUT, setup)
    if forward is None:
        connection.close()
        return
    try:
        remote = forward.socket(port)
    except Exception:
        forward.close()
        connection.close()
        return
    try:
        peers = {connection: remote, remote: connection}
        while not stop.is_set():
            readable, _, _ = select.select(list(peers), [], [], 0.2)
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                peers[source].sendall(data)
    except OSError:
        return
    finally:
        connection.close()
        forward.close()


def _within(seconds: float, call: Callable[[], T]) -> T | None:
    """`call()` on a daemon thread; None when it failed or has not ended within `seconds`."""
    done: list[T] = []

    def run() -> None:
        try:
            done.append(call())
        except Exception:  # the relay closes the connection: the client sees it fail
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return done[0] if done else None
