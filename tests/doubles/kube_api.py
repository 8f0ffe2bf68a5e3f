"""A TEST DOUBLE of the Kubernetes API server, not Kubernetes: an HTTP server on 127.0.0.1 that the
real helm binaries (3.x and 4.x) install into, upgrade, wait on, roll back from and uninstall
from, and that the official `kubernetes` Python client reads pods, events and logs from (and
port-forwards through).

What helm needs from it, found by logging every path it asked for (`KubeAPIDouble.unknown` lists
what the double did not serve):
- discovery: GET /version, /api, /apis, /api/v1, /apis/<group>/<version> (the legacy forms: the
  aggregated-discovery Accept header is answered with plain JSON, and client-go falls back);
  GET /openapi/v2 (answered with an empty protobuf document: client-side validation then knows
  no type and skips it), /openapi/v3 (404: no field-validation query parameter check);
- CRUD of namespaced objects with resourceVersion and generation; Secrets labelled
  owner=helm,name=<release> are helm's release storage (list by label selector, create, PUT);
- Helm 3 updates objects with a strategic merge patch (three-way), Helm 4 with server-side apply
  (PATCH application/apply-patch+yaml, simplified here: the applied object replaces what was
  there, keeping system fields, status and allocated IPs); JSON merge and JSON patch are served
  too; DELETE with background or orphan propagation (owner references);
- waiting: Helm 3's legacy check GETs each Deployment and LISTs its ReplicaSets by label selector
  (the new ReplicaSet's readyReplicas against replicas - maxUnavailable), PVCs must be Bound and
  Services have a cluster IP; Helm 4's watcher WATCHes each kind as a streaming list
  (sendInitialEvents: the objects as ADDED events, then a BOOKMARK that ends them; plain LIST
  then WATCH works too) and reads kstatus from them: the Deployment's observedGeneration,
  replicas, updatedReplicas, readyReplicas, availableReplicas and Available/Progressing
  conditions, a PVC's Bound phase.

The controllers it plays (Deployments, ReplicaSets, a scheduler with `gpus` GPUs on one node, a
kubelet that makes pods Ready at once or fails them as told) are in kube_state.py, with what they
leave out. Use it as a context manager; `write_kubeconfig` points helm and the client at it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import select
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.doubles import kube_protobuf
from tests.doubles.kube_patch import (
    fields_match,
    json_patch,
    labels_match,
    merge_patch,
    strategic_merge,
)
from tests.doubles.kube_state import ApiError, Behaviour, Obj, State

SERVER_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2025-04-23T00:00:00Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# (group, version, plural, kind, namespaced, subresources)
RESOURCES = [
    ("", "v1", "namespaces", "Namespace", False, ()),
    ("", "v1", "pods", "Pod", True, ("log", "portforward", "status")),
    ("", "v1", "services", "Service", True, ("status",)),
    ("", "v1", "secrets", "Secret", True, ()),
    ("", "v1", "configmaps", "ConfigMap", True, ()),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ()),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",)),
    ("", "v1", "events", "Event", True, ()),
    ("apps", "v1", "deployments", "Deployment", True, ("status", "scale")),
    ("apps", "v1", "replicasets", "ReplicaSet", True, ("status", "scale")),
    ("batch", "v1", "jobs", "Job", True, ("status",)),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, ()),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, ()),
]
_BY_PLURAL = {(g, v, plural): (kind, namespaced) for g, v, plural, kind, namespaced, _ in RESOURCES}
_GROUPS = sorted({(g, v) for g, v, *_ in RESOURCES if g})
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+)(?=/[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _status(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    double: KubeAPIDouble

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An exception in a handler is kept (KubeAPIDouble.errors), not printed. A client that
        went away (helm closes its watches when its wait ends) is no error."""
        if isinstance(sys.exc_info()[1], ConnectionError) or self.double.stopping.is_set():
            return
        self.double.errors.append(traceback.format_exc())


class KubeAPIDouble:
    """A Kubernetes API server TEST DOUBLE (see the module docstring). Knobs for each test:
    `gpus` (allocatable nvidia.com/gpu on its one node), `fail_pull(image)`,
    `crash(image, log_lines)`, `forward(pod, port, local_port)` (port-forward target)."""

    def __init__(self, gpus: int = 8):
        self.behaviour = Behaviour(gpus=gpus)
        self.state = State(self.behaviour)
        self.requests: list[str] = []  # "METHOD /path?query", in order
        self.unknown: list[str] = []  # requests it had no answer for
        self.forwards: dict[tuple[str, int], int] = {}
        self.errors: list[str] = []  # tracebacks of the double's own failures
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.double = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # ---- lifecycle
    def __enter__(self) -> KubeAPIDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        with self.state.lock:
            self.state.changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, directory: Path, namespace: str = "default") -> Path:
        path = directory / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "double", "user": {"token": "test-double"}}],
            "contexts": [
                {
                    "name": "double",
                    "context": {"cluster": "double", "user": "double", "namespace": namespace},
                }
            ],
            "current-context": "double",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # ---- knobs
    @property
    def gpus(self) -> int:
        return self.behaviour.gpus

    @gpus.setter
    def gpus(self, value: int) -> None:
        with self.state.lock:
            self.behaviour.gpus = value
            self.state.reconcile()

    def fail_pull(self, image: str) -> None:
        self.behaviour.pull_errors.add(image)

    def crash(self, image: str, log_lines: list[str]) -> None:
        self.behaviour.crashing[image] = list(log_lines)

    def job_outcome(self, outcome: Callable[[Obj], tuple[int, list[str]] | None]) -> None:
        """How each Job's pod ends: outcome(pod) gives (exit code, log lines), or None to keep it
        running for now (it is asked again at the next change in the store)."""
        with self.state.lock:
            self.behaviour.job_outcome = outcome
            self.state.reconcile()

    def forward(self, pod: str, port: int, local_port: int) -> None:
        """Port-forwards to `pod`:`port` reach 127.0.0.1:`local_port`."""
        self.forwards[(pod, port)] = local_port

    # ---- inspection
    # Asked for by client-go and answered 404 on purpose: it then skips the field-validation
    # check it would use OpenAPI v3 for.
    EXPECTED_404 = ("/openapi/v3",)

    def problems(self) -> list[str]:
        """The double's own failures (tracebacks) and the requests it had no answer for, other
        than EXPECTED_404: each test asserts there are none."""
        unknown = [r for r in self.unknown if r.split()[1].split("?")[0] not in self.EXPECTED_404]
        return self.errors + [f"not served: {request}" for request in unknown]

    def items(self, plural: str, namespace: str | None = "default", labels: str = "") -> list[Obj]:
        with self.state.lock:
            return self.state.list(plural, namespace, labels)

    def release_secrets(self, release: str, namespace: str = "default") -> list[Obj]:
        return self.items("secrets", namespace, f"owner=helm,name={release}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per response (headers and body together; flushed after each request) and no
    # Nagle: otherwise each answer waits for the client's delayed ACK, tens of milliseconds.
    wbufsize = -1
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    @property
    def double(self) -> KubeAPIDouble:
        return self.server.double

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ---- plumbing
    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _object(self, body: bytes) -> Obj:
        """A request body: JSON, or the protobuf helm's typed client sends for Secrets."""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == "application/vnd.kubernetes.protobuf":
            try:
                return kube_protobuf.to_json_object(body)
            except ValueError as error:
                raise ApiError(415, "UnsupportedMediaType", str(error)) from None
        return json.loads(body)

    def _send(self, code: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.double.requests.append(f"{method} {self.path}")
        import os

        if os.environ.get("DOUBLE_HEADERS"):
            print(
                method,
                self.path,
                self.headers.get("Content-Type"),
                self.headers.get("Accept"),
                flush=True,
            )
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        try:
            if method == "GET" and self._discovery(url.path):
                return
            match = _PATH.match(url.path)
            resource = None
            if match:
                group = match["group"] or ""
                version = match["core"] or match["version"]
                resource = _BY_PLURAL.get((group, version, match["plural"]))
            if not match or resource is None:
                self._unknown(method)
                return
            self._resource(method, match, resource, query, body)
        except ApiError as error:
            self._send(error.code, _status(error.code, error.reason, error.message))
        except OSError:  # the client went away
            pass

    def _unknown(self, method: str) -> None:
        self.double.unknown.append(f"{method} {self.path}")
        self._send(
            404, _status(404, "NotFound", "the server could not find the requested resource")
        )

    # ---- discovery
    def _discovery(self, path: str) -> bool:
        path = path.rstrip("/") or "/"  # the Python client asks for /version/
        if path == "/version":
            self._send(200, SERVER_VERSION)
        elif path == "/api":
            self._send(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                    ],
                },
            )
        elif path == "/apis":
            groups = {}
            for group, version in _GROUPS:
                entry = {"groupVersion": f"{group}/{version}", "version": version}
                groups[group] = {"name": group, "versions": [entry], "preferredVersion": entry}
            self._send(
                200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
            )
        elif path == "/api/v1" or (path.startswith("/apis/") and path.count("/") == 3):
            group_version = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
            group, _, version = group_version.rpartition("/")
            resources = []
            for g, v, plural, kind, namespaced, subs in RESOURCES:
                if (g, v) != (group, version):
                    continue
                verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
                resources.append(
                    {
                        "name": plural,
                        "singularName": kind.lower(),
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": verbs,
                    }
                )
                resources += [
                    {
                        "name": f"{plural}/{sub}",
                        "singularName": "",
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": ["get"],
                    }
                    for sub in subs
                ]
            if not resources:
                return False
            self._send(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": resources,
                },
            )
        elif path == "/openapi/v2":
            # An empty protobuf message is an empty OpenAPI document: no types, nothing to check.
            self._send(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        else:
            return False
        return True

    # ---- objects
    def _resource(
        self,
        method: str,
        match: re.Match[str],
        resource: tuple[str, bool],
        query: dict[str, str],
        body: bytes,
    ) -> None:
        kind, namespaced = resource
        plural, name, sub = match["plural"], match["name"], match["sub"]
        ns = (match["ns"] or "") if namespaced else ""
        state = self.double.state
        api_version = f"{match['group']}/{match['version']}" if match["group"] else "v1"
        if namespaced and not match["ns"] and (name or method != "GET"):
            self._unknown(method)
            return
        if sub == "log" and method == "GET":
            self._log(ns, name, query)
            return
        if sub == "portforward":
            self._portforward(ns, name, query)
            return
        if sub:
            self._unknown(method)
            return
        if method == "GET" and name is None:
            if query.get("watch") in ("true", "1"):
                namespace = ns if namespaced and match["ns"] else None
                self._watch(plural, namespace, query, (api_version, kind))
                return
            with state.lock:
                items = state.list(
                    plural,
                    ns if match["ns"] or not namespaced else None,
                    query.get("labelSelector"),
                    query.get("fieldSelector"),
                )
                self._send(
                    200,
                    {
                        "kind": f"{kind}List",
                        "apiVersion": api_version,
                        "metadata": {"resourceVersion": str(state.version)},
                        "items": items,
                    },
                )
            return
        if method == "GET":
            with state.lock:
                self._send(200, state.get(plural, ns, name))
            return
        dry_run = query.get("dryRun") == "All"
        if method == "POST":
            obj = self._object(body)
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            if dry_run:
                self._send(201, obj)
                return
            self._send(201, state.create(plural, ns, obj))
            return
        if method == "DELETE":
            options = self._object(body) if body else {}
            policy = query.get("propagationPolicy") or options.get("propagationPolicy") or ""
            deleted = state.delete(plural, ns, name, orphan=policy == "Orphan")
            self._send(200, deleted)
            return
        if method == "PUT":
            obj = self._object(body)
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            if obj.get("metadata", {}).get("name") != name:
                raise ApiError(
                    400, "BadRequest", "the name of the object does not match the name on the URL"
                )
            self._send(200, state.replace(plural, ns, obj, obj["metadata"].get("resourceVersion")))
            return
        if method == "PATCH":
            self._patch(plural, ns, name, kind, api_version, body, query)
            return
        self._unknown(method)

    def _patch(
        self,
        plural: str,
        ns: str,
        name: str,
        kind: str,
        api_version: str,
        body: bytes,
        query: dict[str, str],
    ) -> None:
        state = self.double.state
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        with state.lock:
            if content_type == "application/apply-patch+yaml":
                applied = yaml.safe_load(body)
                current = state.find(plural, ns, name)
                if current is None:
                    self._send(201, state.create(plural, ns, applied))
                    return
                merged = {**applied, "metadata": {**applied.get("metadata", {})}}
                merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                self._send(200, state.replace(plural, ns, merged))
                return
            current = state.get(plural, ns, name)
            patch = json.loads(body)
            if content_type == "application/strategic-merge-patch+json":
                updated = strategic_merge(current, patch)
            elif content_type == "application/merge-patch+json":
                updated = merge_patch(current, patch)
            elif content_type == "application/json-patch+json":
                updated = json_patch(current, patch)
            else:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format: {content_type}",
                )
            updated.setdefault("metadata", {})["name"] = name
            self._send(200, state.replace(plural, ns, updated))

    def _watch(
        self, plural: str, namespace: str | None, query: dict[str, str], type_: tuple[str, str]
    ) -> None:
        state = self.double.state
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")

        def wanted(event_plural: str, obj: Obj) -> bool:
            return (
                event_plural == plural
                and (namespace is None or obj["metadata"].get("namespace", "") == namespace)
                and labels_match(labels, obj["metadata"].get("labels"))
                and fields_match(fields, obj)
            )

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True

        def emit(event: str, obj: Obj) -> None:
            line = json.dumps({"type": event, "object": obj}).encode() + b"\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()

        with state.lock:
            since = query.get("resourceVersion") or "0"
            pending: list[tuple[str, Obj]] = []
            if since == "0" or query.get("sendInitialEvents") == "true":
                pending = [("ADDED", obj) for obj in state.list(plural, namespace, labels, fields)]
                since = str(state.version)
                if query.get("sendInitialEvents") == "true":
                    # The end of the initial events, as a watch-list client waits for it.
                    bookmark = {
                        "apiVersion": type_[0],
                        "kind": type_[1],
                        "metadata": {
                            "resourceVersion": since,
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }
                    pending.append(("BOOKMARK", bookmark))
            position = int(since)
        try:
            for event, obj in pending:
                emit(event, obj)
            while not self.double.stopping.is_set() and time.monotonic() < deadline:
                with state.lock:
                    fresh = [
                        (event, obj)
                        for version, event, p, obj in state.log
                        if version > position and wanted(p, obj)
                    ]
                    position = state.version
                    if not fresh:
                        state.changed.wait(timeout=0.5)
                        continue
                for event, obj in fresh:
                    emit(event, obj)
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, ValueError):  # the client went away (ValueError: a closed file)
            pass

    def _log(self, ns: str, name: str, query: dict[str, str]) -> None:
        state = self.double.state
        with state.lock:
            state.get("pods", ns, name)
            lines = state.pod_logs.get((ns, name), [])
        tail = int(query["tailLines"]) if "tailLines" in query else None
        if tail is not None:
            lines = lines[-tail:] if tail else []
        self._send(200, "".join(line + "\n" for line in lines).encode(), "text/plain")

    # ---- port-forward: WebSocket with the v4.channel.k8s.io framing the client speaks
    def _portforward(self, ns: str, name: str, query: dict[str, str]) -> None:
        state = self.double.state
        with state.lock:
            state.get("pods", ns, name)
        if (self.headers.get("Upgrade") or "").lower() != "websocket":
            raise ApiError(400, "BadRequest", "port-forward needs a WebSocket upgrade")
        port = int(query.get("ports", "0").split(",")[0])
        accept = base64.b64encode(
            hashlib.sha1((self.headers["Sec-WebSocket-Key"] + _WS_GUID).encode()).digest()
        ).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        client = self.connection
        port_bytes = struct.pack("<H", port)
        _ws_send(client, b"\x00" + port_bytes)
        _ws_send(client, b"\x01" + port_bytes)
        target = self.double.forwards.get((name, port))
        try:
            upstream = (
                socket.create_connection(("127.0.0.1", target), timeout=5) if target else None
            )
        except OSError:
            upstream = None
        if upstream is None:
            message = f"error forwarding port {port} to pod {name}: connection refused"
            _ws_send(client, b"\x01" + message.encode())
            _ws_send(client, b"", opcode=8)
            return
        _pump(client, self.rfile, upstream, self.double.stopping)


def _ws_send(sock: socket.socket, payload: bytes, opcode: int = 2) -> None:
    header = bytes([0x80 | opcode])
    if len(payload) < 126:
        header += bytes([len(payload)])
    elif len(payload) < 1 << 16:
        header += bytes([126]) + struct.pack(">H", len(payload))
    else:
        header += bytes([127]) + struct.pack(">Q", len(payload))
    sock.sendall(header + payload)


def _ws_read(stream: Any) -> tuple[int, bytes] | None:
    head = stream.read(2)
    if len(head) < 2:
        return None
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if length == 126:
        length = struct.unpack(">H", stream.read(2))[0]
    elif length == 127:
        length = struct.unpack(">Q", stream.read(8))[0]
    mask = stream.read(4) if head[1] & 0x80 else b"\x00\x00\x00\x00"
    data = bytearray(stream.read(length))
    for i in range(len(data)):
        data[i] ^= mask[i % 4]
    return opcode, bytes(data)


def _pump(
    client: socket.socket, client_stream: Any, upstream: socket.socket, stopping: threading.Event
) -> None:
    """Copy bytes between the WebSocket's data channel 0 and the upstream TCP connection."""

    def from_upstream() -> None:
        try:
            while not stopping.is_set():
                ready, _, _ = select.select([upstream], [], [], 0.5)
                if not ready:
                    continue
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                _ws_send(client, b"\x00" + chunk)
            _ws_send(client, b"", opcode=8)
        except OSError:
            pass

    thread = threading.Thread(target=from_upstream, daemon=True)
    thread.start()
    try:
        while not stopping.is_set():
            frame = _ws_read(client_stream)
            if frame is None or frame[0] == 8:
                break
            opcode, data = frame
            if opcode == 2 and data[:1] == b"\x00" and len(data) > 1:
                upstream.sendall(data[1:])
    except OSError:
        pass
    finally:
        try:
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        thread.join(timeout=5)
        upstream.close()


@contextmanager
def serving(directory: Path, env: Any, gpus: int = 8) -> Iterator[KubeAPIDouble]:
    """A running double that helm and the kubernetes client use: a kubeconfig in `directory` as
    $KUBECONFIG, and helm's cache, config and data homes there too (`env` is pytest's
    monkeypatch, anything with setenv). On the way out, no request may have broken the
    protocol the double checks."""
    with KubeAPIDouble(gpus=gpus) as api:
        env.setenv("KUBECONFIG", str(api.write_kubeconfig(directory)))
        for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env.setenv(name, str(directory / name.lower()))
        yield api
        assert not api.problems()
