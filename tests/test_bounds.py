"""Every numeric option of every command has both bounds (pdctl/limits.py), --help shows them,
and a number past one is a usage error (exit 2) before any work: `plan --gpus 4096` ran for
minutes and `--gpus 10^9` never answered (issue 40). The option lists of bench (--concurrency,
--rate) and plan's --ttft/--itl are bounded the same way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from pdctl import limits
from pdctl.bench.workload import parse_concurrency, parse_rate
from pdctl.cli.app import app
from pdctl.errors import UsageError
from pdctl.plan.objective import target

runner = CliRunner()
# click names its types "integer"/"integer range"; the click inside typer 0.26+ "int"/"int range"
NUMERIC = ("int", "integer", "float", "int range", "integer range", "float range")


def _numeric(command: Any, words: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(`pdctl COMMAND --flag`, the parameter) for each numeric option, sub-commands included."""
    for param in command.params:
        if param.type.name in NUMERIC:
            yield " ".join(("pdctl", *words, max(param.opts, key=len))), param
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _numeric(sub, (*words, name))


OPTIONS = dict(_numeric(typer.main.get_command(app)))


def test_the_commands_have_numeric_options() -> None:
    assert {"pdctl plan --gpus", "pdctl bench --requests", "pdctl verify --timeout"} <= set(OPTIONS)


@pytest.mark.parametrize("flag", sorted(OPTIONS))
def test_each_numeric_option_has_both_bounds(flag: str) -> None:
    kind = OPTIONS[flag].type
    assert getattr(kind, "min", None) is not None, f"{flag} has no lower bound"
    assert getattr(kind, "max", None) is not None, f"{flag} has no upper bound"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["plan", "-m", "llama-3.1-8b", "--offline", "--gpus", "1000000000"], "--gpus"),
        (["plan", "-m", "llama-3.1-8b", "--offline", "--gpus", str(limits.GPUS_MAX + 1)], "--gpus"),
        (
            ["init", "-m", "llama-3.1-8b", "--offline", "--gpus", "8", "--input-len", "10485761"],
            "--input-len",
        ),  # fmt: skip
        (
            ["plan", "-m", "llama-3.1-8b", "--gpus", "8", "--concurrency", "1000000000000000"],
            "--concurrency",
        ),  # fmt: skip
        (
            ["plan", "-m", "llama-3.1-8b", "--gpus", "8", "--max-model-len", "99999999999"],
            "--max-model-len",
        ),  # fmt: skip
        (["plan", "-m", "llama-3.1-8b", "--gpus", "8", "--rate", "1e300"], "--rate"),
        (["bench", "--url", "http://127.0.0.1:9", "--requests", "100000000000"], "--requests"),
        (["verify", "--url", "http://127.0.0.1:9", "--router-port", "70000"], "--router-port"),
        (["status", "--events", "100000000"], "--events"),
    ],
)
def test_a_number_past_its_bound_is_a_usage_error(args: list[str], flag: str) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert flag in done.stderr and "Traceback" not in done.output


def test_help_shows_the_bounds() -> None:
    shown = " ".join(runner.invoke(app, ["plan", "--help"]).output.split())
    assert f"1<=x<={limits.GPUS_MAX}" in shown
    assert f"1<=x<={limits.TOKENS_MAX}" in shown


def test_bench_steps_and_latency_targets_are_bounded() -> None:
    assert parse_concurrency(f"1,{limits.CONCURRENCY_MAX}") == (1, limits.CONCURRENCY_MAX)
    with pytest.raises(UsageError, match="--concurrency"):
        parse_concurrency("1,1000000000000000")
    with pytest.raises(UsageError, match="--concurrency: 1,001 steps"):
        parse_concurrency(",".join(["1"] * (limits.STEPS_MAX + 1)))
    with pytest.raises(UsageError, match="--rate"):
        parse_rate("0.5,1e300")
    assert target(str(limits.MS_MAX), "--ttft", 2000.0) == (limits.MS_MAX, False)
    with pytest.raises(UsageError, match="--ttft '1e12'"):
        target("1e12", "--ttft", 2000.0)
