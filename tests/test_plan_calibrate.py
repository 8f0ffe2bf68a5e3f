"""`pdctl plan --calibrate`: the planner fitted to one step of a bench run, checked on the other
steps of the kept H200 bench record (benchmarks/records/real-engines-h200-1gpu-bench/, real vLLM
0.26.0 with NIXL over TCP and vllm-router 0.1.17; docs/sizing.md, "Calibrating with a bench
run"), and on made-up runs for the refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import InputError
from pdctl.models import catalog
from pdctl.plan import calibrate, resolve_model
from pdctl.plan.layout import Request

RECORD = Path(__file__).parent.parent / "benchmarks/records/real-engines-h200-1gpu-bench"
PD = RECORD / "pd-through-router.json"
runner = CliRunner()


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PD.read_text())
    return data


@pytest.fixture(scope="module")
def request_() -> Request:
    """What ran: Llama-3.1-8B, the two engines sharing one H200 at 0.45 utilization each."""
    arch = resolve_model("meta-llama/Llama-3.1-8B-Instruct", None, True)
    return Request(arch=arch, gpu=catalog.gpu("H200"), gpus=2, utilization=0.45)


def test_fit_on_one_request_in_flight(run: dict[str, Any], request_: Request) -> None:
    fitted = calibrate.fit(run, request_, 1, "pd.json")
    assert fitted.concurrency == 1 and fitted.link_gbps == 0.486
    step = run["steps"][0]
    prefill = step["engines"]["prefill"]["phase_mean_s"]["prefill"]
    assert fitted.prefill_scale == pytest.approx(prefill / request_.prefill_s(1, 2048))
    assert 0.9 < fitted.prefill_scale < 1.0 and 0.95 < fitted.decode_scale <= 1.0
    applied = fitted.apply(request_)
    assert applied.link_gbps == 0.486 and applied.prefill_s(1, 2048) == pytest.approx(prefill)
    assert fitted.source == "pd.json at concurrency 1" == applied.calibrated_to


def test_fitted_on_one_step_the_error_on_the_others_at_least_halves(
    run: dict[str, Any], request_: Request
) -> None:
    """The issue's acceptance: fitted on concurrency 1, the TTFT p50 error at 4 and 16 at least
    halves. ITL stays within 5% of the run at 4 in flight. At 16 the link (TCP speed) holds the
    throughput down, and the decode engine ran about one sequence at a time: Little's law over the
    record (1.4 requests/s, 0.73 s in decode's decode phase) gives 1.0, and so does the plan's
    decode batch. The record's ITL there is 20% above that step's, as the prefill engine's steps
    shared the one GPU (docs/sizing.md "TTFT under load")."""
    before = calibrate.errors(run, request_, 1)
    fitted = calibrate.fit(run, request_, 1, "pd.json").apply(request_)
    after = calibrate.errors(run, fitted, 1)
    assert [r["concurrency"] for r in after] == [1, 4, 16]
    for old, new in zip(before[1:], after[1:], strict=True):
        assert abs(new["ttft_ms"]["error"]) <= abs(old["ttft_ms"]["error"]) / 2, (old, new)
    assert abs(after[1]["itl_ms"]["error"]) < 0.05
    # at TCP speed the link is the bottleneck: KV waits in line, as the record's decode queue shows
    assert abs(after[2]["ttft_ms"]["error"]) < 0.25
    step = run["steps"][2]
    decoding = step["request_throughput"] * step["engines"]["decode"]["phase_mean_s"]["decode"]
    assert round(decoding) == calibrate.estimate_step(fitted, step, 1, 1, 1).decode_batch == 1


def test_the_step_chosen_and_the_refusals(run: dict[str, Any], request_: Request) -> None:
    assert calibrate.fit(run, request_, 1, "pd.json", concurrency=4).concurrency == 4
    with pytest.raises(InputError, match=r"no step at concurrency 8 \(it has 1, 4, 16\)"):
        calibrate.fit(run, request_, 1, "pd.json", concurrency=8)
    open_loop = copy.deepcopy(run)
    for step in open_loop["steps"]:
        step["concurrency"], step["rate"] = None, 2.0
    with pytest.raises(InputError, match="no closed-loop step"):
        calibrate.fit(open_loop, request_, 1, "pd.json")
    blind = copy.deepcopy(run)
    for step in blind["steps"]:
        step["engines"] = {}
    fitted = calibrate.fit(blind, request_, 1, "alone.json")
    assert fitted.prefill_scale == 1.0 and fitted.link_gbps is None
    assert any("prefill: not measured" in note for note in fitted.notes)


def test_plan_cli_calibrates_and_says_so(tmp_path: Path) -> None:
    base = ["plan", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--gpu-type", "H200"]
    base += ["--input-len", "2048", "--output-len", "128", "--concurrency", "16", "-o", "json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    done = runner.invoke(app, [*base, "--calibrate", str(PD)])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert plain["assumptions"]["calibration"] is None
    calibration = data["assumptions"]["calibration"]
    assert 0.9 < calibration["prefill_scale"] < 1.0
    assert any("KV link 0.486 GB/s measured" in n for n in calibration["notes"])
    assert data["estimates"]["bottleneck"] == "kv-transfer"
    assert data["estimates"]["ttft_ms"] > 10 * plain["estimates"]["ttft_ms"]
    missing = runner.invoke(app, [*base, "--calibrate", str(tmp_path / "none.json")])
    assert missing.exit_code == 1 and "none.json: cannot be read: no such file" in missing.stderr
    (tmp_path / "bad.json").write_text("{}")
    bad = runner.invoke(app, [*base, "--calibrate", str(tmp_path / "bad.json")])
    assert bad.exit_code == 1 and "not a pdctl bench result" in bad.stderr


def test_init_writes_the_calibrated_plan_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "values.yaml"
    args = ["init", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--gpu-type", "H200"]
    args += ["--offline", "--input-len", "2048", "--output-len", "128", "--concurrency", "16"]
    done = runner.invoke(app, [*args, "--mode", "pd", "--calibrate", str(PD), "--out", str(out)])
    assert done.exit_code == 0, done.output
    text = out.read_text()
    assert f"--calibrate {PD}" in text  # the command that writes it again
    assert "#   (prefill x0.97: 47.7 ms measured per 2048-token prompt" in text
    assert "(kv-transfer-bound)" in text
    target = runner.invoke(app, [*args, "--target-rate", "1", "--out", "-", "-o", "json"])
    assert target.exit_code == 0, target.output
    assert json.loads(target.stdout)["plan"]["objective"]["target_rate"] == 1.0
