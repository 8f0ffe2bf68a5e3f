"""The alert rules (helm/files/alerts/pd-stack.rules.yaml from scripts/build_alerts.py, and the
chart's PrometheusRule, alerts.enabled) checked by the real promtool (Prometheus 2.42, Debian's
package, installed into .tools/ by `make test`): `check rules`, and `test rules` with synthetic
series for each failure, which must fire its alert, and for healthy PD traffic, which must fire
none."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from pdctl import manifests, naming
from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    CI,
    KUBE_VERSIONS,
    ROOT,
    assert_kube_valid,
    load_values,
    render_file,
    write_values,
)
from tests.test_dashboard import METRICS

sys.path.insert(0, str(ROOT / "scripts"))
import build_alerts  # noqa: E402
import install_debian_tools  # noqa: E402

PROMTOOL = install_debian_tools.destination("promtool")
RULES = build_alerts.TARGET
ALERTS = [rule["alert"] for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]]
MINUTES = 40  # samples one minute apart; alerts are evaluated at 35m
LMCACHE_DECODE = ROOT / "benchmarks/records/lmcache-h200-1gpu-v1runner-metrics-decode.txt"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL.is_file(), (
        f"{PROMTOOL} is missing: `make test` or scripts/install_debian_tools.py"
    )
    return subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True)


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    matchers = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{matchers}}}", "values": values}


def healthy(namespace: str, release: str = "pd") -> list[dict[str, str]]:
    """PD working: decode loads every prompt token from prefill's KV at 100 GB/s."""
    where = {"namespace": namespace, "app_kubernetes_io_instance": release}
    decode = {**where, "pd_stack_io_role": "decode", "pod": f"{release}-decode-0"}
    prefill = {**where, "pd_stack_io_role": "prefill", "pod": f"{release}-prefill-0"}
    grow = f"0+600x{MINUTES}"
    return [
        _series("vllm:prompt_tokens_total", grow, **prefill),
        _series("vllm:prompt_tokens_total", grow, **decode),
        _series(
            "vllm:prompt_tokens_by_source_total", grow, source="external_kv_transfer", **decode
        ),
        _series(
            "vllm:prompt_tokens_by_source_total", f"0x{MINUTES}", source="local_compute", **decode
        ),
        _series("vllm:generation_tokens_total", f"0+100x{MINUTES}", **decode),
        _series("vllm:nixl_bytes_transferred_sum", f"0+6e12x{MINUTES}", **decode),
        _series("vllm:nixl_xfer_time_seconds_sum", f"0+60x{MINUTES}", **decode),
        _series("vllm:nixl_num_failed_transfers_total", f"0x{MINUTES}", **decode),
        _series("vllm:nixl_num_failed_notifications_total", f"0x{MINUTES}", **decode),
        # LMCache's load counter (the table's metrics.loaded), exported by an LMCache decode.
        _series("lmcache:num_hit_tokens_total", grow, **decode),
        _series("up", f"1x{MINUTES}", **prefill),
        _series("up", f"1x{MINUTES}", **decode),
    ]


def broken(namespace: str, alert: str) -> list[dict[str, str]]:
    """Healthy series in `namespace`, changed the way `alert`'s failure changes them: the series
    named, whose labels include the matcher given, gets other values."""
    zero, grow = f"0x{MINUTES}", f"0+600x{MINUTES}"
    name, matcher, values = {
        "PDDecodeRecomputing": (
            "vllm:prompt_tokens_by_source_total",
            'source="local_compute"',
            grow,
        ),
        "PDKVTransferFailing": ("vllm:nixl_num_failed_transfers_total", "", f"0+1x{MINUTES}"),
        "PDKVNotLoaded": ("lmcache:num_hit_tokens_total", "", zero),
        "PDKVTransferSlow": (
            "vllm:nixl_bytes_transferred_sum",
            "",
            f"0+25.8e9x{MINUTES}",
        ),  # 0.43 GB/s
        "PDPrefillIdle": ("vllm:prompt_tokens_total", 'pd_stack_io_role="prefill"', zero),
        "PDEngineDownPrefill": ("up", 'pd_stack_io_role="prefill"', zero),
        "PDEngineDownDecode": ("up", 'pd_stack_io_role="decode"', zero),
    }[alert]
    series = healthy(namespace)
    (hit,) = [x for x in series if x["series"].startswith(f"{name}{{") and matcher in x["series"]]
    hit["values"] = values
    return series


def _unit_test(
    rules_file: Path, tmp_path: Path, tests: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    """promtool test rules over a copy of the rules without annotations (promtool compares them
    whole, $value included; `check rules` checks their templates): the expressions, `for` and
    labels are what is tested."""
    groups = yaml.safe_load(rules_file.read_text())["groups"]
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    bare = tmp_path / "bare.rules.yaml"
    bare.write_text(yaml.safe_dump({"groups": groups}))
    spec = {"rule_files": [str(bare)], "evaluation_interval": "1m", "tests": tests}
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return promtool("test", "rules", str(path))


def _scenario(alert: str, expected: list[dict[str, str]]) -> dict[str, Any]:
    """Every alert's failure in a namespace of its own, healthy traffic in `good`; at 35 minutes,
    `alert` fires for the labels in `expected` and nowhere else."""
    series = healthy("good") + [s for other in ALERTS for s in broken(f"ns-{other.lower()}", other)]
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": "35m",
                "alertname": alert,
                "exp_alerts": [{"exp_labels": labels} for labels in expected],
            }
        ],
    }


def _labels(alert: str, namespace: str) -> dict[str, str]:
    rule = next(
        r for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"] if r["alert"] == alert
    )
    labels = {
        "severity": rule["labels"]["severity"],
        "namespace": namespace,
        "app_kubernetes_io_instance": "pd",
    }
    if alert.startswith("PDEngineDown"):
        role = alert.removeprefix("PDEngineDown").lower()
        labels |= {"pd_stack_io_role": role, "pod": f"pd-{role}-0"}
    return labels


def test_the_rules_file_passes_promtool_check() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_each_alert_fires_on_its_failure_and_nowhere_else(tmp_path: Path) -> None:
    tests = [_scenario(alert, [_labels(alert, f"ns-{alert.lower()}")]) for alert in ALERTS]
    result = _unit_test(RULES, tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(ALERTS) >= {
        "PDDecodeRecomputing",
        "PDKVTransferFailing",
        "PDKVNotLoaded",
        "PDKVTransferSlow",
        "PDPrefillIdle",
    }


def test_no_alert_fires_on_healthy_traffic(tmp_path: Path) -> None:
    """Two releases; the second's decode exports no connector load counter (NIXL's does not):
    PDKVNotLoaded judges only the releases that export one."""
    second = [s for s in healthy("other", release="second") if "lmcache:" not in s["series"]]
    test = {
        "interval": "1m",
        "input_series": healthy("good") + second,
        "alert_rule_test": [
            {"eval_time": f"{t}m", "alertname": a, "exp_alerts": []}
            for a in ALERTS
            for t in (15, 35)
        ],
    }
    result = _unit_test(RULES, tmp_path, [test])
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_missed_alert_makes_promtool_fail(tmp_path: Path) -> None:
    """The harness can fail: expecting an alert on healthy series is reported."""
    test = _scenario("PDDecodeRecomputing", [_labels("PDDecodeRecomputing", "good")])
    result = _unit_test(RULES, tmp_path, [test])
    assert result.returncode == 1 and "FAILED" in result.stdout + result.stderr


def test_every_selector_starts_with_the_role_and_names_an_exported_series() -> None:
    exported = {re.sub(r"_(sum|count|bucket)$", "", name) for name in METRICS} | {"up"}
    # LMCache's, as a real LMCache 0.5.6 decode exported them (the kept /metrics text).
    exported |= set(re.findall(r"^(lmcache:\w+)", LMCACHE_DECODE.read_text(), re.M))
    for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]:
        selectors = re.findall(r"([a-z_:]+)\{([^}]*)\}", rule["expr"])
        assert selectors, rule["alert"]
        for name, matchers in selectors:
            assert matchers.startswith(build_alerts.ROLE_LABEL), (rule["alert"], matchers)
            assert re.sub(r"_(sum|count|bucket)$", "", name) in exported, (rule["alert"], name)


def _prometheus_rule(helm: Helm, tmp_path: Path, alerts: dict[str, Any]) -> manifests.Manifest:
    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    values["alerts"] = alerts
    objects = render_file(helm, write_values(tmp_path, values))
    for kube in KUBE_VERSIONS:
        assert_kube_valid(objects, kube)  # against prometheus-operator v0.93.0's CRD
    return manifests.find(objects, "PrometheusRule", naming.Release("pd").alert_rules)


def test_the_prometheus_rule_only_when_asked(helm: Helm, tmp_path: Path) -> None:
    values = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    assert "PrometheusRule" not in {
        o["kind"] for o in render_file(helm, write_values(tmp_path, values))
    }
    rule = _prometheus_rule(helm, tmp_path, {"enabled": True, "labels": {"release": "kps"}})
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert [r["alert"] for r in rule["spec"]["groups"][0]["rules"]] == ALERTS


def test_the_release_rules_see_only_this_release_and_take_the_floor(
    helm4: Helm, tmp_path: Path
) -> None:
    rule = _prometheus_rule(helm4, tmp_path, {"enabled": True, "minKvGbps": 0.3})
    rules_file = tmp_path / "release.rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    assert promtool("check", "rules", str(rules_file)).returncode == 0
    # This release's namespace (default): decode recomputes and KV moves at 0.43 GB/s; another
    # release's namespace: decode recomputes too.
    here = broken("default", "PDDecodeRecomputing")
    (transfer,) = [x for x in here if "nixl_bytes_transferred_sum" in x["series"]]
    transfer["values"] = f"0+25.8e9x{MINUTES}"
    slow = {
        "interval": "1m",
        "input_series": here + broken("elsewhere", "PDDecodeRecomputing"),
        "alert_rule_test": [
            {"eval_time": "35m", "alertname": "PDDecodeRecomputing",
             "exp_alerts": [{"exp_labels": _labels("PDDecodeRecomputing", "default")}]},
            # 0.43 GB/s is above the 0.3 GB/s floor this release set.
            {"eval_time": "35m", "alertname": "PDKVTransferSlow", "exp_alerts": []},
        ],
    }  # fmt: skip
    result = _unit_test(rules_file, tmp_path, [slow])
    assert result.returncode == 0, result.stdout + result.stderr
    (slow_rule,) = [
        r for r in rule["spec"]["groups"][0]["rules"] if r["alert"] == "PDKVTransferSlow"
    ]
    assert (
        slow_rule["expr"].endswith("< 0.3e9") and slow_rule["annotations"]["min_kv_gbps"] == "0.3"
    )


def test_an_aggregated_release_gets_no_pd_alerts(helm4: Helm, tmp_path: Path) -> None:
    """Every rule is about PD (a transfer, a prefill or a decode pool): with pools of role both
    only, alerts.enabled renders no PrometheusRule, and the engines still render."""
    values = load_values(CI / "aggregated-values.yaml")
    values["alerts"] = {"enabled": True}
    objects = render_file(helm4, write_values(tmp_path, values))
    kinds = {o["kind"] for o in objects}
    assert "PrometheusRule" not in kinds and "Deployment" in kinds
