"""Judging a preflight: refuse (an image without NIXL or its UCX backend, a probe pod that could not
run, a transfer that failed), warn (TCP speed or a TCP transport, no rdma/* resource, no IPC_LOCK,
UCX_NET_DEVICES naming a device the pod does not have, both probes on one node, far below what the
planner assumed), else pass; and what the planner assumed against what was measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pdctl import ucx
from pdctl.models import catalog, links
from pdctl.preflight.jobs import INITIATOR, TARGET, ProbeJobs, ProbePool
from pdctl.preflight.orchestrate import ProbeRun, Side

REFUSE, WARN = "refuse", "warn"
# Every finding a verdict can give, in words (what `pdctl preflight --dry-run` lists).
CHECKS = (
    ("probe-not-run", REFUSE, "a probe pod cannot be scheduled, pull its image or start"),
    ("no-nixl", REFUSE, "an image cannot import NIXL with its UCX backend"),
    ("transfer-failed", REFUSE, "the KV-sized NIXL transfer between the pods fails"),
    ("ucx-unknown", WARN, "NIXL starts but no UCX library is found"),
    ("no-rdma-resource", WARN, "a pool requests no rdma/* resource"),
    ("no-ipc-lock", WARN, "a pool does not add capability IPC_LOCK"),
    ("no-rdma-device", WARN, "a pod requests rdma/* but sees no device in /sys/class/infiniband"),
    ("ucx-net-devices", WARN, "UCX_NET_DEVICES names a device the pod does not have"),
    ("tcp", WARN, "the transfer runs over TCP, not RDMA"),
    ("below-assumption", WARN, "the transfer is far below the bandwidth the planner assumed"),
    ("same-node", WARN, "both probe pods run on one node"),
)


@dataclass
class ProbeFinding:
    level: str  # refuse | warn
    id: str
    message: str
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Assumption:
    """What the planner's KV transfer estimate assumes for these pools."""

    gbps: float | None
    source: str  # in words: --network-gbps, or the GPU catalog's link for the GPU type

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    findings: list[ProbeFinding]
    assumed: Assumption
    measured_gbps: float | None
    measured_link: str | None
    transports: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.level == REFUSE for f in self.findings)

    @property
    def outcome(self) -> str:
        if not self.ok:
            return "refused"
        return "passed with warnings" if self.findings else "passed"

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "outcome": self.outcome,
            "assumed": self.assumed.as_dict(),
            "measured_gbps": self.measured_gbps,
            "measured_link": self.measured_link,
            "transports": self.transports,
            "findings": [f.as_dict() for f in self.findings],
        }


def assumption(
    plan: ProbeJobs, gpu_type: str | None = None, network_gbps: float | None = None
) -> Assumption:
    """--network-gbps, else the GPU catalog's link for the GPU type (--gpu-type, or the GPU
    product the pools are pinned to by nvidia.com/gpu.product), as `pdctl plan` assumes."""
    if network_gbps:
        return Assumption(network_gbps, f"{network_gbps:g} GB/s per GPU (--network-gbps)")
    gpu = None
    if gpu_type:
        gpu = catalog.gpu(gpu_type)
    else:
        products = {p.gpu_product for p in (plan.target, plan.initiator)} - {None}
        gpu = next(
            (g for g in catalog.gpus().values() if g.product_label and g.product_label in products),
            None,
        )
    if gpu is None:
        return Assumption(
            None,
            "unknown: the pools name no GPU product the catalog knows (pass --gpu-type or "
            "--network-gbps)",
        )
    link = links.load().by_id(gpu.network)
    return Assumption(
        link.gbps,
        f"{link.gbps:g} GB/s per GPU, {link.name} (the GPU catalog's link for {gpu.name})",
    )


def judge(plan: ProbeJobs, run: ProbeRun, assumed: Assumption) -> Verdict:
    findings: list[ProbeFinding] = []
    for side, pool in ((run.target, plan.target), (run.initiator, plan.initiator)):
        findings += _side(side, pool)
        findings += _pool_settings(side, pool)
    transfer = (run.initiator.report or {}).get("transfer") or {}
    gbps = transfer.get("gbps") if isinstance(transfer.get("gbps"), int | float) else None
    table = links.load()
    matched = table.matching(float(gbps)) if gbps is not None else None
    rma = _transports(run.initiator.report)
    if run.initiator.report and run.initiator.report.get("ok") and gbps is not None:
        advice = tcp_advice(run)
        findings += _speed(float(gbps), matched, rma, assumed, table.minimum_fraction, advice)
        if run.target.node and run.target.node == run.initiator.node:
            findings.append(
                ProbeFinding(
                    WARN,
                    "same-node",
                    f"both probe pods ran on node {run.target.node}: the transfer stayed inside "
                    "one node, so it says little about the network between the pools",
                    "free a second matching node, or accept that prefill and decode share nodes",
                )
            )
    return Verdict(
        findings=findings,
        assumed=assumed,
        measured_gbps=float(gbps) if gbps is not None else None,
        measured_link=matched.name if matched else None,
        transports=rma,
    )


def from_render(plan: ProbeJobs) -> list[ProbeFinding]:
    """What the pools' render alone shows, before any probe runs (a dry run's findings)."""
    return [
        finding
        for side, pool in ((TARGET, plan.target), (INITIATOR, plan.initiator))
        for finding in _pool_settings(Side(side, pool.name), pool)
    ]


def _side(side: Side, pool: ProbePool) -> list[ProbeFinding]:
    where = f"{side.side} probe ({pool.role} pool {pool.name}, image {pool.image})"
    report = side.report
    if report is None:
        if side.pod is None:
            why = "was not started (the other probe did not get that far)"
        elif side.phase == "Pending" or side.reason:
            why = f"did not run: {side.reason or side.phase}: {side.message or ''}".rstrip(": ")
        else:
            why = f"ended {side.phase} without a report"
        tail = f"; last log lines: {' | '.join(side.logs[-5:])}" if side.logs else ""
        return [ProbeFinding(REFUSE, "probe-not-run", f"the {where} {why}{tail}")]
    nixl = report.get("nixl") or {}
    if not nixl.get("importable") or not nixl.get("ucx_backend"):
        return [
            ProbeFinding(
                REFUSE,
                "no-nixl",
                f"the {where} cannot move KV with NIXL over UCX: "
                f"{nixl.get('error') or 'no UCX backend'}",
                "use an engine image that ships NIXL with its UCX backend (vllm/vllm-openai "
                "images do), or a connector that does not need it",
            )
        ]
    found = []
    if not (report.get("ucx") or {}).get("version"):
        found.append(
            ProbeFinding(
                WARN, "ucx-unknown", f"the {where}: NIXL started but no UCX library was found"
            )
        )
    if not report.get("ok"):
        found.append(
            ProbeFinding(
                REFUSE,
                "transfer-failed",
                f"the {where} failed: {report.get('error') or 'no reason given'}",
                "the probe's log (pdctl preflight --keep, then kubectl logs) has UCX's own words",
            )
        )
    return found


def _pool_settings(side: Side, pool: ProbePool) -> list[ProbeFinding]:
    found = []
    name = f"{pool.role} pool {pool.name}"
    report = side.report or {}
    if not pool.rdma_resources:
        found.append(
            ProbeFinding(
                WARN,
                "no-rdma-resource",
                f"the {name} requests no rdma/* resource: its pods get no RDMA device from a "
                "device plugin, and UCX falls back to TCP between nodes",
                "set network.rdmaResource (e.g. rdma/ib) for the pool, as the cluster's RDMA "
                "device plugin names it",
            )
        )
    held = (report.get("capabilities") or {}).get("ipc_lock")
    if not pool.ipc_lock and held is not True:
        found.append(
            ProbeFinding(
                WARN,
                "no-ipc-lock",
                f"the {name} does not add capability IPC_LOCK: RDMA memory registration pins "
                "memory and may fail against the locked-memory limit",
                "set network.ipcLock: true for the pool",
            )
        )
    if report and pool.rdma_resources and not report.get("rdma_devices"):
        found.append(
            ProbeFinding(
                WARN,
                "no-rdma-device",
                f"the {name} requests {', '.join(pool.rdma_resources)} but its probe pod saw no "
                "device in /sys/class/infiniband",
                "check the RDMA device plugin on the node and the resource name",
            )
        )
    devices = pool.ucx_env.get("UCX_NET_DEVICES") or (report.get("ucx_env") or {}).get(
        "UCX_NET_DEVICES"
    )
    if report and devices and devices != "all":
        present = {d["name"] for d in report.get("rdma_devices") or []}
        present |= set(report.get("net_interfaces") or [])
        missing = [d for d in devices.split(",") if d.split(":")[0] not in present]
        if missing:
            found.append(
                ProbeFinding(
                    WARN,
                    "ucx-net-devices",
                    f"UCX_NET_DEVICES of the {name} names {', '.join(missing)}, which its probe "
                    f"pod on node {side.node or '?'} does not have (it has: "
                    f"{', '.join(sorted(present)) or 'none'})",
                    "set network.ucxNetDevices to devices the nodes have (or leave it out)",
                )
            )
    return found


def _transports(report: dict[str, Any] | None) -> list[str]:
    """The transports UCX chose for remote memory access between the two pods (the tables of
    the other node's scope first), else for any operation."""
    tables = (report or {}).get("transports") or []
    rma = [t for t in tables if str(t.get("operation", "")).startswith("remote memory")]
    chosen: list[str] = []
    for table in rma or tables:
        for transport in table.get("transports") or []:
            if transport not in chosen:
                chosen.append(str(transport))
    return chosen


RDMA_ADVICE = (
    "give the pools an RDMA device (network.rdmaResource), IPC_LOCK (network.ipcLock) and "
    "UCX_TLS/UCX_NET_DEVICES that name it"
)


def tcp_advice(run: ProbeRun) -> str:
    """What fixes a transfer at TCP speed: with both probe pods on one node, UCX's CUDA IPC reads
    (pdctl/ucx.py); with their nodes unknown, the RDMA settings and that as a conditional; else
    the RDMA settings."""
    if not run.target.node or not run.initiator.node:
        return f"{RDMA_ADVICE}; {ucx.cluster_hint()}"
    if run.target.node == run.initiator.node:
        return ucx.same_host_hint(f"both probe pods ran on node {run.target.node}")
    return RDMA_ADVICE


def _speed(
    gbps: float,
    matched: links.Link | None,
    transports: list[str],
    assumed: Assumption,
    fraction: float,
    advice: str,
) -> list[ProbeFinding]:
    found = []
    tcp = [t for t in transports if t.startswith("tcp/")]
    slow = matched is not None and not matched.rdma
    if tcp or slow:
        why = (
            f"UCX chose {', '.join(tcp)}"
            if tcp
            else f"the speed matches {matched and matched.name}"
        )
        found.append(
            ProbeFinding(
                WARN,
                "tcp",
                f"the KV transfer ran at {gbps:.2f} GB/s over TCP ({why}): no RDMA transport "
                "was used",
                advice,
            )
        )
    if assumed.gbps and gbps < assumed.gbps * fraction:
        found.append(
            ProbeFinding(
                WARN,
                "below-assumption",
                f"measured {gbps:.2f} GB/s, below {fraction:g} x the {assumed.gbps:g} GB/s the "
                "planner assumed: time to first token will be longer than planned",
                "fix the transport (above), or plan with --network-gbps "
                f"{gbps:.2f} to size for what the cluster gives",
            )
        )
    return found
