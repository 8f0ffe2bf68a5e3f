"""Property: whatever `pdctl validate` accepts renders with helm and passes strict Kubernetes
schemas; whatever it refuses exits 1 with a message, never a crash."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import TUTORIAL_VALUES, assert_kube_valid, render_file

runner = CliRunner()
NAMES = ["prefill", "decode", "llama-prefill", "llama-decode"] * 3 + ["Bad_Name", "p" * 45]
MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"]


@st.composite
def pools(draw: st.DrawFn) -> dict[str, Any]:
    tp = draw(st.sampled_from([1, 1, 1, 2, 4, 0]))
    spec: dict[str, Any] = {
        "name": draw(st.sampled_from(NAMES)),
        "repository": draw(st.sampled_from(["vllm/vllm-openai", "lmcache/vllm-openai"])),
        "tag": draw(st.sampled_from(["v0.11.0", "2025-05-17-v1", "latest"])),
        "modelURL": draw(st.sampled_from(MODELS)),
        "replicaCount": draw(st.sampled_from([1, 1, 2, 0, -1])),
        "requestGPU": draw(st.sampled_from([tp, tp, tp, 1, 2])),
        "requestMemory": draw(st.sampled_from(["30Gi", "16G", "30Gi", "lots"])),
        "vllmConfig": {
            "tensorParallelSize": tp,
            "maxModelLen": draw(st.sampled_from([1024, 32000])),
            "gpuMemoryUtilization": draw(st.sampled_from([0.9, 0.9, 0.97, 0.4, 1.2])),
        },
    }
    if draw(st.booleans()):
        spec["pvcStorage"] = "50Gi"
    if draw(st.booleans()):
        spec["hostIPC"] = True
    role = draw(st.sampled_from([None, "kv_producer", "kv_consumer", "kv_both"]))
    if role:
        lm: dict[str, Any] = {"enabled": True, "kvRole": role, "enablePD": True}
        if draw(st.booleans()):
            sender = role == "kv_producer"
            lm |= {
                "enableNixl": True,
                "nixlRole": "sender" if sender else "receiver",
                "nixlPeerHost": draw(
                    st.sampled_from(["pd-decode-engine-service", "pd-llama-decode-engine-service"])
                )
                if sender
                else "0.0.0.0",
                "nixlPeerPort": draw(st.sampled_from(["55555", 55555, "55556"])),
            }
        spec["lmcacheConfig"] = lm
    return spec


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    specs = draw(st.lists(pools(), min_size=0, max_size=3))
    router: dict[str, Any] = {
        "routingLogic": draw(st.sampled_from(["roundrobin", "disaggregated_prefill", "session"]))
    }
    if draw(st.booleans()):
        names = [s["name"] for s in specs] or ["x"]
        router["extraArgs"] = [
            "--prefill-model-labels",
            draw(st.sampled_from(names)),
            "--decode-model-labels",
            draw(st.sampled_from(names)),
        ]
    return {"servingEngineSpec": {"modelSpec": specs}, "routerSpec": router}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=documents())
@example(values=yaml.safe_load(TUTORIAL_VALUES.read_text()))
def test_accepted_renders_and_refused_explains(values: dict[str, Any], helm4: Helm) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        result = runner.invoke(app, ["validate", str(path), "-o", "json"])
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.exit_code in (0, 1), result.output
        report = json.loads(result.stdout)["files"][0]
        event("accepted" if result.exit_code == 0 else "refused")
        if result.exit_code == 0:
            assert_kube_valid(render_file(helm4, path), "1.35.0")
        else:
            errors = [f for f in report["findings"] if f["severity"] == "error"]
            assert errors and all(f["message"] and f["rule"] for f in errors)


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70000), st.floats(-2, 2), st.text(max_size=8)
)
_keys = st.sampled_from(
    ["name", "role", "lmcacheConfig", "kvTransfer", "vllmConfig", "kvRole", "nixlRole",
     "nixlPeerHost", "nixlPeerPort", "enabled", "enableNixl", "requestGPU", "tensorParallelSize",
     "connector", "peerPool", "vllmVersion", "tag", "repository", "replicaCount", "labels",
     "model", "extraArgs", "routingLogic", "type", "x"]
)  # fmt: skip
_anything = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(pools=st.lists(_anything, max_size=3), router=_anything)
def test_rules_and_schema_never_crash(pools: list[Any], router: Any) -> None:
    from pdctl.pipeline import Values, check

    values = {"servingEngineSpec": {"modelSpec": pools}, "routerSpec": router}
    for finding in check(Values(data=values)):
        assert finding.message and finding.rule
