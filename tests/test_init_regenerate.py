"""init's header holds the command that writes the file again: every option the user gave, as
given (click's parameter sources), plus the mode and the targets in force. For each of init's
options, read from the command itself, the command in the header writes the same file."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from pdctl.cli.app import app
from tests.helpers import ROOT

runner = CliRunner()
BENCH = ROOT / "benchmarks" / "records" / "real-engines-h200-1gpu-bench" / "pd-through-router.json"
CONFIG = ROOT / "tests" / "fixtures" / "configs" / "llama-3.1-8b.json"
BASE = ["init", "-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "H200", "--offline"]

# One non-default value per option (the base gives --model, --gpus, --gpu-type and --offline).
SAMPLES: dict[str, list[str]] = {
    "model": [],
    "gpus": [],
    "gpu_type": [],
    "offline": [],
    "out": [],  # every case writes --out ./values.yaml
    "force": ["--force"],
    "gpus_per_node": ["--gpus-per-node", "4"],
    "input_len": ["--input-len", "16000"],
    "output_len": ["--output-len", "300"],
    "concurrency": ["--concurrency", "16"],
    "rate": ["--rate", "2"],
    "ttft": ["--ttft", "none"],
    "itl": ["--itl", "50"],
    "max_model_len": ["--max-model-len", "16384"],
    "kv_cache_dtype": ["--kv-cache-dtype", "fp8"],
    "gpu_memory_utilization": ["--gpu-memory-utilization", "0.85"],
    "model_config": ["--model-config", str(CONFIG)],
    "weight_dtype": ["--weight-dtype", "fp8"],
    "connector": ["--connector", "MooncakeConnector", "--mode", "pd"],
    "router": ["--router", "vllm-router", "--mode", "pd"],
    "network_gbps": ["--network-gbps", "100", "--mode", "pd"],
    "target_rate": ["--target-rate", "1"],
    "calibrate": ["--calibrate", str(BENCH)],
    "calibrate_at": ["--calibrate", str(BENCH), "--calibrate-at", "4"],
    "calibrate_tp": ["--calibrate", str(BENCH), "--calibrate-tp", "1"],
    "mode": ["--mode", "pd"],
    "node_selector": ["--node-selector", "nvidia.com/gpu.product=NVIDIA-H200"],
    "hf_token_secret": ["--hf-token-secret", "my-token"],
    "hf_token_key": ["--hf-token-key", "hf"],
    "release": ["--release", "prod"],
    "namespace": ["--namespace", "serving"],
    "output": ["-o", "json"],
}


def _options() -> list[str]:
    command = typer.main.get_command(app).commands["init"]  # type: ignore[attr-defined]
    return [param.name for param in command.params if param.name != "ctx"]


def test_every_option_of_init_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(_options())


def _header_command(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith("#   pdctl init "))
    return shlex.split(line.removeprefix("#   pdctl "))


@pytest.mark.parametrize("option", sorted(SAMPLES))
def test_the_header_command_writes_the_same_file(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, [*BASE, *SAMPLES[option], "--out", "./values.yaml"])
    assert first.exit_code == 0, first.output
    written = Path("values.yaml").read_text()
    again = _header_command(written)
    for given in (*BASE[1:], *SAMPLES[option]):  # every value as given, paths too
        if not given.startswith("-") and given != "json":
            assert given in again, (given, again)
    assert "--mode" in again and "--ttft" in again and "--itl" in again
    Path("values.yaml").unlink()
    second = runner.invoke(app, again)
    assert second.exit_code == 0, second.output
    assert Path("values.yaml").read_text() == written
