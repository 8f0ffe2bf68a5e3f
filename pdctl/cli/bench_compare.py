"""`pdctl bench` as a group: the load sweep (pdctl.cli.bench) runs when no sub-command is given,
so `pdctl bench --url X ...` works as before, and `pdctl bench compare A.json B.json` compares
saved runs (pdctl.bench.compare). This module only parses and prints."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import OutputOpt
from pdctl.cli._output import OutputFormat
from pdctl.cli.bench import bench

if TYPE_CHECKING:
    from pdctl.bench.compare import RunComparison


@handle_errors
def compare(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="JSON results of pdctl bench (-o json, or the bench-*.json of --report); the "
            "first is the baseline.",
            metavar="FILE...",
            show_default=False,
        ),
    ],
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="A name per file, in order (default: the file's stem)."),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Write compare.csv (the joined rows) and the plots, one line per run, here.",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Compare saved bench runs step by step at the same load, each against the first.

    Per metric (TTFT p50/p90/p99, ITL p50/p90, first gap p50, output tokens/s, requests/s,
    goodput when an SLO was given), each run's value and its ratio to the first file's (B/A: above
    1 is slower for a latency, faster for a throughput). Exit 1 when a file is missing or not a
    bench result."""
    from pdctl.bench import compare as comparing  # lazy: start-up
    from pdctl.bench.runs import read_all  # lazy: start-up

    found = comparing.compare(read_all(files, label))
    payload = found.as_dict()
    if report is not None:
        from pdctl import plotting  # lazy: start-up

        payload["files"] = [str(p) for p in comparing.write(found, report)]
        if not plotting.available():
            payload["plots"] = plotting.NEED
    if output is OutputFormat.json:
        _output.as_json(payload)
        return
    _print_text(found)
    for path in payload.get("files", []):
        _output.info(f"wrote {path}")
    if "plots" in payload:
        _output.info(payload["plots"])


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _print_text(found: RunComparison) -> None:
    from rich.table import Table  # lazy: start-up

    labels = found.labels
    columns = [found.axis, labels[0]]
    for other in labels[1:]:
        columns += [other, f"{other}/{labels[0]}"]
    screen = _output.Screen()
    for metric in found.metrics:
        table = Table()
        for column in columns:
            table.add_column(column, justify="right", overflow="fold")
        for row in found.of(metric):
            cells = [f"{row.load:g}", _cell(row.values[0])]
            for value, ratio in zip(row.values[1:], row.ratios, strict=True):
                cells += [_cell(value), "-" if ratio is None else f"{ratio:.3f}"]
            table.add_row(*cells)
        screen.table(table, f"{metric.title}, {metric.unit} ({metric.better} is better)")


def _sweep_unless_subcommand(ctx: typer.Context, **options: Any) -> None:
    if ctx.invoked_subcommand is None:
        bench(**options)


# The group's callback takes bench's own options (its signature, with typer's Context in front),
# so the sweep's options stay defined once, in pdctl/cli/bench.py.
_sweep_unless_subcommand.__doc__ = bench.__doc__
_OPTIONS = inspect.signature(bench, eval_str=True)
_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD  # as bench's own parameters
_CONTEXT = inspect.Parameter("ctx", _POSITIONAL, annotation=typer.Context)
_sweep_unless_subcommand.__signature__ = _OPTIONS.replace(  # type: ignore[attr-defined]
    parameters=[_CONTEXT, *_OPTIONS.parameters.values()]
)

bench_app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    subcommand_metavar="[compare FILES...]",
)
bench_app.callback(
    invoke_without_command=True,
    epilog=(
        "--report DIR writes bench-<time>.csv (a row per step) and bench-<time>.json (as -o json) "
        "per run, then plots every run saved in DIR against load, one line per run (p50 solid, "
        "p99 dashed): plot-ttft.png, plot-itl.png, plot-e2e.png, plot-goodput.png (when every "
        "run had an SLO; else plot-requests.png), plot-throughput.png, and plot-data.csv behind "
        "them. Each file is written whole; a symbolic link already in DIR under one of these "
        "names is replaced by the file, never written through. The PNGs need matplotlib: pip "
        "install '.[plot]' in a pd-stack checkout. "
        "pdctl bench compare A.json B.json ...: compare saved runs (its --help)."
    ),
)(_sweep_unless_subcommand)
bench_app.command(
    "compare",
    short_help=_output.short_help(compare.__doc__),
    epilog="-o json: baseline (the first label), load (concurrency, or rate when every step has "
    "one), runs (label, file, router, model, connector, workload, slo), metrics (name, title, "
    "unit, better), rows (metric, the load, values and ratios by label; null where a run has no "
    "step at that load), and with --report files (and plots when matplotlib is missing).",
)(compare)
