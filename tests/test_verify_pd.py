"""pdctl verify against the REAL vllm-router 0.1.17 (PyPI) in PD mode, routing to engine test
doubles (tests/doubles/vllm_engine.py: not vLLM) that speak vLLM's PD HTTP protocol and export
vLLM's metric names. Everything binds to 127.0.0.1 on free ports.

The router runs as the chart renders it for static URLs (--vllm-pd-disaggregation --prefill URL
--decode URL --kv-connector nixl), only moved to loopback. "Prefill bypassed" is a router started
without PD (--worker-urls <decode>), the misconfiguration that sends every request straight to
decode.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.cluster import Pod
from pdctl.naming import VLLM_PORT
from pdctl.verify import proof
from pdctl.verify.checks import Settings, run
from pdctl.verify.probe import PROBE_TAG
from pdctl.verify.report import Check, Endpoint, Report, Status, Targets
from tests.doubles.router_stack import Stack, pd_stack
from tests.doubles.vllm_engine import PREFILL_REQUEST_PARAMS
from tests.helpers import free_port

runner = CliRunner()
# Fast settings for the library runs: no waiting for counters that will not move.
QUICK = Settings(max_tokens=8, prompt_words=200, settle=0.0, timeout=20.0)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with pd_stack(tmp_path_factory.mktemp("pd")) as stack:
        yield stack


@pytest.fixture
def stack(shared: Stack) -> Iterator[Stack]:
    """The module's router and doubles, with the doubles' behaviour reset after each test."""
    shared.reset()
    yield shared
    shared.reset()


def _statuses(report: Report) -> dict[str, str]:
    return {check.id: check.status.value for check in report.checks}


def _check(report: Report, check_id: str) -> Check:
    return next(c for c in report.checks if c.id == check_id)


# ---- the protocol the double speaks, as the real router drives it ---------------------------


def test_router_drives_the_nixl_round_trip(stack: Stack) -> None:
    """What vllm-router 0.1.17 sends to each worker (recorded by the doubles): prefill gets the
    request with max_tokens=1, stream=false, no stream_options and kv_transfer_params
    {do_remote_decode: true, the remote_* fields null}; decode gets the original request plus
    the kv_transfer_params prefill answered with; both legs carry one X-Request-Id."""
    body = {
        "model": "double-model",
        "messages": [{"role": "user", "content": "one two three"}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    request = urllib.request.Request(
        f"{stack.router}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    assert text.rstrip().endswith("data: [DONE]") and '"choices": []' in text
    (prefill,) = stack.prefill.generation_requests()
    (decode,) = stack.decode.generation_requests()
    assert prefill.path == decode.path == "/v1/chat/completions"
    assert prefill.body["max_tokens"] == 1 and prefill.body["stream"] is False
    assert "stream_options" not in prefill.body
    assert prefill.body["kv_transfer_params"] == PREFILL_REQUEST_PARAMS
    params = decode.body["kv_transfer_params"]
    assert params["do_remote_prefill"] is True
    assert params["remote_engine_id"] == stack.prefill.engine_id
    assert set(params) >= {"remote_block_ids", "remote_host", "remote_port", "remote_request_id"}
    assert decode.body["max_tokens"] == 4 and decode.body["stream"] is True
    # The router keeps include_usage but drops vLLM's continuous_usage_stats (its typed
    # StreamOptions has one field), so verify cannot count tokens per chunk through it.
    assert decode.body["stream_options"] == {"include_usage": True}
    rid = prefill.headers["x-request-id"]
    assert rid == decode.headers["x-request-id"] and rid.startswith("___prefill_addr_")


# ---- verdicts -------------------------------------------------------------------------------


def test_healthy_pair_passes(stack: Stack) -> None:
    report = run(stack.targets(), QUICK)
    assert _statuses(report) == dict.fromkeys(_statuses(report), "pass"), [
        (c.id, c.summary) for c in report.checks
    ]
    assert report.passed and report.pd_proven
    assert (report.model, report.connector, report.connector_source) == (
        "double-model",
        "NixlConnector",
        "detected",
    )
    kv = _check(report, "pd-kv-transfer")
    prompt = kv.evidence["probe"]["prompt_tokens"]
    assert prompt == QUICK.prompt_words  # the double counts one token per word
    assert kv.evidence["external"] == prompt and kv.evidence["local_compute"] == 0
    assert kv.evidence["proof"] == "prompt_tokens_by_source"
    assert kv.evidence["connector_transfer_moved"]["vllm:nixl_xfer_time_seconds"]
    bandwidth = _check(report, "pd-kv-bandwidth")
    assert bandwidth.evidence["gbps"] == pytest.approx(300.0, rel=0.01)  # the double's rate
    assert bandwidth.evidence["link"].startswith("NVLink")


# ---- the transfer's speed: what the first real-engine run could not see -----------------------


def test_kv_at_tcp_speed_is_a_warning_that_names_tcp(stack: Stack) -> None:
    """The first real run moved KV at 0.43 GB/s (no fast UCX transport) and verify said only "PD
    proven": now the bandwidth check warns and says why, while PD stays proven."""
    stack.decode.behaviour.kv_gbps = 0.43
    report = run(stack.targets(), QUICK)
    bandwidth = _check(report, "pd-kv-bandwidth")
    assert bandwidth.status is Status.warned, bandwidth.summary
    assert "KV moved at 0.43 GB/s" in bandwidth.summary and "TCP speed" in bandwidth.summary
    assert bandwidth.evidence["gbps"] == pytest.approx(0.43, rel=0.01)
    assert bandwidth.evidence["link"].startswith("TCP")
    assert report.passed and report.pd_proven
    # The doubles answer on one host, as a local release's engines do: the same-host fix, named.
    assert "Prefill and decode run on one host: set UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y" in (
        bandwidth.summary
    )
    assert "https://github.com/ai-dynamo/nixl/pull/2208" in bandwidth.summary
    assert "network.rdmaResource" not in bandwidth.summary


def test_tcp_speed_advice_follows_where_the_engines_are() -> None:
    def targets(*engines: Endpoint) -> Targets:
        return Targets(Endpoint("router", "router", "http://10.0.0.1:8000"), engines)

    apart = targets(
        Endpoint("p", "prefill", "http://10.0.0.2:8000"),
        Endpoint("d", "decode", "http://10.0.0.3:8000"),
    )
    assert proof.tcp_advice(apart) == proof.RDMA_ADVICE
    together = targets(
        Endpoint("p", "prefill", "http://10.0.0.2:8000"),
        Endpoint("d", "decode", "http://10.0.0.2:8001"),
    )
    assert proof.tcp_advice(together).startswith("Prefill and decode run on one host: set ")
    forwarded = "kubectl port-forward pod/p 41000:8000"
    pods = targets(
        Endpoint("p", "prefill", "http://127.0.0.1:41000", forward=forwarded),
        Endpoint("d", "decode", "http://127.0.0.1:41001", forward=forwarded),
    )
    advice = proof.tcp_advice(pods)
    assert advice.startswith(proof.RDMA_ADVICE)
    assert "; if prefill and decode run on one node without NVLink, set " in advice


def test_min_kv_gbps_sets_the_floor(stack: Stack) -> None:
    stack.decode.behaviour.kv_gbps = 20.0  # fast enough for the default floor
    assert _check(run(stack.targets(), QUICK), "pd-kv-bandwidth").status is Status.passed
    strict = Settings(max_tokens=8, prompt_words=200, settle=0.0, timeout=20.0, min_kv_gbps=40.0)
    bandwidth = _check(run(stack.targets(), strict), "pd-kv-bandwidth")
    assert bandwidth.status is Status.warned and "below --min-kv-gbps 40" in bandwidth.summary
    assert "TCP" not in bandwidth.summary  # 20 GB/s is an RDMA link's speed


def test_the_json_report_carries_the_bandwidth(stack: Stack) -> None:
    stack.decode.behaviour.kv_gbps = 0.43
    result = runner.invoke(app, ["verify", *stack.urls(), "-o", "json", "--settle", "0"])
    assert result.exit_code == 0, result.output  # a warning, not a failure
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["pd-kv-bandwidth"]["status"] == "warn"
    assert checks["pd-kv-bandwidth"]["evidence"]["gbps"] == pytest.approx(0.43, rel=0.01)


def test_ttft_through_pd_is_compared_with_the_prefill_engine_alone(stack: Stack) -> None:
    check = _check(run(stack.targets(), QUICK), "pd-ttft")
    assert check.status is Status.passed, check.summary
    evidence = check.evidence
    assert evidence["prefill_engine"] == stack.prefill.url
    assert evidence["added_ms"] == pytest.approx(
        evidence["ttft_pd_ms"] - evidence["ttft_prefill_alone_ms"], abs=0.02
    )
    # One request straight to the prefill engine (computed there), one through the router.
    requests = stack.prefill.generation_requests()
    direct = [r for r in requests if not r.body.get("kv_transfer_params")]
    assert len(direct) == 1 and direct[0].body["stream"] is True


def test_a_slow_first_token_through_pd_is_a_warning(stack: Stack) -> None:
    """TEST DOUBLE: the decode's first token waits 0.3 s (as a slow KV transfer would make it),
    the prefill engine alone answers at once: PD more than doubles TTFT."""
    stack.decode.behaviour.first_token_delay = 0.3
    report = run(stack.targets(), QUICK)
    check = _check(report, "pd-ttft")
    assert check.status is Status.warned
    assert check.evidence["added_ms"] >= 300 - check.evidence["ttft_prefill_alone_ms"]
    assert "more than doubles it" in check.summary and "pd-kv-bandwidth" in check.summary
    assert report.passed  # a warning, not a failure


def test_decode_recomputing_the_prompt_fails_kv_transfer(stack: Stack) -> None:
    stack.decode.behaviour.recompute = True
    report = run(stack.targets(), QUICK)
    statuses = _statuses(report)
    assert statuses["pd-kv-transfer"] == "fail"
    assert statuses["pd-kv-bandwidth"] == "skip"  # nothing was transferred to time
    assert statuses["pd-ttft"] == "skip"  # PD not proven: no transfer to compare
    unproven = ("pd-kv-transfer", "pd-kv-bandwidth", "pd-ttft")
    rest = {k: v for k, v in statuses.items() if k not in unproven}
    assert rest == dict.fromkeys(rest, "pass")
    summary = _check(report, "pd-kv-transfer").summary
    assert "decode computed 200 of the 200 prompt tokens itself" in summary
    assert "recomputed" in summary and "did not move" in summary
    assert not report.passed


def test_lost_transfers_fail_with_the_connector_failure_counter(stack: Stack) -> None:
    stack.decode.behaviour.lose_transfers = True
    report = run(stack.targets(), QUICK)
    kv = _check(report, "pd-kv-transfer")
    assert kv.status is Status.failed
    assert "vllm:nixl_num_failed_transfers on " in kv.summary


def test_one_recomputed_token_is_allowed(stack: Stack) -> None:
    """vLLM before 0.21: decode recomputes the last prompt token (local_compute 1)."""
    stack.decode.behaviour.legacy_last_token = True
    report = run(stack.targets(), QUICK)
    kv = _check(report, "pd-kv-transfer")
    assert kv.status is Status.passed, kv.summary
    assert (kv.evidence["external"], kv.evidence["local_compute"]) == (199, 1)


def test_without_prompt_sources_the_connector_counters_are_the_evidence(stack: Stack) -> None:
    """vLLM before PR #33290 has no prompt_tokens_by_source: NIXL's counters still show the
    transfer, and the evidence says that recomputation was not ruled out."""
    stack.decode.behaviour.prompt_sources = False
    stack.prefill.behaviour.prompt_sources = False
    report = run(stack.targets(), QUICK)
    kv = _check(report, "pd-kv-transfer")
    assert kv.status is Status.passed, kv.summary
    assert kv.evidence["proof"] == "connector metrics only"
    assert any("recomputation is not ruled out" in line for line in kv.details)
    # ... and with neither, there is no evidence at all.
    stack.decode.behaviour.recompute = True
    report = run(stack.targets(), QUICK)
    kv = _check(report, "pd-kv-transfer")
    assert kv.status is Status.failed and "no evidence of a KV transfer" in kv.summary


def test_prefill_bypassed_fails_prefill_and_kv_transfer(tmp_path: Path) -> None:
    with pd_stack(tmp_path, pd=False) as stack:
        report = run(stack.targets(), QUICK)
        assert not stack.prefill.generation_requests()
    statuses = _statuses(report)
    assert (statuses["pd-prefill"], statuses["pd-kv-transfer"]) == ("fail", "fail")
    assert statuses["pd-decode"] == statuses["completion"] == statuses["chat-stream"] == "pass"
    assert "did not send the request through prefill" in _check(report, "pd-prefill").summary
    assert "computed 200 of the 200" in _check(report, "pd-kv-transfer").summary


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_an_engine_down_fails_naming_it(tmp_path: Path, role: str) -> None:
    with pd_stack(tmp_path) as stack:
        down = getattr(stack, role)
        down.down()
        report = run(stack.targets(), QUICK)
    statuses = _statuses(report)
    health = _check(report, "engines-health")
    assert health.status is Status.failed
    assert f"{role} {down.url}: cannot connect" in health.summary
    assert statuses["completion"] == statuses["chat-stream"] == "fail"
    for check_id in ("pd-prefill", "pd-decode", "pd-kv-transfer"):
        assert statuses[check_id] == "fail"
        assert (
            f"{role} {down.url}: GET /metrics: cannot connect" in _check(report, check_id).summary
        )
    assert statuses["router-health"] == "pass"
    # vllm-router 0.1.17 answers /v1/models from a prefill worker; verify then takes the model
    # from an engine, so the later checks still show where requests fail.
    assert statuses["models"] == ("fail" if role == "prefill" else "pass")


def test_latency_is_measured_from_the_streamed_tokens(stack: Stack) -> None:
    """The double sleeps 30 ms between tokens and prefill 60 ms before answering: verify's
    figures count every token gap and are at least the injected delays (how close they come
    depends on the machine: benchmarks/verify_latency.py measures that)."""
    stack.decode.behaviour.inter_token_delay = 0.030
    stack.prefill.behaviour.first_token_delay = 0.060
    settings = Settings(requests=3, max_tokens=10, prompt_words=64, settle=0.0)
    report = run(stack.targets(), settings)
    assert report.passed, [(c.id, c.summary) for c in report.checks]
    latency = report.latency
    assert latency is not None
    assert latency["requests"] == latency["succeeded"] == 3
    assert latency["itl_basis"] == "token"
    assert latency["itl_ms"]["n"] == 3 * 9  # 10 tokens, one per chunk: 9 gaps per request
    first, itl = latency["first_gap_ms"], latency["itl_ms"]  # each request's first of its gaps
    assert first["n"] == 3 and itl["min"] <= first["min"] <= first["max"] <= itl["max"]
    assert latency["ttft_ms"]["min"] >= 60.0
    assert latency["e2e_ms"]["min"] >= 60.0 + 9 * 30.0
    assert latency["completion_tokens"]["mean"] == 10


def test_no_engine_urls_skips_the_pd_proof(stack: Stack) -> None:
    report = run(stack.targets(engines=False), QUICK)
    statuses = _statuses(report)
    assert statuses["engines-health"] == "skip"
    assert [statuses[i] for i in ("pd-prefill", "pd-decode", "pd-kv-transfer")] == ["skip"] * 3
    assert report.passed and not report.pd_proven


# ---- the command ----------------------------------------------------------------------------


def test_cli_json_shape_and_exit_0(stack: Stack) -> None:
    result = runner.invoke(
        app, ["verify", *stack.urls(), "-o", "json", "--requests", "2", "--max-tokens", "6"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {
        "passed", "pd_proven", "aggregated", "router", "router_name", "model", "connector",
        "connector_source", "engines", "counts", "checks", "latency",
    }  # fmt: skip
    assert report["passed"] is True and report["pd_proven"] is True
    assert report["aggregated"] is False
    assert report["counts"] == {"pass": 10, "fail": 0, "skip": 0, "warn": 0}
    assert [c["id"] for c in report["checks"]] == [
        "router-health", "models", "engines-health", "completion", "chat-stream",
        "pd-prefill", "pd-decode", "pd-kv-transfer", "pd-kv-bandwidth", "pd-ttft",
    ]  # fmt: skip
    for check in report["checks"]:
        assert set(check) == {"id", "title", "status", "summary", "evidence", "curl"}
        if check["id"] != "pd-kv-bandwidth":  # read from the transfer's metrics, no request
            assert check["curl"] and all(c.startswith(("curl ", "PROMPT=")) for c in check["curl"])
    latency = report["latency"]
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert {"mean", "p50", "p90", "p99", "min", "max", "n"} <= set(latency[key])
    assert latency["requests"] == 2
    engines = {(e["role"], e["url"]) for e in report["engines"]}
    assert engines == {("prefill", stack.prefill.url), ("decode", stack.decode.url)}


def test_cli_failure_is_exit_1_and_names_the_check(stack: Stack) -> None:
    stack.decode.behaviour.recompute = True
    result = runner.invoke(app, ["verify", *stack.urls(), "--settle", "0"])
    assert result.exit_code == 1, result.output
    assert "FAIL  pd-kv-transfer" in result.stdout
    assert "PASS  pd-prefill" in result.stdout
    assert "verify FAILED" in result.stderr and "PD not proven" in result.stderr


def test_show_curl_commands_repeat_the_checks_by_hand(stack: Stack) -> None:
    """The printed commands run as they are in bash, against the same router and engines."""
    result = runner.invoke(app, ["verify", *stack.urls(), "--show-curl", "--prompt-words", "64"])
    assert result.exit_code == 0, result.output
    commands = [
        line.strip()[2:] for line in result.stdout.splitlines() if line.strip().startswith("$ ")
    ]
    assert any("/v1/chat/completions" in c and " -N " in c for c in commands)
    script = "set -e -o pipefail\n" + "\n".join(commands)
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "data: [DONE]" in done.stdout  # the streaming check
    assert 'vllm:prompt_tokens_by_source_total{engine="0",model_name="double-model",' in done.stdout
    probe = stack.decode.generation_requests()[-1].body
    assert probe["prompt"].startswith(f"{PROBE_TAG} ") and len(probe["prompt"].split()) >= 60


def test_router_unreachable_is_a_failed_check_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["verify", "--url", url, "-o", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["router-health"] == "fail"
    assert {s for k, s in statuses.items() if k != "router-health"} == {"skip"}
    assert "cannot connect" in report["checks"][0]["summary"]


def test_exit_codes_as_a_subprocess(stack: Stack) -> None:
    pdctl = [sys.executable, "-m", "pdctl", "verify"]
    ok = subprocess.run([*pdctl, *stack.urls(), "--max-tokens", "4"], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    usage = subprocess.run(
        [*pdctl, "--url", stack.router, "--prefill-url", stack.prefill.url], capture_output=True
    )
    assert usage.returncode == 2 and b"--prefill-url without --decode-url" in usage.stderr
    assert b"Traceback" not in usage.stderr


# ---- cluster mode, at its boundary ----------------------------------------------------------
#
# Cluster mode calls pdctl.release.release_pods(release, namespace) -> {"router": [pod...],
# "prefill": [...], "decode": [...], "both": [...]} and the context manager
# pdctl.cluster.port_forward(namespace, pod, port) -> "http://127.0.0.1:<port>". Both are
# replaced here by test doubles that point at the local router and engine doubles; when the
# modules do not exist yet, stand-in modules are registered in their place.

ROUTER_POD = "pd-deployment-router-7d9c5"
PREFILL_POD = "pd-llama-prefill-deployment-vllm-5f6b8"
DECODE_POD = "pd-llama-decode-deployment-vllm-8a1c2"


@dataclass
class ClusterDouble:
    pods: dict[str, list[str]]
    urls: dict[str, str]
    broken: dict[str, str]
    calls: list[tuple[str, ...]]
    ports: dict[str, dict[str, int]] = field(default_factory=dict)  # named container ports


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, stack: Stack) -> ClusterDouble:
    import importlib
    import types

    from pdctl.errors import InputError

    double = ClusterDouble(
        pods={"router": [ROUTER_POD], "prefill": [PREFILL_POD], "decode": [DECODE_POD], "both": []},
        urls={
            ROUTER_POD: stack.router,
            PREFILL_POD: stack.prefill.url,
            DECODE_POD: stack.decode.url,
        },
        broken={},
        calls=[],
    )

    def release_pods(release: str, namespace: str) -> dict[str, list[Pod]]:
        double.calls.append(("release_pods", release, namespace))
        return {
            key: [
                Pod(name, {}, "Running", True, 0, ports=double.ports.get(name, {}))
                for name in names
            ]
            for key, names in double.pods.items()
        }

    @contextmanager
    def port_forward(namespace: str, pod: str, port: int) -> Iterator[str]:
        double.calls.append(("port_forward", namespace, pod, str(port)))
        if pod in double.broken:
            raise InputError(double.broken[pod])
        yield double.urls[pod]
        double.calls.append(("closed", pod))

    for name, attribute, function in (
        ("pdctl.release", "release_pods", release_pods),
        ("pdctl.cluster", "port_forward", port_forward),
        # The router's API key from the release's Secret: none here (tests/test_hostile_servers.py
        # reads one through the Kubernetes API double).
        ("pdctl.verify.apikey", "from_release", lambda release, namespace: None),
    ):
        try:
            module = importlib.import_module(name)
        except ImportError:  # not written yet: a stand-in module
            module = types.ModuleType(name)
            monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setattr(module, attribute, function, raising=False)
    return double


def test_cluster_mode_port_forwards_to_the_release_pods(cluster: ClusterDouble) -> None:
    args = ["verify", "--release", "pd", "-n", "serving", "-o", "json", "--max-tokens", "4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["passed"] and report["pd_proven"]
    assert [(e["name"], e["role"]) for e in report["engines"]] == [
        (PREFILL_POD, "prefill"),
        (DECODE_POD, "decode"),
    ]
    assert cluster.calls[0] == ("release_pods", "pd", "serving")
    forwards = [c[2:] for c in cluster.calls if c[0] == "port_forward"]
    assert forwards == [(ROUTER_POD, "8000"), (PREFILL_POD, "8000"), (DECODE_POD, "8000")]
    assert all(c[1] == "serving" for c in cluster.calls if c[0] == "port_forward")
    assert sum(c[0] == "closed" for c in cluster.calls) == 3  # every forward ended


def test_cluster_mode_reaches_vllm_on_its_own_port_behind_a_sidecar(cluster: ClusterDouble) -> None:
    """A decode pod of the llm-d router: the sidecar holds the engine port, vLLM has naming's
    VLLM_PORT; verify reads the engine there (its /health is vLLM's, not the sidecar's)."""
    cluster.ports[DECODE_POD] = {"http": 8000, VLLM_PORT: 8200}
    result = runner.invoke(app, ["verify", "-o", "json", "--max-tokens", "4"])
    assert result.exit_code == 0, result.output
    forwards = [c[2:] for c in cluster.calls if c[0] == "port_forward"]
    assert forwards == [(ROUTER_POD, "8000"), (PREFILL_POD, "8000"), (DECODE_POD, "8200")]


def test_cluster_mode_show_curl_says_how_to_forward(cluster: ClusterDouble) -> None:
    result = runner.invoke(
        app, ["verify", "--show-curl", "--router-port", "9000", "--max-tokens", "4"]
    )
    assert result.exit_code == 0, result.output
    port = cluster.urls[ROUTER_POD].rsplit(":", 1)[1]
    assert f"kubectl -n default port-forward pod/{ROUTER_POD} {port}:9000 &" in result.stdout
    assert ("port_forward", "default", ROUTER_POD, "9000") in cluster.calls


def test_cluster_mode_a_pod_that_cannot_be_reached_fails_by_name(cluster: ClusterDouble) -> None:
    dead = "pd-llama-decode-deployment-vllm-0dead"
    cluster.pods["decode"].append(dead)
    cluster.broken[dead] = "pod is Pending"
    result = runner.invoke(app, ["verify", "-o", "json", "--settle", "0", "--max-tokens", "4"])
    assert result.exit_code == 1, result.output
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["engines-health"]["status"] == "fail"
    assert (
        f"decode {dead}: port-forward failed: pod is Pending" in checks["engines-health"]["summary"]
    )
    assert checks["pd-kv-transfer"]["status"] == "fail"


def test_cluster_mode_without_a_router_pod(cluster: ClusterDouble) -> None:
    cluster.pods["router"] = []
    result = runner.invoke(app, ["verify", "--release", "gone", "-o", "json"])
    assert result.exit_code == 1, result.output
    first = json.loads(result.stdout)["checks"][0]
    assert first["id"] == "router-health" and first["status"] == "fail"
    assert "no router pod in namespace default" in first["summary"]
    assert "app.kubernetes.io/instance=gone,app.kubernetes.io/component=router" in first["summary"]


def test_cluster_mode_without_cluster_access_is_exit_3(
    cluster: ClusterDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pdctl.errors import EnvironmentProblem

    def no_access(release: str, namespace: str) -> dict[str, list[Pod]]:
        raise EnvironmentProblem("no Kubernetes configuration found")

    monkeypatch.setattr(sys.modules["pdctl.release"], "release_pods", no_access)
    result = runner.invoke(app, ["verify"])
    assert result.exit_code == 3
    assert "error: no Kubernetes configuration found" in result.stderr


def test_cluster_mode_without_the_kubernetes_client_is_exit_3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # its import fails, as when not installed
    result = runner.invoke(app, ["verify"])
    assert result.exit_code == 3
    assert "the kubernetes client is not installed" in result.stderr
    assert "pip install --force-reinstall ." in result.stderr and "Traceback" not in result.output


def test_cluster_mode_at_tcp_speed_names_the_same_node_fix_as_a_condition(
    cluster: ClusterDouble, stack: Stack
) -> None:
    """Port-forwarded pods all answer on 127.0.0.1, yet where they run is not known: the RDMA
    checks, and the same-host fix only if prefill and decode share a node."""
    stack.decode.behaviour.kv_gbps = 0.43
    result = runner.invoke(app, ["verify", "-o", "json", "--settle", "0", "--max-tokens", "4"])
    assert result.exit_code == 0, result.output
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    summary = checks["pd-kv-bandwidth"]["summary"]
    assert "network.rdmaResource" in summary
    assert "if prefill and decode run on one node without NVLink, set " in summary
    assert "UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y" in summary


def test_transfer_histograms_read_as_transfers_and_bytes() -> None:
    """vllm:nixl_bytes_transferred is a histogram observed once per transfer: its change reads as
    "1 transfer" and its sum in bytes, never "+1" (one byte)."""
    from pdctl.verify.judge import _change

    moved = _change("vllm:nixl_bytes_transferred", {"count": 1.0, "sum": 614_400_000.0})
    assert moved == "1 transfer, 614,400,000 bytes"
    timed = _change("vllm:nixl_xfer_time_seconds", {"count": 3.0, "sum": 0.0125})
    assert timed == "3 transfers, 0.0125 s in all"
    assert _change("vllm:some_counter_total", {"count": 2.0}) == "+2"
