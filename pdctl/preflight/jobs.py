"""The preflight's objects, built from the chart's render of the values: the probe pools (one
prefill, one decode) as the chart would run them, a ConfigMap holding the probe script, and one
Job per side that runs it with the pool's own image on the nodes the pool would land on.

What a probe pod takes from its pool's rendered pod template: the engine image (and pull policy
and pull secrets), nodeName, nodeSelector, node affinity, tolerations, runtimeClassName,
hostIPC/hostNetwork, the pod and container securityContext (IPC_LOCK included), the extended
resources (GPUs, rdma/*, and any other device plugin's), and the UCX_* and NIXL_* environment.
What it leaves out: the pool's pod affinity (it names the pool's own pods), its service account
(the chart creates it at install), CPU and memory (the probe needs little: its own requests).
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import manifests, naming, workloads

PROBE_FILE = Path(__file__).resolve().parent / "probe.py"
MOUNT = "/pdctl-preflight"
PORT = 5599  # the target's side channel (HTTP): agent metadata and the buffer's address
COMPONENT = "pdctl-preflight"
RUN = "pd-stack.io/preflight-run"
SIDE = "pd-stack.io/preflight-side"
POOL = "pd-stack.io/preflight-pool"
TARGET, INITIATOR = "target", "initiator"
# In a dry run's initiator Job: the address is known only once the target pod runs.
TARGET_PLACEHOLDER = f"<target pod IP>:{PORT}"
_ENV_PREFIXES = ("UCX_", "NIXL_")
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass
class ProbePool:
    """One engine pool as the chart renders it, as much as a probe pod copies."""

    name: str
    role: str
    image: str
    pod_spec: dict[str, Any]  # the rendered pod spec (all of it: the verdict reads it too)
    container: dict[str, Any]  # the engine container

    @property
    def extended_resources(self) -> dict[str, str]:
        limits = (self.container.get("resources") or {}).get("limits") or {}
        return {k: str(v) for k, v in limits.items() if k not in _STANDARD_RESOURCES}

    @property
    def rdma_resources(self) -> dict[str, str]:
        return {k: v for k, v in self.extended_resources.items() if k.startswith("rdma/")}

    @property
    def gpus(self) -> int:
        return sum(int(v) for k, v in self.extended_resources.items() if k.endswith("/gpu"))

    @property
    def ipc_lock(self) -> bool:
        capabilities = (self.container.get("securityContext") or {}).get("capabilities") or {}
        return "IPC_LOCK" in (capabilities.get("add") or [])

    @property
    def ucx_env(self) -> dict[str, str]:
        return {
            e["name"]: str(e["value"])
            for e in self.container.get("env") or []
            if e["name"].startswith(_ENV_PREFIXES) and "value" in e
        }

    @property
    def gpu_product(self) -> str | None:
        """The nvidia.com/gpu.product the pool is pinned to (nodeSelector or required node
        affinity with one value), if any."""
        selector = self.pod_spec.get("nodeSelector") or {}
        if GPU_PRODUCT_LABEL in selector:
            return str(selector[GPU_PRODUCT_LABEL])
        node = (self.pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        for term in required.get("nodeSelectorTerms") or []:
            for expression in term.get("matchExpressions") or []:
                values = expression.get("values") or []
                if (
                    expression.get("key") == GPU_PRODUCT_LABEL
                    and expression.get("operator") == "In"
                    and len(values) == 1
                ):
                    return str(values[0])
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "image": self.image,
            "gpus": self.gpus,
            "rdma_resources": self.rdma_resources,
            "ipc_lock": self.ipc_lock,
            "ucx_env": self.ucx_env,
            "node_selector": self.pod_spec.get("nodeSelector") or {},
            "tolerations": self.pod_spec.get("tolerations") or [],
        }


def engine_pools(objects: list[manifests.Manifest]) -> list[ProbePool]:
    """Every engine pool of a render (Deployments, LeaderWorkerSet leaders, DisaggregatedSet
    roles), in render order."""
    pools = []
    for obj in objects:
        if "helm.sh/hook" in (obj.get("metadata") or {}).get("annotations", {}):
            continue
        templates: list[dict[str, Any]] = []
        if obj.get("kind") == "Deployment":
            templates = [obj["spec"]["template"]]
        else:
            templates = [t for where, t in workloads.pod_templates(obj) if "leader" in where]
        for template in templates:
            labels = (template.get("metadata") or {}).get("labels") or {}
            if labels.get(naming.COMPONENT) != naming.ENGINE:
                continue
            container = template["spec"]["containers"][0]
            pools.append(
                ProbePool(
                    name=labels[naming.POOL],
                    role=labels.get(naming.ROLE, "both"),
                    image=container["image"],
                    pod_spec=template["spec"],
                    container=container,
                )
            )
    return pools


@dataclass
class ProbeJobs:
    """What one preflight creates: the ConfigMap and the two Jobs (the initiator's target address
    is filled in once the target pod has an IP)."""

    namespace: str
    run: str
    target: ProbePool  # prefill: holds the KV-sized buffer, as the prefill engine holds the KV
    initiator: ProbePool  # decode: reads it, as vLLM's NixlConnector does
    size_bytes: int
    timeout: int
    iterations: int = 5
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def config_map_name(self) -> str:
        return f"{COMPONENT}-{self.run}"

    def job_name(self, side: str) -> str:
        return f"{COMPONENT}-{self.run}-{side}"

    def selector(self, side: str) -> dict[str, str]:
        return {RUN: self.run, SIDE: side}

    def config_map(self) -> manifests.Manifest:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.config_map_name,
                "namespace": self.namespace,
                "labels": self.labels,
            },
            "data": {"probe.py": PROBE_FILE.read_text(encoding="utf-8")},
        }

    def objects(self) -> list[manifests.Manifest]:
        """Everything a run creates, in order (the initiator's target address a placeholder)."""
        return [self.config_map(), self.job(TARGET), self.job(INITIATOR, TARGET_PLACEHOLDER)]

    def job(self, side: str, target_address: str | None = None) -> manifests.Manifest:
        pool = self.target if side == TARGET else self.initiator
        args = [f"{MOUNT}/probe.py", side, "--timeout", str(self.timeout)]
        if side == TARGET:
            args += ["--size-bytes", str(self.size_bytes), "--port", str(PORT)]
        else:
            if not target_address:
                raise ValueError("the initiator's Job needs the target's address")
            args += ["--target", target_address, "--iterations", str(self.iterations)]
        labels = {**self.labels, **self.selector(side), POOL: pool.name}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": self.job_name(side),
                "namespace": self.namespace,
                "labels": labels,
            },
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": self.timeout + 600,  # image pull, then the probe's own
                "ttlSecondsAfterFinished": 3600,  # a safety net when pdctl cannot clean up
                "template": {
                    "metadata": {"labels": labels},
                    "spec": self._pod_spec(pool, side, args),
                },
            },
        }

    def _pod_spec(self, pool: ProbePool, side: str, args: list[str]) -> dict[str, Any]:
        source = pool.pod_spec
        memory = max(4 << 30, 2 * self.size_bytes + (2 << 30))
        extended = pool.extended_resources
        container: dict[str, Any] = {
            "name": "probe",
            "image": pool.image,
            "command": ["python3"],
            "args": args,
            "env": [
                *[{"name": k, "value": v} for k, v in pool.ucx_env.items()],
                _field_env("NODE_NAME", "spec.nodeName"),
                _field_env("POD_IP", "status.podIP"),
            ],
            "resources": {
                "requests": {"cpu": "1", "memory": "2Gi", **extended},
                "limits": {"memory": str(memory), **extended},
            },
            "volumeMounts": [
                {"name": "probe", "mountPath": MOUNT, "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
        }
        if side == TARGET:
            container["ports"] = [{"name": "side-channel", "containerPort": PORT}]
        for key in ("imagePullPolicy", "securityContext"):
            if key in pool.container:
                container[key] = copy.deepcopy(pool.container[key])
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": [
                {"name": "probe", "configMap": {"name": self.config_map_name}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            ],
        }
        for key in (
            "nodeName",
            "nodeSelector",
            "tolerations",
            "runtimeClassName",
            "hostIPC",
            "hostNetwork",
            "securityContext",
            "imagePullSecrets",
            "priorityClassName",
        ):
            if source.get(key) not in (None, "", [], {}):
                spec[key] = copy.deepcopy(source[key])
        affinity: dict[str, Any] = {}
        node_affinity = (source.get("affinity") or {}).get("nodeAffinity")
        if node_affinity:
            affinity["nodeAffinity"] = copy.deepcopy(node_affinity)
        # Apart if the nodes allow: the figure is then the network's, as between two pools.
        other = INITIATOR if side == TARGET else TARGET
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": self.selector(other)},
                    },
                }
            ]
        }
        spec["affinity"] = affinity
        return spec


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def new_run_id() -> str:
    return secrets.token_hex(3)


def plan(
    objects: list[manifests.Manifest],
    namespace: str,
    size_bytes: int,
    timeout: int,
    prefill_pool: str | None = None,
    decode_pool: str | None = None,
    run: str | None = None,
) -> ProbeJobs:
    """The preflight of a render: its first prefill and first decode pool (or the named ones).
    ValueError names what is missing."""
    pools = engine_pools(objects)

    def pick(role: str, name: str | None) -> ProbePool:
        if name is not None:
            for pool in pools:
                if pool.name == name:
                    return pool
            known = ", ".join(p.name for p in pools) or "none"
            raise ValueError(f"no engine pool named {name!r} (pools: {known})")
        for pool in pools:
            if pool.role == role:
                return pool
        roles = ", ".join(f"{p.name} ({p.role})" for p in pools) or "none"
        raise ValueError(f"the values render no {role} pool (pools: {roles})")

    run = run or new_run_id()
    return ProbeJobs(
        namespace=namespace,
        run=run,
        target=pick("prefill", prefill_pool),
        initiator=pick("decode", decode_pool),
        size_bytes=size_bytes,
        timeout=timeout,
        labels={
            "app.kubernetes.io/name": "pd-stack",
            naming.COMPONENT: COMPONENT,
            "app.kubernetes.io/managed-by": "pdctl",
            RUN: run,
        },
    )
