"""Human summary of a render."""

from __future__ import annotations

from pdctl.cli._output import Screen
from pdctl.manifests import Summary


def print_summary(summary: Summary, release: str) -> None:
    """One short block per pool (readable at 80 columns, where a seven-column table cuts names)."""
    screen = Screen()
    screen.line(f"Engine pools of release {release!r}:")
    for pool in summary.pools:
        kind = "" if pool.kind == "Deployment" else f" ({pool.kind})"
        screen.line(
            f"  {pool.name}: {pool.role}, {pool.replicas} replica(s) x {pool.nodes} pod(s)"
            f"{kind}, {pool.gpus_per_pod} GPU(s) per pod"
        )
        screen.line(f"    {pool.model} on {pool.image}")
    transfers = [pool for pool in summary.pools if pool.connector]
    if transfers:
        from pdctl.connectors import load  # lazy: start-up

        screen.line("KV transfer:")
        for pool in transfers:
            screen.line(f"  {pool.name}: {pool.connector} ({pool.kv_role})")
        evidence = load().transfer_evidence
        labels = ",".join(f'{k}="{v}"' for k, v in evidence["labels"].items())
        screen.line(
            f"  transfers show on {evidence['poolRole']} pods as "
            f"{evidence['metric']}{{{labels}}} (vLLM releases from early 2026)"
        )
    if summary.router:
        screen.line(
            f"Router: {summary.router['name']} ({summary.router['image']}), "
            f"routing {summary.router['routing']}"
        )
    services = ", ".join(
        f"{name}:{'/'.join(str(p) for p in ports)}" for name, ports in summary.services.items()
    )
    screen.line(f"Services: {services}")
    screen.line(f"GPUs requested in total: {summary.total_gpus}")
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(summary.objects.items()))
    screen.line(f"Objects: {kinds}")
