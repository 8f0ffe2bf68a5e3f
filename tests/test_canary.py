"""The PD canary (canary.enabled): what the chart renders for it, and its script, taken from the
rendered ConfigMap and run by python3 as a subprocess (as the Job runs it), against the REAL
vllm-router 0.1.17 in front of engine TEST DOUBLES (tests/doubles/vllm_engine.py: not vLLM),
finding the engine pods through the Kubernetes API TEST DOUBLE (tests/doubles/kube_api.py).

The pods listed by the API double carry the chart's labels and point at the engine doubles on
127.0.0.1 (podIP 127.0.0.1, each double's port as the named container port `http`)."""

from __future__ import annotations

import ast
import copy
import http.server
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pdctl import connectors, manifests, naming
from pdctl.helm import Helm
from pdctl.models import links
from pdctl.verify import probe
from pdctl.verify.client import Http
from pdctl.verify.judge import PROOF
from pdctl.verify.proof import pd_proof
from pdctl.verify.report import Check, Endpoint, Settings, Status, Targets
from tests.doubles import http_server
from tests.doubles.kube_api import KubeAPIDouble
from tests.doubles.router_stack import Stack, pd_stack
from tests.doubles.vllm_engine import VllmEngineDouble
from tests.helpers import (
    ASSETS,
    CHART,
    CI,
    ROOT,
    assert_kube_valid,
    canary_script,
    free_port,
    render_file,
    write_values,
)

CANARY_VALUES = CI / "nixl-dp-recompute-values.yaml"  # PD pools, a both pool, the canary
RELEASE = naming.Release("pd")
SCRIPT = CHART / "files" / "canary" / "pd_canary.py"
KINDS = {"CronJob", "ConfigMap", "ServiceAccount", "Role", "RoleBinding"}


def canary_objects(objects: list[manifests.Manifest]) -> dict[str, manifests.Manifest]:
    return {o["kind"]: o for o in objects if o["metadata"]["name"] == RELEASE.canary}


# ---- the chart ------------------------------------------------------------------------------


def test_off_by_default(helm4: Helm) -> None:
    objects = render_file(helm4, ASSETS / "values-18-nixl-xpyd.yaml")
    assert not canary_objects(objects)
    assert not [o for o in objects if o["kind"] == "CronJob"]


def test_rendered_objects_pass_kubernetes_and_are_locked_down(helm: Helm) -> None:
    found = canary_objects(render_file(helm, CANARY_VALUES))
    assert set(found) == KINDS
    for version in ("1.29.0", "1.35.0"):
        assert_kube_valid(list(found.values()), version)
    # Least privilege: read pods in the namespace, nothing else.
    assert found["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    ]
    assert found["ServiceAccount"]["automountServiceAccountToken"] is False
    cron = found["CronJob"]["spec"]
    assert cron["schedule"] == "*/5 * * * *" and cron["concurrencyPolicy"] == "Forbid"
    job = cron["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0  # a retry would hide a failed run from kube_job_failed
    pod = job["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["readOnlyRootFilesystem"]
    assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
    assert container["image"] == "vllm/vllm-openai:v0.14.1"  # the prefill pool's
    assert container["command"] == ["python3", "/etc/pd-canary/pd_canary.py"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/etc/pd-canary", "/var/run/secrets/kubernetes.io/serviceaccount"}


def test_an_lmcache_release_reads_the_counters_for_one_lmcache_period(
    helm4: Helm, tmp_path: Path
) -> None:
    """LMCache updates its metrics every 10 s (the table's metricsEvery): the canary's config
    carries it, and the canary's settle time covers it (settle_seconds, verify's rule)."""
    values = yaml.safe_load((ASSETS / "values-19-lmcache-pd.yaml").read_text())
    values["canary"] = {"enabled": True}
    objects = render_file(helm4, write_values(tmp_path, values))
    config = json.loads(canary_objects(objects)["ConfigMap"]["data"]["config.json"])
    every = connectors.load().connectors["LMCacheConnectorV1"].metrics_every
    assert config["connector"]["metricsEvery"] == every == 10
    assert probe.settle_seconds(config["settleSeconds"], every) > every


def test_config_comes_from_the_tables_and_the_values(helm4: Helm) -> None:
    data = canary_objects(render_file(helm4, CANARY_VALUES))["ConfigMap"]["data"]
    assert data["pd_canary.py"] == SCRIPT.read_text().strip()
    config = json.loads(data["config.json"])
    nixl = connectors.load().connectors["NixlConnector"].metrics
    assert config["connector"] == {
        "name": "NixlConnector",
        "transfer": list(nixl["transfer"]),
        "failures": list(nixl["failures"]),
        "loaded": [],
        "bandwidth": list(nixl["bandwidth"]),
        "metricsEvery": 0,
    }
    rule = connectors.load().transfer_evidence
    ((label, value),) = rule["labels"].items()
    assert config["evidence"] == {
        "metric": rule["metric"],
        "label": label,
        "value": value,
        "role": rule["poolRole"],
    }
    # The PD pools only (not the both-role pool), selected as naming selects them.
    assert config["pools"] == [
        {"name": p, "role": r, "selector": naming.selector_text(RELEASE.pool_selector(p))}
        for p, r in (("prefill", "prefill"), ("decode-dp", "decode"))
    ]
    assert config["router"] == f"http://{RELEASE.router_service}:80"
    assert config["model"] == "Qwen/Qwen3-8B" and config["minKvGbps"] == 10


def test_floor_defaults_to_the_link_table(helm4: Helm, tmp_path: Path) -> None:
    text = (ASSETS / "values-18-nixl-xpyd.yaml").read_text() + "canary:\n  enabled: true\n"
    objects = render_file(helm4, write_values(tmp_path, text))
    config = json.loads(canary_objects(objects)["ConfigMap"]["data"]["config.json"])
    assert config["minKvGbps"] == pytest.approx(links.load().minimum_gbps)
    assert config["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_the_script_is_one_standard_library_file() -> None:
    """The script the chart mounts imports nothing but Python's standard library (the engine
    image has no pdctl); that it is build_canary's current output is build_docs --check's
    (tests/test_production_stack.py)."""
    tree = ast.parse(SCRIPT.read_text())
    imported = {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported
    assert "pdctl/verify/judge.py" in (ast.get_docstring(tree) or "")


def test_verify_and_the_canary_run_the_same_probe_code() -> None:
    """The probe's procedure (pdctl/verify/probe.py) is in the script verbatim, the canary's
    driver calls it, and verify's PD proof and TTFT check import it: one filler, one poll, one
    reading of a streamed answer."""
    from pdctl.verify import probe, proof, ttft

    code = (ROOT / "pdctl" / "verify" / "probe.py").read_text()
    body = code[code.index("PROBE_TAG = ") :].strip()
    assert body in SCRIPT.read_text()
    driver = (ROOT / "scripts" / "canary_driver.py").read_text()
    used = ("Answer", "probe_request", "read_answer", "settle", "streamed_counts")
    assert all(f"    {name},\n" in driver for name in used)
    assert "from pdctl.verify.probe import (" in driver
    assert "SETTLE_POLL" not in driver and "FILLER" not in driver
    assert vars(proof)["probe"] is probe and vars(ttft)["probe_request"] is probe.probe_request


@pytest.mark.parametrize(
    ("driver", "refusal"),
    [
        ("from pdctl.naming import ROLES\n", "canary_driver.py:1: imports pdctl.naming"),
        ("import json\n\n\ndef f() -> None:\n    import os\n", "canary_driver.py:5: an import"),
        ("def parse() -> None:\n    pass\n", "defined in both exposition.py and canary_driver.py"),
        ("def settle() -> None:\n    pass\n", "defined in both probe.py and canary_driver.py"),
    ],
)
def test_the_script_is_refused_from_a_driver_it_cannot_stand_on(
    driver: str, refusal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_canary makes no script that would need pdctl, import late, or let the driver's
    name hide the core's."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # as `python scripts/build_docs.py` has it
    import build_canary

    path = tmp_path / "canary_driver.py"
    path.write_text(driver)
    monkeypatch.setattr(build_canary, "DRIVER", path)
    with pytest.raises(build_canary.SourceError, match=refusal):
        build_canary.render()


# ---- the script against the real router, engine doubles and the API double ------------------


@dataclass
class Canary:
    stack: Stack
    kube: KubeAPIDouble
    config: dict[str, Any]
    tmp: Path

    def pod(self, name: str, pool: str, engine: VllmEngineDouble, ready: bool = True) -> None:
        """An engine pod in the API double, as the chart labels it, serving at `engine`."""
        selector = next(p["selector"] for p in self.config["pools"] if p["name"] == pool)
        labels = dict(pair.split("=", 1) for pair in selector.split(","))
        port = int(engine.url.rsplit(":", 1)[1])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "nodeName": "node-1",  # bound already: the double's scheduler leaves it alone
                "containers": [
                    {
                        "name": "vllm",
                        "image": "x",
                        "ports": [{"name": "http", "containerPort": port}],
                    }
                ],
            },
        }
        state = self.kube.state
        with state.lock:
            state.create("pods", "default", pod, reconcile=False)
            conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
            status = {"phase": "Running", "podIP": "127.0.0.1", "conditions": conditions}
            state.set_status("pods", state.objects[("pods", "default", name)], status)

    def run(self, **config: Any) -> tuple[int, dict[str, Any]]:
        path = self.tmp / "config.json"
        path.write_text(json.dumps({**self.config, **config}))
        env = {
            "PD_CANARY_CONFIG": str(path),
            "PD_CANARY_KUBE_API": self.kube.url,
            "PD_CANARY_SA_DIR": str(self.tmp),
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(
            [sys.executable, "-I", str(self.tmp / "pd_canary.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stdout.splitlines()
        assert len(lines) == 1, (done.stdout, done.stderr)
        return done.returncode, json.loads(lines[0])


@pytest.fixture(scope="module")
def rendered_canary(helm4: Helm) -> dict[str, str]:
    data = canary_objects(render_file(helm4, CANARY_VALUES))["ConfigMap"]["data"]
    return {"pd_canary.py": data["pd_canary.py"], "config.json": data["config.json"]}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, KubeAPIDouble]]:
    with pd_stack(tmp_path_factory.mktemp("pd")) as stack, KubeAPIDouble() as kube:
        yield stack, kube


@pytest.fixture
def canary(
    shared: tuple[Stack, KubeAPIDouble], rendered_canary: dict[str, str], tmp_path: Path
) -> Iterator[Canary]:
    stack, kube = shared
    stack.reset()
    for name, text in rendered_canary.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "token").write_text("test-double-token\n")
    config = json.loads(rendered_canary["config.json"])
    # Moved to loopback: the real router's URL and the doubles' model; a fixed floor.
    config.update(router=stack.router, model=stack.decode.model, minKvGbps=3.125)
    config.update(settleSeconds=0, promptWords=200)
    runner = Canary(stack, kube, config, tmp_path)
    runner.pod("prefill-0", "prefill", stack.prefill)
    runner.pod("decode-dp-0", "decode-dp", stack.decode)
    yield runner
    with kube.state.lock:
        for pod in kube.state.list("pods", "default"):
            kube.state.delete("pods", "default", pod["metadata"]["name"])
    assert not kube.problems()
    stack.reset()


def test_healthy_pair_passes(canary: Canary) -> None:
    code, line = canary.run()
    assert (code, line["verdict"]) == (0, "pass"), line
    assert line["canary"] == "pd-stack" and line["release"] == "pd"
    assert line["usage"]["prompt_tokens"] == 200  # the double counts one token per word
    assert line["by_source"]["external_kv_transfer"] == 200
    assert line["kv"]["gbps"] == pytest.approx(300.0, rel=0.01)  # the double's rate
    assert set(line["engines"]) == {"prefill-0", "decode-dp-0"}
    assert any("labelSelector" in r and "model%3Ddecode-dp" in r for r in canary.kube.requests)


def test_every_ready_replica_is_read(canary: Canary) -> None:
    """A second decode replica (idle) and a decode pod that is not ready: the canary reads every
    ready pod of the pool, not one pod behind a Service."""
    spare = VllmEngineDouble("decode-2", canary.stack.prefill.registry).up()
    try:
        canary.pod("decode-dp-1", "decode-dp", spare)
        canary.pod("decode-dp-2", "decode-dp", canary.stack.decode, ready=False)
        code, line = canary.run()
    finally:
        spare.down()
    assert (code, line["verdict"]) == (0, "pass"), line
    assert set(line["engines"]) == {"prefill-0", "decode-dp-0", "decode-dp-1"}
    assert line["engines"]["decode-dp-1"]["generation_tokens"] == 0


def test_decode_recomputing_the_prompt_is_recomputed(canary: Canary) -> None:
    canary.stack.decode.behaviour.recompute = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (2, "recomputed"), line
    assert "decode computed 200 of the 200 prompt tokens itself" in line["reason"]


def test_lost_transfers_are_recomputed_with_the_failures_shown(canary: Canary) -> None:
    canary.stack.decode.behaviour.lose_transfers = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (2, "recomputed"), line
    assert line["failures"] == {"vllm:nixl_num_failed_transfers on decode-dp-0": 1.0}


def test_kv_at_tcp_speed_is_slow(canary: Canary) -> None:
    canary.stack.decode.behaviour.kv_gbps = 0.43
    code, line = canary.run()
    assert (code, line["verdict"]) == (3, "slow"), line
    assert line["kv"]["gbps"] == pytest.approx(0.43, rel=0.01)
    assert "below minKvGbps 3.125" in line["reason"]


def test_without_by_source_the_connector_metrics_decide(canary: Canary) -> None:
    canary.stack.decode.behaviour.prompt_sources = False
    assert canary.run()[1]["verdict"] == "pass"
    canary.stack.decode.behaviour.lose_transfers = True
    code, line = canary.run()
    assert (code, line["verdict"]) == (1, "fail") and "no evidence of a KV transfer" in line[
        "reason"
    ]


def test_router_that_bypasses_prefill_fails(canary: Canary) -> None:
    """The router sends straight to decode (here: the canary's probe goes to decode itself)."""
    code, line = canary.run(router=canary.stack.decode.url)
    assert (code, line["verdict"]) == (1, "fail"), line
    assert "the router did not send the request through prefill" in line["reason"]


def test_unreachable_router_and_missing_pods_fail(canary: Canary) -> None:
    code, line = canary.run(router=f"http://127.0.0.1:{free_port()}")
    assert (code, line["verdict"]) == (1, "fail") and "/v1/completions" in line["reason"]
    pools = copy.deepcopy(canary.config["pools"])
    pools[1]["selector"] += "-gone"
    code, line = canary.run(pools=pools)
    assert (code, line["verdict"]) == (1, "fail")
    assert "no ready pod of pool decode-dp" in line["reason"]


def test_an_aggregated_release_has_no_pd_pair_for_the_canary(tmp_path: Path) -> None:
    """Pools of role both only: canary.enabled is refused by the chart (PD025), as there is no KV
    transfer to prove; validate --render reports it."""
    from typer.testing import CliRunner

    from pdctl.cli.app import app
    from tests.helpers import load_values

    values = load_values(CI / "aggregated-values.yaml")
    values["canary"] = {"enabled": True}
    result = CliRunner().invoke(app, ["validate", "--render", str(write_values(tmp_path, values))])
    assert result.exit_code == 1, result.output
    assert "error PD025 [canary.enabled]" in result.output and "no prefill pool" in result.output


# ---- one proof: verify and the canary fed the same /metrics pages ----------------------------
#
# A loopback TEST DOUBLE serves two engines' /metrics pages: the "before" pages until the probe's
# completion arrives, the "after" pages since. verify's PD proof (pdctl.verify.proof.pd_proof,
# through its own HTTP client) and the canary's script (its main(), the engines it would list
# from the Kubernetes API given directly) read the same pages and must give the same verdicts.

PROMPT, OUTPUT = 200, 16
FLOOR = 3.125  # GB/s: both sides' bandwidth floor
NIXL = connectors.load().connectors["NixlConnector"].metrics
XFER_SECONDS, XFER_BYTES = NIXL["bandwidth"][1], NIXL["bandwidth"][0]
EVIDENCE_METRIC = str(connectors.load().transfer_evidence["metric"])


@dataclass(frozen=True)
class Counters:
    """One engine's counters at one read."""

    prompt: float = 0.0
    generation: float = 0.0
    sources: tuple[tuple[str, float], ...] | None = None  # the evidence metric's, by source
    transfers: float | None = None  # NIXL transfers (None: NIXL's metrics not exported)
    seconds: float = 0.0
    bytes: float = 0.0
    failed: float = 0.0


@dataclass(frozen=True)
class Style:
    """How a page is written: the same counters, other spellings."""

    comments: bool = False  # HELP and TYPE lines (with escapes in the help text)
    timestamps: bool = False
    escaped: bool = False  # one more label, its value with \\", \\\\ and \\n
    other_model: bool = False  # the same series for another model, with other values


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return f"{value:+}".replace("inf", "Inf") if math.isinf(value) else repr(value)


def page(c: Counters, style: Style, model: str = "m") -> str:
    labels = f'model_name="{model}"'
    labels += ',note="say \\"hi\\" to C:\\\\d\\nthen}"' if style.escaped else ""
    stamp = " 1700000000000" if style.timestamps else ""
    lines: list[str] = []

    def family(name: str, kind: str, samples: list[tuple[str, str, float]]) -> None:
        if style.comments:
            lines.extend(
                [f"# HELP {name} what it counts, with \\\\ and \\n", f"# TYPE {name} {kind}"]
            )
        for suffix, extra, value in samples:
            lines.append(f"{name}{suffix}{{{labels}{extra}}} {_number(value)}{stamp}")

    family("vllm:prompt_tokens", "counter", [("_total", "", c.prompt)])
    family("vllm:generation_tokens", "counter", [("_total", "", c.generation)])
    if c.sources is not None:
        by_source = [("", f',source="{s}"', v) for s, v in c.sources]
        family(EVIDENCE_METRIC.removesuffix("_total"), "counter", [])
        lines.extend(
            f"{EVIDENCE_METRIC}{{{labels}{x}}} {_number(v)}{stamp}" for _, x, v in by_source
        )
    if c.transfers is not None:
        for name, total in ((XFER_SECONDS, c.seconds), (XFER_BYTES, c.bytes)):
            family(
                name,
                "histogram",
                [
                    ("_bucket", ',le="+Inf"', c.transfers),
                    ("_count", "", c.transfers),
                    ("_sum", "", total),
                ],
            )
        for name in NIXL["failures"]:
            family(name, "counter", [("_total", "", c.failed)])
    text = "\n".join(lines) + "\n"
    if style.other_model:  # another model's series: neither side may count them
        busy = Counters(c.prompt + 7e6, c.generation + 5e6, c.sources, c.transfers, 1.0, 1.0, 9.0)
        text += page(busy, Style(), "other")
    return text


@dataclass
class Pages:
    """The pages the double serves: by engine, before and after the probe."""

    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    probed: bool = False

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        pages = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _route(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/completions":
                    pages.probed = True
                    usage = {"prompt_tokens": PROMPT, "completion_tokens": OUTPUT}
                    body = json.dumps({"choices": [{"text": "x"}], "usage": usage}).encode()
                else:
                    engine = self.path.strip("/").split("/")[0]
                    body = (pages.after if pages.probed else pages.before)[engine].encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _route

        return Handler


@dataclass
class Judges:
    """verify's proof and the canary's script, against one double."""

    pages: Pages
    url: str
    canary: ModuleType
    http: Http  # verify's client (one for all runs: making one takes a while)
    capture: pytest.CaptureFixture[str]

    def verify(self) -> dict[str, Check]:
        self.pages.probed = False
        engines = (
            Endpoint("prefill-0", "prefill", f"{self.url}/prefill-0"),
            Endpoint("decode-0", "decode", f"{self.url}/decode-0"),
        )
        settings = Settings(model="m", connector="NixlConnector", settle=0, min_kv_gbps=FLOOR)
        targets = Targets(Endpoint(self.url, "router", self.url), engines)
        checks, _ = pd_proof(self.http, self.url, targets, "m", settings)
        return {c.id: c for c in checks}

    def run_canary(self) -> tuple[int, dict[str, Any]]:
        self.pages.probed = False
        self.capture.readouterr()
        code = self.canary.main()
        return code, json.loads(self.capture.readouterr().out)

    def both(self) -> tuple[dict[str, Check], int, dict[str, Any]]:
        """Both verdicts, after asserting that they agree."""
        checks = self.verify()
        code, line = self.run_canary()
        assert code == self.canary.EXIT[line["verdict"]]
        if "checks" not in line:  # the canary could not read a page: neither could verify
            assert line["verdict"] == "fail"
            why = line["reason"].split(" /metrics: ", 1)[1]
            for check_id in PROOF:
                assert checks[check_id].status is Status.failed
                assert f"/metrics: {why}" in checks[check_id].summary  # verify names every page
            return checks, code, line
        for check_id in PROOF:
            check, judged = checks[check_id], line["checks"][check_id]
            assert (check.status.value, check.summary) == (judged["status"], judged["summary"])
        bandwidth, judged = checks["pd-kv-bandwidth"], line["checks"]["pd-kv-bandwidth"]
        assert bandwidth.status.value == judged["status"]
        assert bandwidth.summary.startswith(judged["summary"])  # verify names the link too
        return checks, code, line


@pytest.fixture
def judges(
    rendered_canary: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Judges]:
    pages = Pages()
    server = http_server.start(pages.handler())
    url = f"http://127.0.0.1:{server.server_address[1]}"
    config = json.loads(rendered_canary["config.json"])
    config.update(router=url, model="m", minKvGbps=FLOOR, settleSeconds=0, timeoutSeconds=10)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("PD_CANARY_CONFIG", str(path))
    monkeypatch.delenv("PD_CANARY_API_KEY", raising=False)
    canary = canary_script()
    targets = [
        ("prefill-0", "prefill", f"{url}/prefill-0"),
        ("decode-0", "decode", f"{url}/decode-0"),
    ]
    monkeypatch.setattr(canary, "engines", lambda config: targets)
    try:
        with Http(timeout=10) as http:
            yield Judges(pages, url, canary, http, capsys)
    finally:
        server.shutdown()
        server.server_close()


def _loaded(
    external: float = PROMPT, local: float = 0.0, cached: float = 0.0
) -> tuple[tuple[str, float], ...]:
    return (
        ("external_kv_transfer", external),
        ("local_cache_hit", cached),
        ("local_compute", local),
    )


ZERO_SOURCES = _loaded(0.0)
BEFORE = {
    "prefill-0": Counters(1000.0, 50.0, None, 3.0, 0.5, 3e8, 0.0),
    "decode-0": Counters(40.0, 900.0, ZERO_SOURCES, 3.0, 0.5, 3e8, 0.0),
}
# (seconds, bytes) of the probe's transfer: 1.6 MB at 300 GB/s, and at 0.43 GB/s (TCP).
FAST, SLOW = (1.6e6 / 300e9, 1.6e6), (1.6e6 / 0.43e9, 1.6e6)


def _after(
    prefill: float = PROMPT,
    generation: float = OUTPUT,
    sources: tuple[tuple[str, float], ...] | None = _loaded(),
    transfers: float | None = 1.0,
    timing: tuple[float, float] = FAST,
    failed: float = 0.0,
) -> dict[str, Counters]:
    """The after-counters as the before-counters plus these moves."""
    p, d = BEFORE["prefill-0"], BEFORE["decode-0"]
    moved = None if transfers is None else (d.transfers or 0.0) + transfers
    return {
        "prefill-0": Counters(
            p.prompt + prefill, p.generation, None, p.transfers, p.seconds, p.bytes
        ),
        "decode-0": Counters(
            d.prompt + PROMPT,
            d.generation + generation,
            sources,
            moved,
            d.seconds + timing[0],
            d.bytes + timing[1],
            failed,
        ),
    }


def _serve(
    judges: Judges, before: dict[str, Counters], after: dict[str, Counters], style: Style
) -> None:
    judges.pages.before = {name: page(c, style) for name, c in before.items()}
    judges.pages.after = {name: page(c, style) for name, c in after.items()}


INF, NAN = float("inf"), float("nan")
HEALTHY = _after()
CASES: list[tuple[str, dict[str, Counters], Style, str, str]] = [
    ("healthy", HEALTHY, Style(), "", "pass"),
    ("every spelling", HEALTHY, Style(True, True, True, True), "", "pass"),
    ("one token recomputed", _after(sources=_loaded(PROMPT - 1, 1.0)), Style(), "", "pass"),
    ("a prefix cache hit", _after(sources=_loaded(PROMPT - 16, 0.0, 16.0)), Style(), "", "pass"),
    ("no by-source counter", _after(sources=None), Style(comments=True), "", "pass"),
    ("+Inf count", {**HEALTHY, "prefill-0": Counters(INF)}, Style(timestamps=True), "", "fail"),
    ("NaN count", {**HEALTHY, "decode-0": Counters(1.0, NAN)}, Style(escaped=True), "", "fail"),
    ("NaN sum", _after(timing=(NAN, 1.0)), Style(), "", "fail"),
    ("negative count", {**HEALTHY, "prefill-0": Counters(-1.0)}, Style(), "", "fail"),
    ("counter reset", _after(prefill=-990.0), Style(), "", "fail"),
    ("decode generated nothing", _after(generation=0.0), Style(), "", "fail"),
    ("no evidence", _after(sources=None, transfers=None), Style(), "", "fail"),
    ("transfers did not move", _after(transfers=0.0), Style(), "", "fail"),
    ("a failed transfer", _after(failed=1.0), Style(), "", "fail"),
    ("not exposition", HEALTHY, Style(), 'vllm:x{a="b} 1\n', "fail"),
    ("recomputed", _after(sources=_loaded(0.0, PROMPT)), Style(other_model=True), "", "recomputed"),
    ("slow", _after(timing=SLOW), Style(True, True, True), "", "slow"),
]


@pytest.mark.parametrize(
    ("after", "style", "extra", "verdict"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verify_and_the_canary_give_the_same_verdict(
    judges: Judges, after: dict[str, Counters], style: Style, extra: str, verdict: str
) -> None:
    _serve(judges, BEFORE, after, style)
    judges.pages.after["decode-0"] += extra
    checks, code, line = judges.both()
    assert (line["verdict"], code) == (verdict, judges.canary.EXIT[verdict]), line
    proven = verdict in ("pass", "slow")
    assert all(checks[c].status is Status.passed for c in PROOF) == proven, checks


def mostly(good: Any, *others: Any) -> st.SearchStrategy[Any]:
    """`good` three times in four, else one of `others`."""
    return st.one_of(st.just(good), st.just(good), st.just(good), st.sampled_from(others))


ODD = (0.0, 1.0, -3.0, 1e4, INF, NAN)  # counts that move too little, backwards, or are no counts


@st.composite
def moves(draw: st.DrawFn) -> dict[str, Counters]:
    """How the two engines' counters move during the probe: mostly as they should."""
    loaded = st.builds(
        _loaded,
        mostly(float(PROMPT), PROMPT - 1.0, *ODD),
        st.sampled_from([0.0, 0.0, 1.0, 2.0, float(PROMPT)]),
        mostly(0.0, 16.0, INF, -1.0),
    )
    sources = draw(st.one_of(st.none(), loaded, loaded))
    timing = draw(st.sampled_from([FAST, FAST, SLOW, SLOW, (0.0, 0.0), (NAN, 1.0), (1e-3, -1.0)]))
    return {
        "prefill-0": Counters(draw(mostly(float(PROMPT), PROMPT - 1.0, *ODD))),
        "decode-0": Counters(
            float(PROMPT),
            draw(mostly(float(OUTPUT), OUTPUT - 1.0, *ODD)),
            sources,
            draw(mostly(1.0, None, 0.0, 2.0)),
            *timing,
            draw(mostly(0.0, 1.0)),
        ),
    }


def test_the_same_verdict_on_any_pages(judges: Judges) -> None:
    """Pages of any counters (finite or not, counting up, down or not at all, present or
    missing), spelled any way: verify and the canary agree. Most examples reach the judging
    code rather than a refused page, and every canary verdict comes up."""
    seen: list[str] = []
    judged = 0

    @settings(max_examples=120, derandomize=True, database=None, deadline=None)
    @given(
        moves(),
        st.builds(Style, st.booleans(), st.booleans(), st.booleans(), st.booleans()),
        st.booleans(),
    )
    def agree(moved: dict[str, Counters], style: Style, fresh_before: bool) -> None:
        nonlocal judged
        after = {
            name: Counters(
                BEFORE[name].prompt + c.prompt,
                BEFORE[name].generation + c.generation,
                c.sources,
                None if c.transfers is None else 3.0 + c.transfers,
                0.5 + c.seconds,
                3e8 + c.bytes,
                c.failed,
            )
            for name, c in moved.items()
        }
        _serve(
            judges, BEFORE if not fresh_before else {n: Counters() for n in BEFORE}, after, style
        )
        _, _, line = judges.both()
        seen.append(line["verdict"])
        judged += "checks" in line

    agree()
    assert set(seen) == {"pass", "fail", "recomputed", "slow"}, set(seen)
    assert judged >= len(seen) // 2, (judged, len(seen))
