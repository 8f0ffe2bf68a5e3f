"""What a person reads, at 80 and 200 columns (COLUMNS) and piped (CliRunner captures output, as a
pipe does): golden outputs of validate's errors, `template --summary`, status (the Kubernetes API
double, tests/doubles/kube_api.py), verify (the real vllm-router before engine doubles,
tests/doubles/vllm_engine.py) and bench's table; plan and init goldens keep their structure, not
their figures. Also: no table wider than COLUMNS and no cut cell, no hard wrap inside a sentence
when piped, indented continuation lines on a terminal, NO_COLOR, whole help lines.

Regenerate the goldens after a deliberate change to the output with
`PDCTL_REGEN_GOLDEN=1 python -m pytest tests/test_person_output.py` (or `make golden`), then
review the diff."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from typer.testing import Result as Invoked

from pdctl.bench.run import Result
from pdctl.bench.workload import BenchSettings
from pdctl.cli.app import COMMANDS, app
from pdctl.cli.bench import _print_text as print_bench
from pdctl.cli.bench_compare import compare
from pdctl.helm import Helm
from tests.doubles.kube_api import KubeAPIDouble
from tests.doubles.router_stack import Stack, pd_stack
from tests.helpers import CHART, ROOT, TUTORIAL_VALUES

GOLDEN = ROOT / "tests" / "golden" / "output"
REGENERATE = os.environ.get("PDCTL_REGEN_GOLDEN") == "1"
WIDTHS = (80, 200)
runner = CliRunner()

# Three schema errors (an unknown key, a wrong type, a value out of its enum) and a PD rule's.
BAD_VALUES = """\
servingEngineSpec:
  modelSpec:
    - name: prefill
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: meta-llama/Llama-3.1-8B-Instruct
      replicaCount: one
      requestGPU: 1
      maxModelLenn: 8192
      vllmConfig:
        kvTransfer:
          connector: NixlConnector
          role: kv_producer
    - name: decode
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: meta-llama/Llama-3.1-8B-Instruct
      requestGPU: 1
      vllmConfig:
        kvTransfer:
          connector: NixlConnector
          role: kv_producer
routerSpec:
  routingLogic: fastest
"""


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGENERATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing: run PDCTL_REGEN_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(encoding="utf-8"), (
        f"output differs from {path.name}; if the change is meant, regenerate with "
        "PDCTL_REGEN_GOLDEN=1 and review the diff"
    )


def both(result: Invoked) -> str:
    return f"$ exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


def invoke(args: list[str], width: int, **env: str) -> Invoked:
    return runner.invoke(app, args, env={"COLUMNS": str(width), **env})


def figures(text: str) -> str:
    """Every number as N: what stays is the structure (headings, row labels, column names)."""
    return re.sub(r"\d+(?:[.,]\d+)*", "N", text)


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in "┏┃┡│└┌├╇━┗"]


def assert_tables_fit(text: str, width: int) -> None:
    rows = table_lines(text)
    assert rows, text
    assert all(len(line) <= width for line in rows), "\n".join(rows)
    assert "…" not in text


# ---- validate, template --summary ---------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_validate_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    monkeypatch.chdir(tmp_path)
    Path("values.yaml").write_text(BAD_VALUES, encoding="utf-8")
    result = invoke(["validate", "values.yaml"], width)
    assert result.exit_code == 1, result.output
    # a finding is one line (and its hint one more), never folded at COLUMNS
    findings = [line for line in result.stdout.splitlines() if not line.startswith("    hint: ")]
    assert findings and all(line.startswith("values.yaml:") for line in findings), result.stdout
    assert_golden(f"validate-errors-{width}.txt", both(result))


@pytest.mark.parametrize("width", WIDTHS)
def test_template_summary(width: int) -> None:
    result = invoke(["template", str(TUTORIAL_VALUES), "--summary"], width)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # piped: a sentence stays on its line (the base folded these at 80 columns)
    assert "  llama-prefill: prefill, 1 replica(s) x 1 pod(s), 1 GPU(s) per pod" in lines
    assert any(
        line.startswith("  transfers show on decode pods as vllm:")
        and line.endswith("(vLLM releases from early 2026)")
        for line in lines
    ), result.stdout
    assert any(line.startswith("Objects: ") and "ServiceAccount" in line for line in lines)
    assert_golden(f"template-summary-{width}.txt", both(result).replace(f"{ROOT}/", ""))


def test_template_summary_on_a_terminal_wraps_with_indented_continuations() -> None:
    """TTY_COMPATIBLE=1: rich treats the output as a terminal (COLUMNS its width)."""
    result = invoke(["template", str(TUTORIAL_VALUES), "--summary"], 50, TTY_COMPATIBLE="1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # a word longer than the width (a metric's name) has a line of its own
    assert all(len(line) <= 50 or len(line.split()) == 1 for line in lines), result.stdout
    router = lines.index("Router: pd-deployment-router")
    assert lines[router + 1].startswith("  (lmcache/lmstack-router:pd-05-26)")
    pool = lines.index("  llama-decode: decode, 1 replica(s) x 1 pod(s), 1")
    assert lines[pool + 1] == "    GPU(s) per pod"


# ---- status (Kubernetes API double), verify (engine doubles) ---------------------------------


@pytest.fixture
def stable_pod_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The double names pods in the order it creates them: a fixed suffix of the same length in
    their place, so the golden compares (and the table folds as it would)."""
    from pdctl import release

    real = release.status

    def status(*args: Any, **kwargs: Any) -> release.StatusReport:
        report = real(*args, **kwargs)
        for group in report.groups:
            for pod in group.pods:
                head, template_hash, suffix = pod.name.rsplit("-", 2)
                pod.name = f"{head}-{'h' * len(template_hash)}-{'p' * len(suffix)}"
        return report

    monkeypatch.setattr(release, "status", status)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.usefixtures("stable_pod_names")
def test_status(kube: KubeAPIDouble, helm4: Helm, width: int) -> None:
    run = helm4.run(["upgrade", "--install", "pd", str(CHART), "-f", str(TUTORIAL_VALUES)])
    assert run.returncode == 0, run.stderr
    result = invoke(["status", "--helm", str(helm4.path)], width)
    assert result.exit_code == 0, result.output
    assert_tables_fit(result.stdout, width)
    text = re.sub(r"updated [^\n]*", "updated TIME", both(result))
    text = re.sub(r"cluster IP [0-9.]+", "cluster IP IP", text)
    assert_golden(f"status-{width}.txt", text)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with pd_stack(tmp_path_factory.mktemp("pd")) as found:
        yield found


def _timings(text: str) -> str:
    """Measured times and what follows from them as T; the doubles' fixed counts stay."""
    text = re.sub(r"-?\d+(?:\.\d+)? ms\b", "T ms", text)
    text = re.sub(r"PD (adds|saves) T ms", "PD adds or saves T ms", text)  # the sign is timing's
    return re.sub(r"\b(mean|p50|p90|p99) \d+(?:\.\d+)?", r"\1 T", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_verify(stack: Stack, width: int) -> None:
    args = ["verify", *stack.urls(), "--settle", "0", "--max-tokens", "8", "--prompt-words", "200"]
    result = invoke(args, width)
    assert result.exit_code == 0, result.output
    text = both(result)
    for name, url in (("router", stack.router), ("prefill", stack.prefill.url)):
        text = text.replace(url, f"http://{name}")
    text = _timings(text.replace(stack.decode.url, "http://decode"))
    assert_golden(f"verify-{width}.txt", text)


# ---- bench's table --------------------------------------------------------------------------


def _step(concurrency: int, ttft: float, slo_met: bool) -> dict[str, object]:
    def stat(base: float) -> dict[str, float]:
        return {"p50": base, "p90": base * 1.5, "p99": base * 2.25}

    return {
        "concurrency": concurrency, "rate": None, "succeeded": 32, "errors": 0,
        "request_throughput": 3.21, "output_token_throughput": 3204.51,
        "ttft_ms": stat(ttft), "itl_ms": stat(12.34), "first_gap_ms": stat(25.6),
        "tpot_ms": stat(12.1), "e2e_ms": stat(9876.5),
        "goodput": 2.5, "slo_met": slo_met, "error_samples": [], "held_arrivals": 0,
        "dataset_wrapped": False,
        "engines": {"decode": {"prompt_tokens": 4096.0, "kv_gbps": 12.5}},
    }  # fmt: skip


SWEEP = Result(
    router="http://router",
    model="meta-llama/Llama-3.1-8B-Instruct",
    connector="NixlConnector",
    workload=BenchSettings(
        input_len=512, output_len=128, concurrency=(1, 16), requests=32, slo_ttft_ms=2000.0
    ),
    steps=[_step(1, 153.25, True), _step(16, 3204.5, False)],
)


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    """Fixed figures (a synthetic result: no engine ran) so that the golden compares whole."""
    monkeypatch.setenv("COLUMNS", str(width))
    print_bench(SWEEP)
    out = capsys.readouterr()
    assert_tables_fit(out.out, width)
    for figure in (
        ("3204.5/4806.8/7210.1", " 3204.5 ") if width == 200 else (" 3204.5 ", " 4806.8 ")
    ):
        assert figure in out.out
    assert_golden(f"bench-{width}.txt", f"--- stdout\n{out.out}--- stderr\n{out.err}")


def test_bench_through_the_doubles_keeps_its_columns(stack: Stack) -> None:
    args = ["bench", *stack.urls(), "--input-len", "20", "--output-len", "4", "--requests", "2"]
    for width in WIDTHS:
        result = invoke(args, width)
        assert result.exit_code == 0, result.output
        assert_tables_fit(result.stdout, width)
        assert "out tok/s" in result.stdout and "TTFT" in result.stdout


# ---- plan and init: structure, not figures --------------------------------------------------


PLAN = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "4", "--offline"]


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_structure(width: int) -> None:
    result = invoke(["plan", *PLAN, "--pareto"], width)
    assert result.exit_code == 0, result.output
    assert_tables_fit(result.stdout, width)
    heading = next(line for line in result.stdout.splitlines() if "PD layout" in line)
    assert heading.endswith("max-model-len 131072")  # the base folded it inside the table
    assert_golden(f"plan-{width}.txt", figures(both(result)))


def test_init_structure() -> None:
    result = invoke(["init", *PLAN, "--out", "-"], 80)
    assert result.exit_code == 0, result.output
    assert_golden("init.txt", figures(both(result).replace(f"{ROOT}/", "")))


# ---- colour and help --------------------------------------------------------------------------


def test_no_color_turns_colour_off_on_a_terminal() -> None:
    from pdctl.cli._output import Screen

    terminal = {"TTY_COMPATIBLE": "1", "TERM": "xterm-256color", "COLUMNS": "80"}
    for no_color, coloured in (("", True), ("1", False)):
        with pytest.MonkeyPatch.context() as env:
            for key, value in {**terminal, "NO_COLOR": no_color}.items():
                env.setenv(key, value)
            screen = Screen()
            with screen.console.capture() as captured:
                screen.line("warning: a warning", style="yellow")
        assert ("\x1b[33m" in captured.get()) is coloured, repr(captured.get())


def _paragraph(doc: str | None) -> str:
    return " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())


def test_every_command_line_in_the_root_help_is_whole_at_80_columns() -> None:
    result = invoke(["--help"], 80)
    listed = result.stdout.split("Commands:\n", 1)[1]
    entries = re.split(r"\n  (?=\S)", "\n" + listed.strip("\n"))[1:]
    found = {e.split()[0]: " ".join(e.split()[1:]) for e in entries}
    for command in COMMANDS:
        name = command.__name__
        assert found[name] == _paragraph(command.__doc__), name
        assert found[name].endswith((".", ")")), name
    assert all(len(line) <= 80 for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    "command", [[c.__name__] for c in COMMANDS] + [["bench", "compare"]], ids=" ".join
)
def test_every_command_help_fits_80_columns(command: list[str]) -> None:
    result = invoke([*command, "--help"], 80)
    assert result.exit_code == 0, result.output
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    assert "…" not in result.stdout
    if command == ["bench"]:
        listed = " ".join(result.stdout.split("Commands:\n", 1)[1].split("\n\n")[0].split())
        assert listed == f"compare {_paragraph(compare.__doc__)}"
