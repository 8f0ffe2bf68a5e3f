"""The files plan reads, each with one field broken (issue 40): a real bench result for
`--calibrate` (the kept H200 record) and a real config.json for `--model-config` (Mixtral-8x7B's).
Each is refused with exit 1, naming the file and the key path, never a traceback or a plan of
nonsense; `bench compare` reads bench results through the same schema (pdctl.bench.runs)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app

ROOT = Path(__file__).parent.parent
RECORD = ROOT / "benchmarks/records/real-engines-h200-1gpu-bench/pd-through-router.json"
MIXTRAL = ROOT / "tests/fixtures/configs/mixtral-8x7b.json"
runner = CliRunner()


def _step(change: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda run: run["steps"][0].update(change)


def _role(role: str, change: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda run: run["steps"][0]["engines"][role].update(change)


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda run: run["steps"][0].pop(key)


BENCH: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "succeeded missing": (_drop("succeeded"), "steps[0]: 'succeeded' is a required property"),
    "succeeded a string": (_step({"succeeded": "16"}), "steps[0].succeeded"),
    "succeeded negative": (_step({"succeeded": -1}), "steps[0].succeeded"),
    "prompt_tokens a string": (_step({"prompt_tokens": "x"}), "steps[0].prompt_tokens"),
    "prompt_tokens negative": (_step({"prompt_tokens": -5}), "steps[0].prompt_tokens"),
    "completion_tokens huge": (_step({"completion_tokens": 1e300}), "steps[0].completion_tokens"),
    "engines a list": (_step({"engines": []}), "steps[0].engines"),
    "a role a list": (lambda r: r["steps"][0]["engines"].update(decode=[1]), "engines.decode"),
    "kv_gbps -50": (_role("decode", {"kv_gbps": -50}), "steps[0].engines.decode.kv_gbps"),
    "engine count a string": (_role("decode", {"engines": "two"}), "engines.decode.engines"),
    "phases a number": (_role("prefill", {"phase_mean_s": 5}), "prefill.phase_mean_s"),
    "prefill time negative": (
        lambda r: r["steps"][0]["engines"]["prefill"]["phase_mean_s"].update(prefill=-1),
        "steps[0].engines.prefill.phase_mean_s.prefill",
    ),
    "concurrency 10^15": (_step({"concurrency": 10**15}), "steps[0].concurrency"),
    "ITL p50 a string": (lambda r: r["steps"][0]["itl_ms"].update(p50="fast"), "itl_ms.p50"),
    "TTFT p50 negative": (lambda r: r["steps"][0]["ttft_ms"].update(p50=-3), "ttft_ms.p50"),
    "model a number": (lambda r: r.update(model=5), "model"),
}
CONFIG: dict[str, tuple[dict[str, Any], str]] = {
    "architectures 5": ({"architectures": 5}, "architectures"),
    "architectures [5]": ({"architectures": [5]}, "architectures"),
    "num_experts_per_tok 1000": ({"num_experts_per_tok": 1000}, "num_experts_per_tok"),
    "layers 10^9": ({"num_hidden_layers": 10**9}, "num_hidden_layers"),
    "hidden size 2^39": ({"hidden_size": 2**39}, "hidden_size"),
    "experts 10^9": ({"num_local_experts": 10**9}, "num_local_experts"),
    "heads past the hidden size": ({"num_attention_heads": 8192}, "num_attention_heads"),
    "KV heads past the heads": ({"num_key_value_heads": 64}, "num_key_value_heads"),
    "nested layers 10^9": (
        {"text_config": {**json.loads(MIXTRAL.read_text()), "num_hidden_layers": 10**9}},
        "text_config.num_hidden_layers",
    ),
    "a model of 2^54 parameters": (
        {
            "hidden_size": 2**20,
            "intermediate_size": 2**20,
            "num_hidden_layers": 4096,
            "num_attention_heads": 8192,
            "num_key_value_heads": 8,
        },
        "parameters, more than any model's",
    ),  # fmt: skip
}


def _refused(args: list[str], path: Path, says: str) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 1, done.output
    assert f"error: {path}: " in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.output and isinstance(done.exception, SystemExit)


@pytest.mark.parametrize("case", sorted(BENCH))
def test_a_broken_bench_result_is_refused_by_calibrate_and_compare(
    tmp_path: Path, case: str
) -> None:
    change, says = BENCH[case]
    run = copy.deepcopy(json.loads(RECORD.read_text()))
    change(run)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    plan = ["plan", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--gpu-type", "H200"]
    _refused([*plan, "--offline", "--calibrate", str(path)], path, says)
    if case != "succeeded missing":  # compare reads no token counts
        _refused(["bench", "compare", str(RECORD), str(path)], path, says)


@pytest.mark.parametrize("case", sorted(CONFIG))
def test_a_broken_model_config_is_refused_with_its_key_path(tmp_path: Path, case: str) -> None:
    change, says = CONFIG[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(MIXTRAL.read_text()), **change}), encoding="utf-8")
    _refused(["plan", "-m", "acme/model", "--gpus", "8", "--model-config", str(path)], path, says)


def test_the_unbroken_files_plan() -> None:
    plan = ["plan", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--gpu-type", "H200"]
    assert runner.invoke(app, [*plan, "--offline", "--calibrate", str(RECORD)]).exit_code == 0
    config = ["plan", "-m", "acme/model", "--gpus", "8", "--model-config", str(MIXTRAL)]
    assert runner.invoke(app, config).exit_code == 0
