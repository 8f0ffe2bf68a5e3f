"""What a person reads from plan, init and the catalog: `--calibrate` with a bench run of another
model, headings that say what the estimates are, did-you-mean closest first, hints that name
commands that work, and `pdctl catalog`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import hints
from pdctl.cli.app import app
from pdctl.errors import EnvironmentProblem
from pdctl.models import catalog

RECORD = Path(__file__).parent.parent / "benchmarks/records/real-engines-h200-1gpu-bench"
BENCH = RECORD / "pd-through-router.json"  # Llama-3.1-8B on one H200
runner = CliRunner()


def _plan(*args: str) -> Any:
    return runner.invoke(
        app, ["plan", "--gpu-type", "H200", "--offline", *args], env={"COLUMNS": "400"}
    )


def _bench_of(tmp_path: Path, model: str) -> Path:
    data = json.loads(BENCH.read_text())
    data["model"] = model
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_calibrating_to_a_run_of_another_model_warns_and_fits_on_that_models_roofline() -> None:
    same = _plan("-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", str(BENCH), "-o", "json")
    other = _plan("-m", "llama-3.1-70b", "--gpus", "8", "--calibrate", str(BENCH), "-o", "json")
    assert same.exit_code == 0 and other.exit_code == 0, other.output
    fitted_same = json.loads(same.stdout)
    fitted_other = json.loads(other.stdout)
    assert not any("--calibrate" in w for w in fitted_same["warnings"])
    warning = fitted_other["warnings"][0]
    assert "measured meta-llama/Llama-3.1-8B-Instruct, not meta-llama/Llama-3.1-70B-Instruct" in (
        warning
    )
    assert "bench meta-llama/Llama-3.1-70B-Instruct" in warning
    # The 8B's measured time over the 8B's roofline, not over the 70B's (that was x0.10).
    scale = fitted_other["assumptions"]["calibration"]["prefill_scale"]
    assert scale == fitted_same["assumptions"]["calibration"]["prefill_scale"]
    assert 0.9 < scale < 1.0


def test_a_run_under_a_name_the_catalog_does_not_know_is_taken_for_the_planned_model(
    tmp_path: Path,
) -> None:
    bench = _bench_of(tmp_path, "my-llama")
    result = _plan("-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", str(bench))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert f"--calibrate {bench} measured my-llama, not meta-llama/Llama-3.1-8B-Instruct?" in text
    assert "fitted as if it were meta-llama/Llama-3.1-8B-Instruct" in text
    assert "--served-model-name" in text


def test_an_alias_of_the_planned_model_is_the_same_model(tmp_path: Path) -> None:
    bench = _bench_of(tmp_path, "meta-llama/Meta-Llama-3.1-8B-Instruct")
    result = _plan("-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", str(bench), "-o", "json")
    assert result.exit_code == 0, result.output
    assert not any("--calibrate" in w for w in json.loads(result.stdout)["warnings"])


def test_headings_say_what_the_estimates_are() -> None:
    plain = _plan("-m", "llama-3.1-8b", "--gpus", "2")
    calibrated = _plan("-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", str(BENCH))
    assert plain.exit_code == 0 and calibrated.exit_code == 0, calibrated.output
    assert "Estimates (roofline estimate, not measured;" in " ".join(plain.stdout.split())
    text = " ".join(calibrated.stdout.split())
    assert "not measured" not in text
    assert f"Estimates (roofline calibrated to {BENCH} at concurrency 1;" in text
    assert "calibration: prefill x0.97" in text
    data = json.loads(
        _plan("-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", str(BENCH), "-o", "json").stdout
    )
    assert data["estimates"]["basis"] == f"roofline calibrated to {BENCH} at concurrency 1"
    assert data["assumptions"]["calibration"]["source"] == f"{BENCH} at concurrency 1"


def test_init_writes_the_calibrated_heading_into_the_values_file() -> None:
    result = runner.invoke(
        app,
        ["init", "-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "H200", "--offline"]
        + ["--mode", "pd", "--calibrate", str(BENCH), "--out", "-"],
    )
    assert result.exit_code == 0, result.output
    header = result.stdout.replace("\n# ", " ")  # the comments wrap at 100 columns
    assert (
        f"Estimates of the PD layout (roofline calibrated to {BENCH} at concurrency 1) for"
        in header
    )
    assert "not a measurement" not in header


def test_did_you_mean_lists_the_closest_model_first() -> None:
    result = _plan("-m", "Llama-3.1-8B-Instrct", "--gpus", "2")
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert (
        "did you mean meta-llama/Llama-3.1-8B-Instruct or meta-llama/Llama-3.1-70B-Instruct or "
        "meta-llama/Llama-3.1-405B-Instruct?" in message
    )
    assert "`pdctl catalog models` lists the catalog" in message


def test_did_you_mean_lists_the_closest_gpu_first() -> None:
    result = runner.invoke(app, ["plan", "-m", "llama-3.1-8b", "--gpus", "2", "--gpu-type", "H2OO"])
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "did you mean H200" in message and "`pdctl catalog gpus` describes them" in message


def test_closest_ranks_by_ratio_ignoring_case_and_keeps_ties_in_order() -> None:
    assert hints.closest("abcd", ["abxx", "ABCX", "abcd", "abyy"], n=4, cutoff=0.5) == [
        "abcd",
        "ABCX",
        "abxx",
        "abyy",
    ]
    assert hints.did_you_mean([]) == ""


def test_schema_did_you_mean_uses_the_same_ranking() -> None:
    from pdctl.validation.schema import _did_you_mean

    assert _did_you_mean("modelurl", ["name", "modelURL", "modelUrls"]) == (
        "did you mean modelURL or modelUrls?"
    )


def test_install_hints_name_what_works_from_a_checkout_and_beside_a_wheel() -> None:
    plot = hints.install_extra("plot")
    assert plot.startswith("pip install '.[plot]' in a pd-stack checkout")
    assert "'matplotlib" in plot and "pdctl[" not in plot
    assert "pdctl[" not in hints.install_extra("hub")
    assert "--force-reinstall ." in hints.reinstall()


def test_plots_without_matplotlib_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pdctl import plotting

    monkeypatch.setattr(plotting, "available", lambda: False)
    with pytest.raises(EnvironmentProblem) as raised:
        plotting.figure()
    assert raised.value.hint == hints.install_extra("plot")


def test_hub_hint_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    result = runner.invoke(app, ["plan", "-m", "someone/unknown-model", "--gpus", "2"])
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert "pip install '.[hub]' in a pd-stack checkout" in message
    assert "pdctl[hub]" not in message


def test_catalog_lists_the_models_and_gpus_plan_knows() -> None:
    result = runner.invoke(app, ["catalog", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [m["name"] for m in data["models"]] == list(catalog.models())
    assert [g["name"] for g in data["gpus"]] == list(catalog.gpus())
    h200 = next(g for g in data["gpus"] if g["name"] == "H200")
    assert "h200" in h200["aliases"] and h200["memory_gib"] == catalog.gpu("H200").memory_gib


def test_catalog_sections_in_text_are_whole_at_80_columns() -> None:
    gpus = runner.invoke(app, ["catalog", "gpus"], env={"COLUMNS": "80"})
    models = runner.invoke(app, ["catalog", "models"], env={"COLUMNS": "80"})
    assert gpus.exit_code == 0 and models.exit_code == 0, models.output
    assert "H100-80GB" in gpus.stdout and "Llama" not in gpus.stdout
    assert "qwen3-30b" in models.stdout and "MI300X" not in models.stdout
    assert "…" not in gpus.stdout + models.stdout
