"""bench's report folder (CSV and JSON per run, plots of every run there, one line per run),
`pdctl bench compare` (steps matched by load, ratios to the first run, bad files refused) and
`pdctl plan --pareto --plot`. The steps are real summaries (pdctl.bench.summary) of synthetic
timings; nothing is timed."""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import plotting
from pdctl.bench import compare as comparing
from pdctl.bench import plots, report
from pdctl.bench.run import Result
from pdctl.bench.runs import FIRST_GAP_P50, TTFT_P50, Run, load_axis, read_all
from pdctl.bench.summary import summarize
from pdctl.bench.workload import BenchSettings
from pdctl.cli.app import app
from pdctl.errors import EnvironmentProblem, UsageError
from pdctl.verify.timing import Timed

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"


def step(concurrency: int, ttft: float, rate: float | None = None, slo: bool = False) -> Any:
    """A step of two requests: TTFT `ttft` and 2 x ttft, gaps of ttft / 10, 4 tokens each, 2 s."""
    timed = [
        Timed(None, ttft_ms=t, e2e_ms=t * 2, gaps_ms=[t / 10] * 3, completion_tokens=4)
        for t in (ttft, 2 * ttft)
    ]
    workload = BenchSettings(concurrency=(concurrency,), slo_ttft_ms=ttft * 1.5 if slo else None)
    done = summarize(concurrency, timed, 2.0, workload)
    if rate is not None:
        done["rate"] = rate
    return done


def result(steps: list[Any]) -> dict[str, Any]:
    return {"router": "http://r", "model": "m", "connector": "NixlConnector", "steps": steps}


def run(label: str, steps: list[Any]) -> Run:
    return Run(label, result(steps))


def saved(folder: Path, name: str, steps: list[Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(result(steps)), encoding="utf-8")
    return path


def is_matplotlib_png(path: Path) -> bool:
    data = path.read_bytes()
    return data.startswith(PNG) and b"Matplotlib" in data[:200]  # the tEXt Software chunk


# ---- the series: one line per run (and percentile) ------------------------------------------


def test_one_line_per_run_and_percentile_in_load_order() -> None:
    a = run("a", [step(4, 100.0), step(1, 50.0)])  # a sweep given out of order
    b = run("b", [step(1, 40.0), step(4, 80.0), step(16, 300.0)])
    charts = {c.name: c for c in plots.charts([a, b])}
    assert list(charts) == ["ttft", "itl", "e2e", "requests", "throughput"]
    ttft = charts["ttft"]
    assert [line.label for line in ttft.lines] == ["a p50", "a p99", "b p50", "b p99"]
    assert [line.dashed for line in ttft.lines] == [False, True, False, True]
    assert ttft.lines[0].colour == ttft.lines[1].colour != ttft.lines[2].colour
    assert ttft.lines[0].x == (1.0, 4.0) and ttft.lines[0].y == (75.0, 150.0)  # p50 of t, 2t
    assert ttft.lines[2].x == (1.0, 4.0, 16.0)
    assert ttft.axis == "concurrency"
    throughput = charts["throughput"]
    assert [line.label for line in throughput.lines] == ["a", "b"]
    assert throughput.lines[0].y == (4.0, 4.0)  # 8 tokens in 2 s
    figure = plots.draw(ttft)
    drawn = figure.axes[0].get_lines()
    assert [line.get_label() for line in drawn] == ["a p50", "a p99", "b p50", "b p99"]
    assert [line.get_linestyle() for line in drawn] == ["-", "--", "-", "--"]
    assert figure.axes[0].get_xlabel() == "concurrency (requests in flight)"


def test_goodput_only_when_every_run_had_an_slo() -> None:
    with_slo = [run("a", [step(1, 10.0, slo=True)]), run("b", [step(1, 10.0, slo=True)])]
    names = [c.name for c in plots.charts(with_slo)]
    assert "goodput" in names and "requests" not in names
    goodput = next(c for c in plots.charts(with_slo) if c.name == "goodput")
    assert goodput.lines[0].y == (0.5,)  # one of two requests within 15 ms TTFT, over 2 s
    mixed = [with_slo[0], run("c", [step(1, 10.0)])]
    assert "requests" in [c.name for c in plots.charts(mixed)]


def test_load_is_the_rate_only_when_every_step_has_one() -> None:
    open_loop = [run("a", [step(8, 10.0, rate=2.5), step(8, 20.0, rate=5.0)])]
    assert load_axis(open_loop) == "rate"
    (ttft, *_) = plots.charts(open_loop)
    assert ttft.axis == "rate" and ttft.lines[0].x == (2.5, 5.0)
    assert plots.draw(ttft).axes[0].get_xlabel() == "request rate (requests/s)"
    mixed = [*open_loop, run("b", [step(4, 10.0)])]
    assert load_axis(mixed) == "concurrency"


# ---- bench --report: files, and plots of every run in the folder ---------------------------


def test_report_folder_keeps_each_run_and_plots_them_all(tmp_path: Path) -> None:
    workload = BenchSettings(concurrency=(1, 4))
    first = Result("http://r", "m", "NixlConnector", workload, [step(1, 10.0), step(4, 30.0)])
    second = Result("http://r", "m", "NixlConnector", workload, [step(1, 12.0), step(4, 20.0)])
    report.write(first, tmp_path)
    written = report.write(second, tmp_path)  # the same second: a stem of its own
    assert len(list(tmp_path.glob("bench-*.json"))) == 2
    assert len(list(tmp_path.glob("bench-*.csv"))) == 2
    names = {p.name for p in written}
    assert {f"plot-{n}.png" for n in ("ttft", "itl", "e2e", "requests", "throughput")} <= names
    for path in written:
        assert path.exists()
        if path.suffix == ".png":
            assert is_matplotlib_png(path), path
    rows = list(csv.DictReader((tmp_path / plots.DATA).open()))
    assert len({r["run"] for r in rows}) == 2 and len(rows) == 4
    assert list(rows[0])[:4] == ["run", "concurrency", "ttft_ms_p50", "ttft_ms_p99"]
    assert {"itl_ms_p50", "itl_ms_p99", "request_throughput", "output_token_throughput"} <= set(
        rows[0]
    )


def test_the_step_csv_has_the_rate_of_open_loop_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plotting, "available", lambda: False)  # the CSV alone, faster
    done = Result("http://r", "m", None, BenchSettings(), [step(8, 10.0, rate=2.0)])
    table = report.write(done, tmp_path)[0]
    (row,) = csv.DictReader(table.open())
    assert list(row)[:2] == ["concurrency", "rate"] and row["rate"] == "2.0"
    assert "rate" not in report.row(step(1, 10.0))
    assert row["first_gap_ms_p50"] == "1.5"  # the two requests' first gaps: 1.0 and 2.0 ms


def test_a_step_saved_before_the_first_gap_existed_still_makes_a_row() -> None:
    older = step(4, 10.0)
    del older["first_gap_ms"]
    assert report.row(older)["first_gap_ms_p50"] is None
    assert report.row(older)["ttft_ms_p50"] == 15.0


def test_without_matplotlib_the_numbers_still_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plotting, "available", lambda: False)
    written = plots.write([run("a", [step(1, 10.0)])], tmp_path)
    assert [p.name for p in written] == [plots.DATA] and not report.plots_available()
    with pytest.raises(EnvironmentProblem):
        plotting.figure()


def test_the_sweep_still_runs_without_a_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pdctl bench --url X ...` (the group's callback) runs the sweep; `bench compare` does not."""
    import pdctl.bench.run
    import pdctl.cli.bench
    from pdctl.cli._targets import Found

    calls: list[BenchSettings] = []

    @contextlib.contextmanager
    def targets(*args: Any, **options: Any) -> Iterator[Found]:
        yield Found(targets=None, api_key=None)  # type: ignore[arg-type]

    def sweep(
        found: Any, workload: BenchSettings, progress: Any = None, api_key: str | None = None
    ) -> Result:
        calls.append(workload)
        steps = [step(c, 10.0 * c) for c in workload.concurrency]
        return Result("http://r", "m", None, workload, steps)

    monkeypatch.setattr(pdctl.cli.bench, "resolve_targets", targets)
    monkeypatch.setattr(pdctl.bench.run, "run", sweep)
    args = ["bench", "--url", "http://r", "--concurrency", "1,2", "--report", str(tmp_path)]
    done = runner.invoke(app, [*args, "-o", "json"])
    assert done.exit_code == 0, done.output
    assert calls[0].concurrency == (1, 2)
    files = json.loads(done.stdout)["files"]
    assert any(f.endswith("plot-ttft.png") for f in files)
    (saved_run,) = tmp_path.glob("bench-*.json")
    compared = runner.invoke(app, ["bench", "compare", str(saved_run), str(saved_run), "--label",
                                   "x", "--label", "y"])  # fmt: skip
    assert compared.exit_code == 0, compared.output
    assert len(calls) == 1


# ---- compare ---------------------------------------------------------------------------------


def test_ratios_against_the_first_run_matched_by_load() -> None:
    a = run("a", [step(1, 100.0), step(4, 200.0)])
    b = run("b", [step(4, 100.0), step(1, 150.0), step(8, 400.0)])
    found = comparing.compare([a, b])
    rows = {(r.metric.key, r.load): r for r in found.rows}
    assert rows["ttft_ms_p50", 1].values == (150.0, 225.0)
    assert rows["ttft_ms_p50", 1].ratios == (1.5,)
    assert rows["ttft_ms_p50", 4].ratios == (0.5,)
    assert rows["ttft_ms_p50", 8].values == (None, 600.0) and rows["ttft_ms_p50", 8].ratios == (
        None,
    )
    assert "goodput" not in {m.key for m in found.metrics}
    assert comparing.ratio(3.0, 0.0) is None and comparing.ratio(1.0, 3.0) == 0.333
    data = found.as_dict()
    assert data["baseline"] == "a" and data["load"] == "concurrency"
    (row,) = [r for r in data["rows"] if r["metric"] == TTFT_P50.key and r["concurrency"] == 4]
    assert row == {"metric": "ttft_ms_p50", "concurrency": 4, "values": {"a": 300.0, "b": 150.0},
                   "ratios": {"b": 0.5}}  # fmt: skip


def test_the_first_gap_is_compared_and_missing_from_a_run_saved_before_it() -> None:
    older = step(1, 100.0)
    del older["first_gap_ms"]
    found = comparing.compare([run("old", [older]), run("new", [step(1, 50.0)])])
    (row,) = found.of(FIRST_GAP_P50)
    assert row.values == (None, 7.5) and row.ratios == (None,)  # gaps of 5 and 10 ms


def test_compare_cli_table_json_and_report(tmp_path: Path) -> None:
    a = saved(tmp_path, "nixl.json", [step(1, 100.0, slo=True), step(4, 200.0, slo=True)])
    b = saved(tmp_path, "lmcache.json", [step(1, 50.0, slo=True), step(4, 300.0, slo=True)])
    text = runner.invoke(app, ["bench", "compare", str(a), str(b)])
    assert text.exit_code == 0, text.output
    assert "lmcache/nixl" in text.stdout and "0.500" in text.stdout and "1.500" in text.stdout
    assert "goodput" in text.stdout
    out = tmp_path / "out"
    done = runner.invoke(app, ["bench", "compare", str(a), str(b), "--label", "A", "--label",
                               "B", "--report", str(out), "-o", "json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert [r["label"] for r in data["runs"]] == ["A", "B"]
    assert data["runs"][0]["file"] == str(a)
    assert [m["name"] for m in data["metrics"]][-1] == "goodput"
    assert {"metric", "concurrency", "values", "ratios"} == set(data["rows"][0])
    rows = list(csv.DictReader((out / comparing.CSV).open()))
    assert list(rows[0]) == ["metric", "concurrency", "A", "B", "B/A"]
    assert rows[0] == {"metric": "ttft_ms_p50", "concurrency": "1", "A": "150.0", "B": "75.0",
                       "B/A": "0.5"}  # fmt: skip
    ttft = out / "plot-ttft.png"
    assert str(ttft) in data["files"] and is_matplotlib_png(ttft)
    assert (out / "plot-goodput.png").exists() and not (out / "plot-requests.png").exists()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ("[1, 2]", "expected the JSON object"),
        ('{"steps": []}', "no steps"),
        ('{"steps": [{"concurrency": "8"}]}', "steps[0].concurrency"),
        (json.dumps(result([{**step(1, 1.0), "ttft_ms": 3}])), "steps[0].ttft_ms"),
        (json.dumps(result([{**step(1, 1.0), "rate": -1}])), "steps[0].rate"),
    ],
)
def test_a_bad_file_is_named_and_exits_1(tmp_path: Path, content: str | None, says: str) -> None:
    good = saved(tmp_path, "good.json", [step(1, 1.0)])
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    done = runner.invoke(app, ["bench", "compare", str(good), str(bad)])
    assert done.exit_code == 1, done.output
    assert f"error: {bad}:" in done.stderr and says in done.stderr
    assert "Traceback" not in done.output


def test_labels_one_per_file_and_distinct(tmp_path: Path) -> None:
    one = saved(tmp_path, "run.json", [step(1, 1.0)])
    (tmp_path / "again").mkdir()
    two = saved(tmp_path / "again", "run.json", [step(1, 1.0)])
    with pytest.raises(UsageError, match="share the label run"):
        read_all([one, two])
    assert [r.label for r in read_all([one, two], ["x", "y"])] == ["x", "y"]
    done = runner.invoke(app, ["bench", "compare", str(one), str(two), "--label", "x"])
    assert done.exit_code == 2 and "1 labels for 2 files" in done.stderr


# ---- plan --pareto --plot ------------------------------------------------------------------


def test_pareto_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    png = tmp_path / "front.png"
    args = ["plan", "-m", "llama-3.1-8b", "--gpus", "4", "--pareto", "--plot", str(png)]
    done = runner.invoke(app, [*args, "-o", "json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["pareto_plot"] == str(png) and is_matplotlib_png(png)
    without = [a for a in args if a != "--pareto"]
    assert runner.invoke(app, without).exit_code == 2
    monkeypatch.setattr(plotting, "available", lambda: False)
    missing = runner.invoke(app, [*args[:-1], str(tmp_path / "other.png")])
    assert missing.exit_code == 3 and "pip install '.[plot]'" in missing.stderr
    assert not (tmp_path / "other.png").exists()


def test_pareto_plot_points_and_the_plan_marked() -> None:
    from pdctl.plan import frontier_plot
    from pdctl.plan.frontier import Point
    from pdctl.plan.layout import PlannedPool

    def pd(prefill: tuple[int, int], decode: tuple[int, int]) -> tuple[PlannedPool, ...]:
        return (
            PlannedPool("prefill", prefill[1], 1, prefill[0]),
            PlannedPool("decode", decode[1], 1, decode[0]),
        )

    finite = Point("pd", pd((1, 1), (1, 1)), 2, 900.0, 120.0, 9.0, (True,))
    unbounded = Point("pd", pd((1, 1), (2, 1)), 3, 1000.0, float("inf"), 8.0, (False,))
    picked = Point("pd", pd((1, 2), (1, 2)), 4, 700.0, 80.0, 7.0, (True,))
    assert frontier_plot.coordinates([finite, unbounded], "ttft_ms") == [(120.0, 900.0, finite)]
    assert len(frontier_plot.coordinates([finite, unbounded], "itl_ms")) == 2
    figure = frontier_plot.draw([finite, unbounded], picked)
    ttft_panel, itl_panel = figure.axes[:2]
    # points, the star, then the legend's three entries (drawn empty) on the first panel
    assert len(ttft_panel.collections) == 1 + 1 + 3 and len(itl_panel.collections) == 2 + 1
    labels = ttft_panel.get_legend_handles_labels()[1]
    assert labels[-1] == "the plan: P 1xTP2 · D 1xTP2"


@pytest.mark.parametrize(
    "args", [["--help"], ["bench", "--help"], ["bench", "compare", "--help"], ["plan", "--help"]]
)
def test_help_does_not_import_matplotlib(args: list[str]) -> None:
    code = (
        "import sys\nfrom pdctl.cli.app import app\n"
        f"try:\n    app({args!r})\nexcept SystemExit:\n    pass\n"
        "print('LOADED', 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED False" in out.stdout, out.stdout[-500:]


def test_the_charts_name_the_model_the_layout_and_the_engines() -> None:
    """The PNGs say what was measured, not only the run's file name (a timestamp)."""
    data = {
        **result([step(1, 10.0), step(4, 20.0)]),
        "layout": "1 prefill + 1 decode",
        "served_by": "the pd-stack simulator (not vLLM)",
    }
    older = result([step(1, 12.0)])  # a file written before bench recorded the layout
    first, *_ = plots.charts([Run("bench-20261203-1200", data), run("bench-old", [step(1, 12.0)])])
    assert first.serving.splitlines() == [
        "bench-20261203-1200: m · 1 prefill + 1 decode · the pd-stack simulator (not vLLM)",
        "bench-old: m · layout not recorded · engines not recorded",
    ]
    assert older["model"] == "m"


def test_runs_of_one_deployment_name_it_once() -> None:
    data = {**result([step(1, 10.0)]), "layout": "2 engines", "served_by": "vLLM"}
    first, *_ = plots.charts([Run("a", data), Run("b", data)])
    assert first.serving == "m · 2 engines · vLLM"
