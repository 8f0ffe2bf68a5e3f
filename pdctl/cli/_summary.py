"""Human summary of a render."""

from __future__ import annotations

from rich.console import Console

from pdctl.manifests import Summary


def print_summary(summary: Summary, release: str) -> None:
    """One short block per pool (readable at 80 columns, where a seven-column table cuts names)."""
    console = Console()
    console.print(f"Engine pools of release {release!r}:")
    for pool in summary.pools:
        kind = "" if pool.kind == "Deployment" else f" ({pool.kind})"
        console.print(
            f"  {pool.name}: {pool.role}, {pool.replicas} replica(s) x {pool.nodes} pod(s)"
            f"{kind}, {pool.gpus_per_pod} GPU(s) per pod",
            markup=False,
        )
        console.print(f"    {pool.model} on {pool.image}", markup=False)
    transfers = [pool for pool in summary.pools if pool.connector]
    if transfers:
        from pdctl.connectors import load  # lazy: start-up

        console.print("KV transfer:")
        for pool in transfers:
            console.print(f"  {pool.name}: {pool.connector} ({pool.kv_role})")
        evidence = load().transfer_evidence
        labels = ",".join(f'{k}="{v}"' for k, v in evidence["labels"].items())
        console.print(
            f"  transfers show on {evidence['poolRole']} pods as "
            f"{evidence['metric']}{{{labels}}} (vLLM releases from early 2026)"
        )
    if summary.router:
        console.print(
            f"Router: {summary.router['name']} ({summary.router['image']}), "
            f"routing {summary.router['routing']}"
        )
    services = ", ".join(
        f"{name}:{'/'.join(str(p) for p in ports)}" for name, ports in summary.services.items()
    )
    console.print(f"Services: {services}")
    console.print(f"GPUs requested in total: {summary.total_gpus}")
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(summary.objects.items()))
    console.print(f"Objects: {kinds}")
