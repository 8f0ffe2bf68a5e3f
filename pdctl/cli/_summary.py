"""Human summary of a render (rich tables)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pdctl.manifests import Summary


def print_summary(summary: Summary, release: str) -> None:
    console = Console()
    pools = Table(title=f"Engine pools of release {release!r}")
    for column in ("pool", "role", "replicas", "pods/engine", "GPUs/pod", "image", "model"):
        pools.add_column(column, overflow="fold")
    for pool in summary.pools:
        pools.add_row(
            pool.name,
            pool.role,
            str(pool.replicas),
            str(pool.nodes) if pool.kind == "Deployment" else f"{pool.nodes} ({pool.kind})",
            str(pool.gpus_per_pod),
            pool.image,
            pool.model,
        )
    console.print(pools)
    transfers = [pool for pool in summary.pools if pool.connector]
    if transfers:
        from pdctl.connectors import load

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
