"""PD115: the alerts, the Grafana dashboard and KEDA's Prometheus triggers read the engines' series,
so each of them warns when no ServiceMonitor or PodMonitor of the engines is enabled."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.findings import Finding, Severity
from pdctl.rules import run_rules
from tests.helpers import ASSETS, load_values

runner = CliRunner()
NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")  # prefill and decode, no monitor
WAITING = "sum(vllm:num_requests_waiting{namespace='default',model='qwen-decode'})"


def with_(**top: Any) -> dict[str, Any]:
    values = copy.deepcopy(NIXL)
    values.update(copy.deepcopy(top))
    return values


def keda(pool: int, **settings: Any) -> dict[str, Any]:
    values = with_()
    values["servingEngineSpec"]["modelSpec"][pool]["keda"] = {"enabled": True, **settings}
    return values


def unscraped(values: dict[str, Any]) -> list[Finding]:
    return [f for f in run_rules(values, None) if f.rule == "PD115"]


def assert_names_the_fix(finding: Finding) -> None:
    assert finding.severity is Severity.warning
    assert "no ServiceMonitor or PodMonitor makes Prometheus scrape the engines" in finding.message
    hint = finding.hint or ""
    assert "servingEngineSpec.serviceMonitor or servingEngineSpec.podMonitor" in hint
    assert "pod annotations" in hint and "--ignore PD115" in hint


def test_nothing_reads_the_engines_nothing_warns() -> None:
    assert unscraped(NIXL) == []


def test_alerts_without_a_monitor_can_never_fire() -> None:
    (finding,) = unscraped(with_(alerts={"enabled": True}))
    assert finding.key == "alerts.enabled"
    assert finding.message.startswith("the alert rules (alerts.enabled) read the engines' series")
    assert finding.message.endswith("they can never fire")
    assert_names_the_fix(finding)


def test_dashboard_without_a_monitor_stays_empty() -> None:
    (finding,) = unscraped(with_(grafanaDashboards={"enabled": True}))
    assert finding.key == "grafanaDashboards.enabled"
    assert "the Grafana dashboard (grafanaDashboards.enabled) reads" in finding.message
    assert finding.message.endswith("it stays empty")
    assert_names_the_fix(finding)


def test_keda_default_triggers_without_a_monitor_never_scale() -> None:
    (finding,) = unscraped(keda(1, maxReplicaCount=4))
    assert finding.key == "servingEngineSpec.modelSpec[1].keda.enabled"
    assert finding.message.startswith(
        "pool 'qwen-decode' scales by KEDA (servingEngineSpec.modelSpec[1].keda.enabled, its "
        "default triggers) on the engines' series"
    )
    assert finding.message.endswith("the ScaledObject never scales it")
    assert_names_the_fix(finding)


def test_keda_prometheus_trigger_on_vllm_series_without_a_monitor_never_scales() -> None:
    triggers = [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}},
        {"type": "prometheus", "name": "waiting", "metadata": {"query": WAITING}},
    ]
    (finding,) = unscraped(keda(1, triggers=triggers))
    assert finding.key == "servingEngineSpec.modelSpec[1].keda.triggers[1]"
    assert "(servingEngineSpec.modelSpec[1].keda.triggers[1], trigger 'waiting')" in (
        finding.message
    )
    assert_names_the_fix(finding)


@pytest.mark.parametrize(
    "trigger",
    [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}},
        {"type": "prometheus", "metadata": {"query": "sum(envoy_cluster_upstream_rq_active)"}},
    ],
    ids=["cpu", "prometheus-not-vllm"],
)
def test_keda_triggers_that_read_no_engine_series_do_not_warn(trigger: dict[str, Any]) -> None:
    assert unscraped(keda(1, triggers=[trigger])) == []


def everything() -> dict[str, Any]:
    values = keda(0)
    values["servingEngineSpec"]["modelSpec"][1]["keda"] = {"enabled": True}
    values |= {"alerts": {"enabled": True}, "grafanaDashboards": {"enabled": True}}
    return values


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_an_engine_monitor_silences_every_trigger(monitor: str) -> None:
    values = everything()
    assert len(unscraped(values)) == 4
    values["servingEngineSpec"][monitor] = {"enabled": True}
    assert unscraped(values) == []


def test_a_router_monitor_alone_scrapes_no_engine() -> None:
    values = everything()
    values["routerSpec"]["serviceMonitor"] = {"enabled": True}
    keys = [f.key for f in unscraped(values)]
    assert keys == [
        "alerts.enabled",
        "grafanaDashboards.enabled",
        "servingEngineSpec.modelSpec[0].keda.enabled",
        "servingEngineSpec.modelSpec[1].keda.enabled",
    ]


def test_validate_locates_the_warning_and_ignore_leaves_it_out(tmp_path: Path) -> None:
    source = (ASSETS / "values-17-nixl-vllm-router.yaml").read_text()
    path = tmp_path / "values.yaml"
    path.write_text(source + "alerts:\n  labels: {release: kps}\n  enabled: true\n")
    line = len(source.splitlines()) + 3

    result = runner.invoke(app, ["validate", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    (finding,) = json.loads(result.stdout)["files"][0]["findings"]
    assert (finding["rule"], finding["path"], finding["line"]) == ("PD115", "alerts.enabled", line)

    strict = runner.invoke(app, ["validate", str(path), "--strict"])
    assert strict.exit_code == 1
    assert f"{path}:{line}: warning PD115 [alerts.enabled]" in strict.stdout

    ignored = runner.invoke(app, ["validate", str(path), "--strict", "--ignore", "PD115"])
    assert ignored.exit_code == 0, ignored.output
    assert "PD115" not in ignored.output
