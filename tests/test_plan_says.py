"""What plan and init say, for the newcomer's case of issue 43 (Qwen3-32B on 8 x H100, 8k
prompts, 300 out): the load the choice assumes, where the choice flips, the fewest GPUs that
would meet the targets, one verdict, and an init whose text says what its file holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.models import catalog
from pdctl.plan import Workload, make_plan, resolve_model

runner = CliRunner()
NEWCOMER = [
    "-m", "Qwen3-32B", "--gpus", "8", "--gpu-type", "H100",
    "--input-len", "8192", "--output-len", "300",
]  # fmt: skip


def _text(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def plan_text() -> str:
    return _text("plan", *NEWCOMER)


def test_plan_names_the_load_and_where_the_choice_flips(plan_text: str) -> None:
    assert (
        "Choice (--mode auto) at --concurrency 64 in flight (a closed loop; pdctl's default: "
        "give --concurrency for your load): aggregated" in plan_text
    )
    assert "Where the choice flips: PD wins from --concurrency 9 to 50" in plan_text


def test_the_flip_is_where_plan_picks_the_other_mode() -> None:
    """The span the search reports is where a plan at that load picks PD, and only there."""
    arch = resolve_model("Qwen3-32B")
    base = Workload(input_len=8192, output_len=300, ttft_ms=2000.0, itl_ms=200.0)

    def mode(concurrency: int) -> str:
        found = make_plan(
            arch, "H100", 8, Workload(**{**base.__dict__, "concurrency": concurrency})
        )
        assert found.choice is not None
        return found.choice.mode

    found = make_plan(arch, "H100", 8, base)
    assert found.flip is not None and (found.flip.low, found.flip.high) == (9, 50)
    modes = [mode(c) for c in (8, 9, 50, 51, 64)]
    assert modes == ["aggregated", "pd", "pd", "aggregated", "aggregated"]


def test_plan_names_the_fewest_gpus_meeting_the_targets(plan_text: str) -> None:
    assert "NOT met" in plan_text
    assert "Fewest GPUs meeting the targets: 12 x H100-80GB at this load (--gpus 12)" in plan_text
    twelve = _text("plan", *NEWCOMER[:2], "--gpus", "12", *NEWCOMER[4:])
    assert "TTFT 2000 ms (default) met" in twelve and "Fewest GPUs" not in twelve
    eleven = runner.invoke(app, ["plan", *NEWCOMER[:2], "--gpus", "11", *NEWCOMER[4:]])
    assert "Fewest GPUs meeting the targets: 12 x" in " ".join(eleven.output.split())


def test_one_verdict_the_rules_of_thumb_do_not_contradict_the_choice(plan_text: str) -> None:
    """The workload's shape says PD is likely to help; the estimates choose aggregated: the rules
    of thumb are not printed as advice beside it."""
    assert "Why aggregated" in plan_text
    assert "Rules of thumb" not in plan_text and "PD is likely to help" not in plan_text
    agrees = _text("plan", *NEWCOMER, "--concurrency", "16")
    assert "): PD, " in agrees and "Rules of thumb" in agrees and "PD is likely to help" in agrees


def test_init_prints_what_its_file_holds(tmp_path: Path) -> None:
    out = tmp_path / "values.yaml"
    text = _text("init", *NEWCOMER, "--mode", "aggregated", "--out", str(out))
    written = out.read_text()
    (spec,) = yaml.safe_load(written)["servingEngineSpec"]["modelSpec"]
    held = spec["vllmConfig"]["maxModelLen"]
    assert held == 40960 and f"max-model-len {held}" in text  # was the PD layout's 31744
    assert "at --concurrency 64 in flight" in text
    assert "where the choice flips: PD wins from --concurrency 9 to 50" in text
    header = " ".join(line.lstrip("# ") for line in written.splitlines() if line.startswith("#"))
    assert "at --concurrency 64 in flight" in header
    assert "Where the choice flips: PD wins from --concurrency 9 to 50" in header
    # warnings only for the mode written: the PD decode engine's is not the aggregated file's
    assert "decode engine holds" not in written and "decode engine holds" not in text


def test_a_misspelt_suffix_suggests_the_intended_model_first() -> None:
    result = runner.invoke(app, ["plan", "-m", "Qwen3-32B-Instrcut", "--gpus", "8", "--offline"])
    assert result.exit_code == 1
    assert "did you mean Qwen/Qwen3-32B or" in " ".join(result.stderr.split())
    assert catalog.model_suggestions("Qwen3-32B-Instrcut")[0] == "Qwen/Qwen3-32B"
