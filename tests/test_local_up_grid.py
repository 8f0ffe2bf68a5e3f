"""Every file `pdctl init` writes runs locally: for a grid of init outputs (PD and aggregated, two
models, two GPU counts), `pdctl up --engine sim` then `pdctl verify` pass; PD ones prove PD
through vllm-router, aggregated ones are reported as aggregated serving through the router
stand-in playing production-stack's roundrobin (what init writes for them), and verify and bench
say it is aggregated serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.local import lifecycle, state

runner = CliRunner()
RELEASE = "grid"
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B")
GPUS = (2, 8)
MODES = ("pd", "aggregated")


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield tmp_path / "state"
    if state.Folder.of(RELEASE).held():
        lifecycle.down(RELEASE)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gpus", GPUS)
@pytest.mark.parametrize("model", MODELS)
def test_init_output_runs_and_verifies(
    model: str, gpus: int, mode: str, helm4: Helm, state_home: Path, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    init = ["init", "-m", model, "--gpus", str(gpus), "--offline", "--mode", mode]
    made = runner.invoke(app, [*init, "--out", str(values)])
    assert made.exit_code == 0, made.output
    up = ["up", str(values), "--engine", "sim", "--release", RELEASE, "--timeout", "120"]
    started = runner.invoke(app, [*up, "--helm", str(helm4.path)])
    assert started.exit_code == 0, started.output
    verify = ["verify", "--release", RELEASE, "-o", "json", "--prompt-words", "60"]
    verified = runner.invoke(app, [*verify, "--max-tokens", "4"])
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.stdout)
    assert report["aggregated"] == (mode == "aggregated")
    if mode == "pd":
        assert report["pd_proven"] and report["router_name"] == "vllm-router"
    else:
        assert report["router_name"] == (
            "pd-stack router stand-in playing production-stack's router (roundrobin)"
        )
        assert {e["role"] for e in report["engines"]} == {"both"}
        if model == MODELS[0] and gpus == GPUS[0]:  # bench says so too (once: it takes seconds)
            bench = ["bench", "--release", RELEASE, "--requests", "2", "--concurrency", "1"]
            measured = runner.invoke(app, [*bench, "--input-len", "20", "--output-len", "4"])
            assert measured.exit_code == 0, measured.output
            assert "aggregated serving: each engine prefills and decodes" in measured.stdout
    assert runner.invoke(app, ["down", "--release", RELEASE]).exit_code == 0
