"""pdctl preflight: a probe Job pair on the pools' nodes, with the engine image, before a deploy."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import (
    ChartOpt,
    FilesArg,
    HelmOpt,
    NamespaceOpt,
    OutputOpt,
    ReleaseOpt,
    SetOpt,
    SkipValidationOpt,
    ValuesOpt,
    values_files,
)
from pdctl.cli._output import OutputFormat

if TYPE_CHECKING:
    from pdctl.preflight import DryRun, PreflightResult
    from pdctl.preflight.jobs import ProbePool
    from pdctl.preflight.orchestrate import Side


@handle_errors
def preflight(
    files: FilesArg = None,
    values: ValuesOpt = None,
    set_values: SetOpt = None,
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    timeout: Annotated[
        str,
        typer.Option(
            "--timeout",
            help="How long the probes may run once started (90s, 5m); image pulls get 10 "
            "minutes on top.",
        ),
    ] = f"{defaults.WAIT_S // 60}m",
    size_mb: Annotated[
        int,
        typer.Option("--size-mb", min=1, max=65536, help="Size of the KV-sized transfer, in MiB."),
    ] = 256,
    prefill_pool: Annotated[
        str | None,
        typer.Option(
            "--prefill-pool", help="The pool on the target side (default: the first prefill pool)."
        ),
    ] = None,
    decode_pool: Annotated[
        str | None,
        typer.Option(
            "--decode-pool", help="The pool on the initiator side (default: the first decode pool)."
        ),
    ] = None,
    gpu_type: Annotated[
        str | None,
        typer.Option(
            "--gpu-type",
            help="GPU from the catalog, for the planner's assumed link (default: the GPU "
            "product the pools' nodeSelector names).",
        ),
    ] = None,
    network_gbps: Annotated[
        float | None,
        typer.Option(
            "--network-gbps",
            min=0.001,
            max=limits.NETWORK_GBPS_MAX,
            help="The KV bandwidth the plan assumed, GB/s per GPU.",
        ),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Leave the Jobs, their pods and the ConfigMap (to read logs)."),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the Jobs and ConfigMap it would create and the checks it would make, "
            "from the render alone (no cluster contacted; -o json has the objects).",
        ),
    ] = False,
    chart: ChartOpt = None,
    skip_validation: SkipValidationOpt = False,
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
) -> None:
    """Before a deploy: probe NIXL, UCX, RDMA and a KV transfer on the pools' nodes.

    Runs a Job with the prefill pool's image on its nodes and one with the decode pool's on
    theirs (nodeSelector, affinity, tolerations, GPU and rdma/* resources, IPC_LOCK, UCX_*
    settings as the chart renders them); the decode side reads a KV-sized buffer from the
    prefill side with NIXL. Exit 1 when an image lacks NIXL or UCX, a probe cannot run, or the
    transfer fails; 0 otherwise, warnings included (TCP, no rdma/* resource, no IPC_LOCK,
    UCX_NET_DEVICES naming a missing device)."""
    from pdctl import preflight as preflights  # lazy: start-up
    from pdctl.release import parse_timeout  # lazy: start-up

    options = preflights.Options(
        values_files=values_files(files, values),
        set_values=tuple(set_values or ()),
        release=release,
        namespace=namespace,
        chart=chart,
        helm_path=helm,
        skip_validation=skip_validation,
        size_bytes=size_mb << 20,
        timeout=parse_timeout(timeout),
        prefill_pool=prefill_pool,
        decode_pool=decode_pool,
        gpu_type=gpu_type,
        network_gbps=network_gbps,
        keep=keep,
    )
    if dry_run:
        _show(preflights.dry_run(options), output, _print_dry_run)
        return
    result = preflights.preflight(
        options, say=_output.info if output is OutputFormat.text else lambda _: None
    )
    _show(result, output, _print)
    if not result.verdict.ok:
        raise typer.Exit(1)


def _show(found: Any, output: OutputFormat, text: Callable[[Any], None]) -> None:
    """The warnings, then the result as JSON or as `text` prints it."""
    for warning in found.warnings:
        _output.info(warning)
    if output is OutputFormat.json:
        _output.as_json(found.as_dict())
    else:
        text(found)


def _print(result: PreflightResult) -> None:
    plan, run, verdict = result.plan, result.run, result.verdict
    lines = [f"preflight {plan.run} in namespace {plan.namespace}, {plan.size_bytes >> 20} MiB:"]
    for side, pool in ((run.target, plan.target), (run.initiator, plan.initiator)):
        lines.append(f"  {side.side} ({pool.role} pool {pool.name}, {pool.image}): {_found(side)}")
    transfer = ((run.initiator.report or {}).get("transfer")) or {}
    if verdict.measured_gbps is not None:
        lines.append(
            f"  transfer: {transfer.get('operation', 'READ')} of {transfer.get('bytes', 0)} bytes "
            f"{transfer.get('memory', '?')} <- {transfer.get('remote_memory', '?')}: "
            f"{verdict.measured_gbps:.2f} GB/s (median of {transfer.get('iterations', '?')}, best "
            f"{transfer.get('best_gbps', '?')}), as fast as {verdict.measured_link}; UCX chose "
            f"{', '.join(verdict.transports) or 'transports it did not print'}"
        )
    else:
        lines.append("  transfer: none measured")
    lines.append(f"  planner assumed: {verdict.assumed.source}")
    for finding in verdict.findings:
        lines.append(f"{finding.level}: [{finding.id}] {finding.message}")
        if finding.hint:
            lines.append(f"  fix: {finding.hint}")
    if run.kept:
        lines.append(
            "kept: "
            + ", ".join(f"{kind}/{name}" for kind, name in run.created)
            + f" (kubectl delete job,configmap -n {plan.namespace} "
            f"-l pd-stack.io/preflight-run={plan.run})"
        )
    lines.append(f"preflight {verdict.outcome}")
    _output.data("\n".join(lines))


def _print_dry_run(planned: DryRun) -> None:
    from pdctl.preflight.jobs import INITIATOR, TARGET  # lazy: start-up
    from pdctl.preflight.verdict import CHECKS  # lazy: start-up

    plan = planned.plan
    lines = [
        f"preflight dry run (no cluster contacted): in namespace {plan.namespace} it would create",
        f"  ConfigMap {plan.config_map_name}: the probe script",
    ]
    for side, when, pool, does in (
        (TARGET, "", plan.target, f"holds a {plan.size_bytes >> 20} MiB buffer"),
        (INITIATOR, ", once that pod has an IP", plan.initiator, "reads the buffer with NIXL"),
    ):
        lines.append(
            f"  Job {plan.job_name(side)}{when}: {pool.role} pool {pool.name}'s image "
            f"{pool.image}, {pool.gpus} GPU(s), {_placement(pool)}; {does}"
        )
    lines += [
        f"then wait up to {plan.timeout}s for the probes (image pulls get 10 minutes more), read "
        "each pod's report and delete the three objects (--keep leaves them)",
        "it would refuse or warn when:",
        *(f"  {level} [{key}] {when}" for key, level, when in CHECKS),
        f"planner assumed: {planned.assumed.source}",
    ]
    for finding in planned.findings:
        lines.append(f"{finding.level} (from the render alone): [{finding.id}] {finding.message}")
        if finding.hint:
            lines.append(f"  fix: {finding.hint}")
    _output.data("\n".join(lines))


def _placement(pool: ProbePool) -> str:
    selector = pool.pod_spec.get("nodeSelector") or {}
    where = ", ".join(f"{k}={v}" for k, v in selector.items())
    return f"on nodes with {where}" if where else "on any node its affinity allows"


def _found(side: Side) -> str:
    report = side.report
    if report is None:
        return f"no report ({side.reason or side.phase or 'not started'})"
    nixl = report.get("nixl") or {}
    ucx = (report.get("ucx") or {}).get("version")
    rdma = ", ".join(d["name"] for d in report.get("rdma_devices") or []) or "no RDMA device"
    gpus = len(report.get("gpus") or [])
    return (
        f"node {side.node or report.get('node') or '?'}, {gpus} GPU(s), {rdma}, "
        f"{nixl.get('version') or 'no nixl'}, UCX {ucx or '?'}"
    )
