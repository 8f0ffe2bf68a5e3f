"""What reads the engines' series has a monitor that scrapes them (PD115: the alerts, the
dashboard, KEDA's Prometheus triggers). That a monitor scrapes what it names, once (PD024), is the
chart's check: helm/templates/_checks-monitoring.tpl."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment, as_dict
from pdctl.rules.registry import Issue, rule
from pdctl.values.paths import KeyPath, format_path

# The pod labels the engines' series must carry as Prometheus labels for the consumers to find
# them (pd-stack.monitorPodLabels: the chart's monitors copy them onto every series).
_SCRAPE_LABELS = "app_kubernetes_io_instance, model and pd_stack_io_role"


@rule(
    "PD115",
    "what reads the engines' metrics has a monitor that scrapes them",
    Severity.warning,
    explain=(
        "the alerts (`alerts.enabled`), the Grafana dashboard (`grafanaDashboards.enabled`) or "
        "a KEDA ScaledObject (`modelSpec[].keda`) with the default triggers or a `prometheus` "
        "trigger that queries vLLM's series (`vllm:`) are on, while neither "
        "`servingEngineSpec.serviceMonitor` nor `podMonitor` is: they all read the engines' "
        "series by the labels the chart's monitors copy from the pods "
        "(`app_kubernetes_io_instance`, `model`, `pd_stack_io_role`), so the alerts never "
        "fire, the dashboard stays empty and the ScaledObject never scales. A Prometheus that "
        "scrapes the engines by other means (pod annotations, your own monitors) with those "
        "labels can leave the warning out with `--ignore PD115`"
    ),
)
def unscraped(deployment: Deployment) -> Iterator[Issue]:
    engine = as_dict(deployment.values.get("servingEngineSpec"))
    if not deployment.engines_enabled or any(
        as_dict(engine.get(kind)).get("enabled") for kind in ("serviceMonitor", "podMonitor")
    ):
        return
    hint = (
        "enable servingEngineSpec.serviceMonitor or servingEngineSpec.podMonitor (with the "
        "additionalLabels your Prometheus selects). If your Prometheus scrapes the engines by "
        f"other means (pod annotations, your own monitors) and keeps the labels {_SCRAPE_LABELS}, "
        "leave this warning out with --ignore PD115"
    )
    for key, subject, outcome in (
        ("alerts", "the alert rules ({}) read", "they can never fire"),
        ("grafanaDashboards", "the Grafana dashboard ({}) reads", "it stays empty"),
    ):
        if as_dict(deployment.values.get(key)).get("enabled"):
            where: KeyPath = (key, "enabled")
            yield Issue(where, _unscraped(subject.format(format_path(where)), outcome), hint)
    for pool in deployment.pools:
        reads = _reads_engines(as_dict(pool.spec.get("keda")))
        if reads:
            where = pool.at("keda", *reads[0])
            subject = f"pool {pool.name!r} scales by KEDA ({format_path(where)}, {reads[1]}) on"
            yield Issue(where, _unscraped(subject, "the ScaledObject never scales it"), hint)


def _reads_engines(keda: dict[str, Any]) -> tuple[KeyPath, str] | None:
    """Where a pool's ScaledObject reads the engines' series from Prometheus, and which triggers
    do: its default triggers (pd-stack.kedaTriggers), or the first `prometheus` trigger given whose
    query reads vLLM's (vllm:) series; None when it reads none of them."""
    if not keda.get("enabled"):
        return None
    triggers = keda.get("triggers")
    if not triggers:
        return ("enabled",), "its default triggers"
    for index, trigger in enumerate(triggers if isinstance(triggers, list) else []):
        trigger = as_dict(trigger)
        query = as_dict(trigger.get("metadata")).get("query")
        if trigger.get("type") == "prometheus" and "vllm:" in str(query):
            name = trigger.get("name")
            return ("triggers", index), f"trigger {name!r}" if name else "a prometheus trigger"
    return None


def _unscraped(subject: str, outcome: str) -> str:
    return (
        f"{subject} the engines' series, but no ServiceMonitor or PodMonitor makes Prometheus "
        "scrape the engines (servingEngineSpec.serviceMonitor and podMonitor are off): "
        f"{outcome}"
    )
