"""helm/files/dashboards/pd-stack.json, the chart's Grafana dashboard for PD serving.

The chart ships it in a ConfigMap with Grafana's sidecar label (grafanaDashboards.enabled). Its
queries read the series the chart's ServiceMonitors or PodMonitors scrape, which carry the pod
labels app.kubernetes.io/instance, model and pd-stack.io/role as Prometheus labels
app_kubernetes_io_instance, model and pd_stack_io_role (podTargetLabels). Every metric it queries
is one vLLM 0.33.0, vllm-router 0.1.17 or llm-d-router v0.9.0/v0.10.0 exports;
tests/test_dashboard.py lists each with its source. scripts/build_docs.py (`make docs`) writes
it; `build_docs.py --check` (a test) finds it stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "helm" / "files" / "dashboards" / "pd-stack.json"

ENGINES = 'namespace="$namespace",app_kubernetes_io_instance="$release"'
RATE = "[$__rate_interval]"
QUANTILES = ("0.5", "0.9", "0.99")


def quantiles(metric: str, by: str) -> list[tuple[str, str]]:
    """p50, p90 and p99 of a vLLM histogram per `by` label."""
    return [
        (
            f"histogram_quantile({q}, sum by (le, {by}) "
            f"(rate({metric}_bucket{{{ENGINES}}}{RATE})))",
            f"{{{{{by}}}}} p{round(float(q) * 100)}",
        )
        for q in QUANTILES
    ]


# (title, unit, description, [(expr, legend)]), in rows.
ROWS: list[tuple[str, list[tuple[str, str, str, list[tuple[str, str]]]]]] = [
    (
        "Latency per role",
        [
            (
                "Time to first token",
                "s",
                "vLLM's TTFT per role (p50, p90, p99). A prefill engine's is its queue plus the "
                "prompt's compute; a decode engine's adds the KV transfer.",
                quantiles("vllm:time_to_first_token_seconds", "pd_stack_io_role"),
            ),
            (
                "Inter-token latency",
                "s",
                "vLLM's time between output tokens per role (p50, p90, p99): decode's ITL.",
                quantiles("vllm:inter_token_latency_seconds", "pd_stack_io_role"),
            ),
        ],
    ),
    (
        "Load per pool",
        [
            (
                "Running requests",
                "short",
                "Requests in the engines' batches, per pool.",
                [(f"sum by (model) (vllm:num_requests_running{{{ENGINES}}})", "{{model}}")],
            ),
            (
                "Waiting requests",
                "short",
                "Requests queued in the engines, per pool: a growing queue on prefill pools "
                "raises TTFT, on decode pools ITL and TTFT.",
                [(f"sum by (model) (vllm:num_requests_waiting{{{ENGINES}}})", "{{model}}")],
            ),
            (
                "KV cache usage",
                "percentunit",
                "Share of the KV cache in use, mean over each pool's engines. Near 1 decode "
                "engines preempt requests.",
                [(f"avg by (model) (vllm:kv_cache_usage_perc{{{ENGINES}}})", "{{model}}")],
            ),
            (
                "Preemptions",
                "ops",
                "Requests preempted per second (the KV cache was full), per pool.",
                [
                    (
                        f"sum by (model) (rate(vllm:num_preemptions_total{{{ENGINES}}}{RATE}))",
                        "{{model}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Prefill/decode",
        [
            (
                "Prompt tokens by source",
                "short",
                "Where prompt tokens came from, per role and second: computed locally, hit in "
                "the engine's prefix cache, or loaded from another engine's KV "
                "(external_kv_transfer). On a healthy PD pair decode's prompt tokens are almost "
                "all external_kv_transfer (vLLM PR #33290).",
                [
                    (
                        "sum by (pd_stack_io_role, source) "
                        f"(rate(vllm:prompt_tokens_by_source_total{{{ENGINES}}}{RATE}))",
                        "{{pd_stack_io_role}} {{source}}",
                    )
                ],
            ),
            (
                "Prefill vs decode throughput",
                "short",
                "Prompt tokens processed and tokens generated per second, per role.",
                [
                    (
                        "sum by (pd_stack_io_role) "
                        f"(rate(vllm:prompt_tokens_total{{{ENGINES}}}{RATE}))",
                        "{{pd_stack_io_role}} prompt",
                    ),
                    (
                        "sum by (pd_stack_io_role) "
                        f"(rate(vllm:generation_tokens_total{{{ENGINES}}}{RATE}))",
                        "{{pd_stack_io_role}} generated",
                    ),
                ],
            ),
        ],
    ),
    (
        "KV transfer (NixlConnector)",
        [
            (
                "Transfer time",
                "s",
                "Duration of NIXL KV transfers (p50, p90, p99), per pool that moves KV (the "
                "decode pools: NixlConnector pulls).",
                quantiles("vllm:nixl_xfer_time_seconds", "model"),
            ),
            (
                "Bytes transferred",
                "Bps",
                "KV bytes moved by NIXL per second, per pool.",
                [
                    (
                        "sum by (model) "
                        f"(rate(vllm:nixl_bytes_transferred_sum{{{ENGINES}}}{RATE}))",
                        "{{model}}",
                    )
                ],
            ),
            (
                "Transfers and failures",
                "ops",
                "NIXL transfers per second, and failed transfers and notifications per second "
                "(any failure: decode recomputes the prompt or fails the request, "
                "kv_load_failure_policy).",
                [
                    (
                        "sum by (model) "
                        f"(rate(vllm:nixl_xfer_time_seconds_count{{{ENGINES}}}{RATE}))",
                        "{{model}} transfers",
                    ),
                    (
                        "sum by (model) "
                        f"(rate(vllm:nixl_num_failed_transfers_total{{{ENGINES}}}{RATE}))",
                        "{{model}} failed transfers",
                    ),
                    (
                        "sum by (model) "
                        f"(rate(vllm:nixl_num_failed_notifications_total{{{ENGINES}}}{RATE}))",
                        "{{model}} failed notifications",
                    ),
                ],
            ),
        ],
    ),
    (
        "Router (vllm-router)",
        [
            (
                "PD requests",
                "reqps",
                "Requests vllm-router sent through prefill then decode, per second and route.",
                [
                    (
                        f"sum by (route) (rate(vllm_router_pd_requests_total{{{ENGINES}}}{RATE}))",
                        "{{route}}",
                    )
                ],
            ),
            (
                "PD request duration",
                "s",
                "Time vllm-router spends on a PD request, both legs (p50, p90, p99).",
                [
                    (
                        f"histogram_quantile({q}, sum by (le) "
                        f"(rate(vllm_router_pd_request_duration_seconds_bucket{{{ENGINES}}}{RATE})))",
                        f"p{round(float(q) * 100)}",
                    )
                    for q in QUANTILES
                ],
            ),
            (
                "Prefill and decode errors",
                "ops",
                "Errors of the prefill and decode legs per second, as vllm-router counts them.",
                [
                    (
                        f"sum(rate(vllm_router_pd_prefill_errors_total{{{ENGINES}}}{RATE}))",
                        "prefill",
                    ),
                    (
                        f"sum(rate(vllm_router_pd_decode_errors_total{{{ENGINES}}}{RATE}))",
                        "decode",
                    ),
                ],
            ),
        ],
    ),
    (
        "Router (llm-d)",
        [
            (
                "Disaggregation decisions",
                "reqps",
                "The endpoint picker's choice per request: prefill-decode (sent to a prefill pod "
                "first) or decode-only (the decode pod computes the prompt itself: prefix-based "
                "decider, or no prefill pod).",
                [
                    (
                        "sum by (decision_type) "
                        f"(rate(llm_d_epp_disagg_decision_total{{{ENGINES}}}{RATE}))",
                        "{{decision_type}}",
                    )
                ],
            ),
        ],
    ),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-query"},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "includeAll": False,
        "multi": False,
        "current": {},
        "options": [],
    }


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    next_id = 1
    for row_title, row_panels in ROWS:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        width = 24 // min(len(row_panels), 3) if len(row_panels) != 4 else 12
        x = 0
        for title, unit, description, queries in row_panels:
            if x + width > 24:
                x = 0
                y += 8
            panels.append(
                {
                    "id": next_id,
                    "type": "timeseries",
                    "title": title,
                    "description": description,
                    "datasource": DATASOURCE,
                    "gridPos": {"h": 8, "w": width, "x": x, "y": y},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                        for i, (expr, legend) in enumerate(queries)
                    ],
                }
            )
            next_id += 1
            x += width
        y += 8
    return {
        "title": "pd-stack: prefill/decode serving",
        "uid": "pd-stack-pd",
        "description": (
            "vLLM prefill/decode pools and vllm-router of a pd-stack release (the chart's "
            "ServiceMonitors or PodMonitors scrape them)."
        ),
        "tags": ["pd-stack", "vllm"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                },
                _variable(
                    "namespace", "Namespace", "label_values(vllm:num_requests_running, namespace)"
                ),
                _variable(
                    "release",
                    "Release",
                    'label_values(vllm:num_requests_running{namespace="$namespace"}, '
                    "app_kubernetes_io_instance)",
                ),
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
