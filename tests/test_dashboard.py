"""The chart's Grafana dashboard (helm/files/dashboards/pd-stack.json, scripts/build_dashboard.py):
valid, current, shipped in a ConfigMap with the sidecar label only when asked, and querying only
metric names that the targeted vLLM (0.33.0) and vllm-router (0.1.17) export. Each name is listed
below with its source; vllm-router's are also read from the real binary's /metrics."""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pdctl import connectors, manifests, naming
from pdctl.helm import Helm
from tests.doubles.router_stack import _pd_args
from tests.doubles.vllm_engine import KvRegistry, VllmEngineDouble
from tests.helpers import (
    ASSETS,
    CHART,
    load_values,
    render_file,
    server,
    write_values,
)

DASHBOARD = CHART / "files" / "dashboards" / "pd-stack.json"
RELEASE = naming.Release("pd")

_LOGGERS = "vLLM 0.33.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger)"
_NIXL = (
    "vLLM 0.33.0 NixlConnector's Prometheus metrics (kv_connector/v1/nixl; "
    "docs/features/nixl_connector_metrics.md)"
)
_ROUTER = "vllm-router 0.1.17 (PyPI), read from its /metrics by test_vllm_router_exports_them"
# Every series name the dashboard queries, with where it is exported. Counters are exported by
# prometheus_client (vLLM) with their _total suffix; histograms as _bucket, _sum and _count.
METRICS: dict[str, str] = {
    "vllm:num_requests_running": f"{_LOGGERS}: gauge",
    "vllm:num_requests_waiting": f"{_LOGGERS}: gauge",
    "vllm:kv_cache_usage_perc": f"{_LOGGERS}: gauge (replaced gpu_cache_usage_perc, #29330)",
    "vllm:num_preemptions_total": f"{_LOGGERS}: counter vllm:num_preemptions",
    "vllm:time_to_first_token_seconds_bucket": f"{_LOGGERS}: histogram",
    "vllm:inter_token_latency_seconds_bucket": (
        f"{_LOGGERS}: histogram (replaced time_per_output_token_seconds, #32661)"
    ),
    "vllm:prompt_tokens_total": f"{_LOGGERS}: counter vllm:prompt_tokens",
    "vllm:generation_tokens_total": f"{_LOGGERS}: counter vllm:generation_tokens",
    "vllm:prompt_tokens_by_source_total": (
        f"{_LOGGERS}: counter vllm:prompt_tokens_by_source, label source (vLLM PR #33290; "
        "v1/metrics/stats.py PromptTokenStats)"
    ),
    "vllm:nixl_xfer_time_seconds_bucket": f"{_NIXL}: histogram",
    "vllm:nixl_xfer_time_seconds_count": f"{_NIXL}: histogram",
    "vllm:nixl_bytes_transferred_sum": f"{_NIXL}: histogram",
    "vllm:nixl_num_failed_transfers_total": f"{_NIXL}: counter vllm:nixl_num_failed_transfers",
    "vllm:nixl_num_failed_notifications_total": (
        f"{_NIXL}: counter vllm:nixl_num_failed_notifications"
    ),
    "vllm_router_pd_requests_total": f"{_ROUTER}: counter, label route",
    "vllm_router_pd_request_duration_seconds_bucket": f"{_ROUTER}: histogram, label route",
    "vllm_router_pd_prefill_errors_total": f"{_ROUTER}: counter, after a failed prefill leg",
    "vllm_router_pd_decode_errors_total": f"{_ROUTER}: counter, after a failed decode leg",
    "llm_d_epp_disagg_decision_total": (
        "llm-d/llm-d-router v0.10.0 and v0.9.0, "
        "pkg/epp/framework/plugins/scheduling/profilehandler/disagg/metrics.go "
        "(LlmdDisaggDecisionCount: subsystem llm_d_epp, labels plugin_name, plugin_type, "
        "model_name, decision_type); not run here"
    ),
}
# Labels the dashboard reads besides the metrics' own (model_name, engine, source, route, le,
# decision_type):
# the pod labels the chart's monitors copy onto every series (podTargetLabels).
MONITOR_LABELS = {"namespace", "app_kubernetes_io_instance", "model", "pd_stack_io_role"}

_NAME = re.compile(r"([a-zA-Z_][a-zA-Z0-9_:]*)\{")


def _load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _exprs(board: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def _metric_names(expr: str) -> set[str]:
    found = set(_NAME.findall(expr))
    found |= set(re.findall(r"label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)", expr))
    return found - {"by", "rate", "sum", "avg", "histogram_quantile", "label_values"}


def test_dashboard_is_valid() -> None:
    # That it is current: tests/test_production_stack.py runs scripts/build_docs.py --check.
    board = _load()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"] and panel["datasource"] == {
            "type": "prometheus",
            "uid": "${datasource}",
        }
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_every_queried_metric_is_listed_with_its_source() -> None:
    queried = set().union(*(_metric_names(e) for e in _exprs(_load())))
    assert queried == set(METRICS)
    for expr in _exprs(_load()):
        labels = set(re.findall(r"([a-z_]+)=\"", expr)) | set(
            re.findall(r"by \(([^)]*)\)", expr)[0].replace(" ", "").split(",")
            if "by (" in expr
            else []
        )
        assert labels <= MONITOR_LABELS | {"le", "source", "route", "decision_type"}, expr


def test_the_pd_views_are_there() -> None:
    """The PD panels: TTFT and ITL percentiles per role, running and waiting requests, KV cache
    usage, prompt tokens by source, KV transfer time, bytes and failures, prefill vs decode."""
    text = "\n".join(_exprs(_load()))
    for metric in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"):
        for q in ("0.5", "0.9", "0.99"):
            assert f"histogram_quantile({q}, sum by (le, pd_stack_io_role) (rate({metric}" in text
    for needed in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "sum by (pd_stack_io_role, source) (rate(vllm:prompt_tokens_by_source_total",
        "vllm:nixl_xfer_time_seconds_bucket",
        "vllm:nixl_bytes_transferred_sum",
        "vllm:nixl_num_failed_transfers_total",
        "sum by (pd_stack_io_role) (rate(vllm:prompt_tokens_total",
        "sum by (pd_stack_io_role) (rate(vllm:generation_tokens_total",
        "sum by (decision_type) (rate(llm_d_epp_disagg_decision_total",
    ):
        assert needed in text, needed


def test_nixl_and_pd_evidence_metrics_agree_with_the_connector_table() -> None:
    """The names verify reads (helm/files/connectors.yaml) are the dashboard's."""
    table = connectors.load()
    nixl = table.connectors["NixlConnector"]
    queried = "\n".join(_exprs(_load()))
    for name in nixl.metrics["transfer"]:
        assert name in queried, name
    for name in nixl.metrics["failures"]:
        assert f"{name}_total" in queried, name
    assert table.transfer_evidence["metric"] in queried


def test_engine_double_exports_the_vllm_names() -> None:
    """The vLLM test double (which copies vLLM 0.33's exposition) exports the names it models."""
    engine = VllmEngineDouble("decode", KvRegistry()).up()
    try:
        text = urllib.request.urlopen(f"{engine.url}/metrics", timeout=5).read().decode()
    finally:
        engine.down()
    exported = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    modelled = {
        "vllm:num_requests_running",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_by_source_total",
        "vllm:nixl_xfer_time_seconds_bucket",
        "vllm:nixl_xfer_time_seconds_count",
        "vllm:nixl_bytes_transferred_sum",
        "vllm:nixl_num_failed_transfers_total",
        "vllm:nixl_num_failed_notifications_total",
    }
    assert modelled <= exported & set(METRICS)


def _post(url: str) -> int:
    body = json.dumps({"model": "double-model", "prompt": "hello " * 20, "max_tokens": 4})
    request = urllib.request.Request(
        f"{url}/v1/completions", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_vllm_router_exports_them(tmp_path: Path) -> None:
    """The real vllm-router 0.1.17 in PD mode in front of engine test doubles: after a served
    request and a request whose decode leg fails, /metrics has every vllm_router_ name the dashboard
    queries."""
    router = Path(sys.executable).parent / "vllm-router"
    assert router.is_file(), "the vllm-router console script is missing: make setup"
    registry = KvRegistry()
    prefill = VllmEngineDouble("prefill", registry).up()
    decode = VllmEngineDouble("decode", registry).up()

    def command(port: int, metrics_port: int) -> list[str]:
        pd = _pd_args(prefill.url, decode.url)
        return [str(router), "--host", "127.0.0.1", "--port", str(port), *pd] + [
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)
        ]  # fmt: skip

    def health(port: int) -> str:
        return f"http://127.0.0.1:{port}/health"

    with server(command, health, tmp_path / "router.log") as (_, port, metrics_port):
        url = f"http://127.0.0.1:{port}"
        assert _post(url) == 200
        decode.down()
        assert _post(url) >= 500
        prefill.down()
        assert _post(url) >= 500
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
        exported = {
            line.split("{")[0].split(" ")[0]
            for line in text.read().decode().splitlines()
            if line and not line.startswith("#")
        }
    wanted = {name for name in METRICS if name.startswith("vllm_router_")}
    assert wanted <= exported, sorted(wanted - exported)


def test_dashboard_configmap_only_when_asked(helm4: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    objects = render_file(helm4, write_values(tmp_path, values))
    assert not [o for o in objects if o["metadata"]["name"] == RELEASE.dashboard]
    values["grafanaDashboards"] = {"enabled": True, "annotations": {"grafana_folder": "PD"}}
    objects = render_file(helm4, write_values(tmp_path, values))
    config = manifests.find(objects, "ConfigMap", RELEASE.dashboard)
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "PD"}
    assert json.loads(config["data"]["pd-stack.json"]) == _load()


@pytest.mark.parametrize("kind", ["serviceMonitor", "podMonitor"])
def test_monitors_only_when_asked(helm4: Helm, tmp_path: Path, kind: str) -> None:
    from tests.helpers import KUBE_VERSIONS, assert_kube_valid

    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    objects = render_file(helm4, write_values(tmp_path, values))
    assert not {"ServiceMonitor", "PodMonitor"} & {o["kind"] for o in objects}
    relabel = [{"sourceLabels": ["__name__"], "regex": "vllm:.*", "action": "keep"}]
    monitor = {"enabled": True, "interval": "15s", "metricRelabelings": relabel}
    values["servingEngineSpec"][kind] = {**monitor, "additionalLabels": {"release": "kps"}}
    values["routerSpec"][kind] = monitor
    objects = render_file(helm4, write_values(tmp_path, values))
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)  # the monitors against prometheus-operator v0.93.0's CRDs
    object_kind = kind[0].upper() + kind[1:]
    engines = manifests.find(objects, object_kind, RELEASE.engine_monitor(object_kind))
    router = manifests.find(objects, object_kind, RELEASE.router_monitor(object_kind))
    endpoints = "endpoints" if kind == "serviceMonitor" else "podMetricsEndpoints"
    assert engines["metadata"]["labels"]["release"] == "kps"
    assert engines["spec"]["selector"]["matchLabels"] == RELEASE.engine_selector
    assert engines["spec"]["podTargetLabels"] == [naming.INSTANCE, naming.POOL, naming.ROLE]
    (endpoint,) = engines["spec"][endpoints]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("http", "/metrics", "15s")
    assert endpoint["metricRelabelings"] == relabel
    if kind == "serviceMonitor":  # production-stack's defaults for the other keys
        assert (endpoint["scrapeTimeout"], endpoint["honorLabels"]) == ("25s", False)
    assert router["spec"]["selector"]["matchLabels"] == RELEASE.router_selector
    assert router["spec"][endpoints][0]["port"] == "metrics"  # vllm-router's --prometheus-port
