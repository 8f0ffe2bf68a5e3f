"""pdctl bench: parse the options, run the load sweep (pdctl.bench), print a table per step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import (
    ApiKeyFileOpt,
    ClusterOpt,
    DecodeUrlOpt,
    EnginePortOpt,
    ModelOpt,
    NamespaceOpt,
    OutputOpt,
    PrefillUrlOpt,
    ReleaseOpt,
    RouterPortOpt,
    RouterUrlOpt,
)
from pdctl.cli._output import OutputFormat
from pdctl.cli._targets import resolve_targets

if TYPE_CHECKING:
    from rich.table import Table

    from pdctl.bench.run import Result


def _ms(stat: dict[str, float] | None, key: str) -> str:
    return "-" if not stat else f"{stat[key]:.1f}"


def _progress(
    index: int, steps: int, step: dict[str, Any] | None, concurrency: int | None, rate: float | None
) -> None:
    """A line on stderr as each step starts and ends (the table comes at the end)."""
    load = _load({"concurrency": concurrency, "rate": rate})
    if step is None:
        _output.info(f"[{index}/{steps}] {load}: sending ...")
        return
    ttft, itl = step["ttft_ms"] or {}, step["itl_ms"] or {}
    _output.info(
        f"[{index}/{steps}] {load}: {step['succeeded']} ok, {step['errors']} failed in "
        f"{step['duration_s']:.1f} s; TTFT p50 {ttft.get('p50', 0):.0f} ms, "
        f"ITL p50 {itl.get('p50', 0):.1f} ms"
    )


def _load(step: dict[str, Any]) -> str:
    """A step's load: `8 in flight` (closed loop) or `2.5 req/s` (open loop)."""
    if step["rate"] is not None:
        return f"{step['rate']:g} req/s"
    return f"{step['concurrency']} in flight"


_LATENCIES = (
    ("TTFT", "ttft_ms"),
    ("ITL", "itl_ms"),
    ("1st gap", "first_gap_ms"),
    ("TPOT", "tpot_ms"),
    ("e2e", "e2e_ms"),
)
_PERCENTILES = ("p50", "p90", "p99")


def _table(columns: list[str], rows: list[list[str]]) -> Table:
    from rich.table import Table  # lazy: start-up

    table = Table()
    for column in columns:
        # a figure folds onto a second line rather than lose its digits to an ellipsis
        table.add_column(column, justify="right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _throughput(result: Result) -> tuple[list[str], list[list[str]]]:
    """A step per row: load, counts, throughput, goodput and the SLO, KV bandwidth."""
    slo = result.workload.slo
    columns = ["load", "ok/err", "req/s", "out tok/s"]
    columns += ["goodput", "SLO", "KV GB/s"] if slo else ["KV GB/s"]
    rows = []
    for s in result.steps:
        cells = [_load(s), f"{s['succeeded']}/{s['errors']}"]
        cells += [f"{s['request_throughput']:.2f}", f"{s['output_token_throughput']:.1f}"]
        if slo:
            cells += [f"{s['goodput']:.2f}/s", "met" if s["slo_met"] else "MISSED"]
        gbps = [r["kv_gbps"] for r in s["engines"].values() if "kv_gbps" in r]
        rows.append([*cells, ", ".join(f"{g:.2f}" for g in gbps) or "-"])
    return columns, rows


def _print_table(result: Result) -> None:
    """A row per step when it fits the width; else the throughput table, then the latencies a
    figure per cell, a row per step and metric (at 80 columns the wide table's cells would be
    cut)."""
    w = result.workload
    per = f"{w.requests} requests" if w.requests is not None else f"{w.duration:g} s"
    sent = f"dataset {w.dataset_name}" if w.dataset else f"{w.input_len} words in"
    if w.prefix_share:
        sent += f" ({w.prefix_share:.0%} shared prefix)"
    serving = f"connector {result.connector or 'unknown'}"
    if result.aggregated:
        serving = "aggregated serving: each engine prefills and decodes, no KV transfer"
    heading = (
        f"{result.router} · {result.model} · {serving} · "
        f"{sent}, {w.output_len} tokens out, {per} per step"
    )
    columns, rows = _throughput(result)
    latency_columns = [f"{name} p50/p90/p99 ms" for name, _ in _LATENCIES]
    latencies = [
        ["/".join(_ms(s[key], p) for p in _PERCENTILES) for _, key in _LATENCIES]
        for s in result.steps
    ]
    screen = _output.Screen()
    wide = _table(columns + latency_columns, [a + b for a, b in zip(rows, latencies, strict=True)])
    if screen.fits(wide):
        screen.table(wide, heading)
        return
    screen.table(_table(columns, rows), heading)
    long = [
        [_load(s), name, *(_ms(s[key], p) for p in _PERCENTILES)]
        for s in result.steps
        for name, key in _LATENCIES
    ]
    screen.table(_table(["load", "latency, ms", *_PERCENTILES], long))


def _print_text(result: Result) -> None:
    _print_table(result)
    for s in result.steps:
        for sample in s["error_samples"]:
            _output.info(f"{_load(s)}: {sample}")
        if s["held_arrivals"]:
            _output.info(f"{_load(s)}: {s['held_arrivals']} arrivals waited for --max-in-flight")
        if s["dataset_wrapped"]:
            _output.info(f"{_load(s)}: the dataset ran out and started again")
        for role, counted in s["engines"].items():
            sources = counted.get("prompt_tokens_by_source")
            by = ", ".join(f"{k} {v:.0f}" for k, v in (sources or {}).items())
            tokens = counted["prompt_tokens"]
            _output.info(
                f"{_load(s)} {role}: prompt tokens {tokens:.0f}"
                + (f" ({by})" if by else "")
                + (f", KV {counted['kv_bytes'] / 1e6:.1f} MB" if "kv_bytes" in counted else "")
            )
    for problem in result.problems:
        _output.info(f"engine metrics not read: {problem}")


def _spread(given: float | None, dataset: bool) -> float:
    if given is not None:
        return given
    return 0.0 if dataset else defaults.BENCH_OUTPUT_SPREAD


@handle_errors
def bench(
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    url: RouterUrlOpt = None,
    prefill_url: PrefillUrlOpt = None,
    decode_url: DecodeUrlOpt = None,
    model: ModelOpt = None,
    input_len: Annotated[
        int,
        typer.Option(
            "--input-len", min=1, max=limits.TOKENS_MAX, help="Words per prompt (random words)."
        ),
    ] = defaults.BENCH_INPUT_LEN,
    output_len: Annotated[
        int,
        typer.Option(
            "--output-len", min=1, max=limits.TOKENS_MAX, help="Output tokens per request."
        ),
    ] = defaults.BENCH_OUTPUT_LEN,
    output_spread: Annotated[
        float | None,
        typer.Option(
            "--output-spread",
            min=0.0,
            max=0.9,
            help="Draw each output length within this share of --output-len, so that a closed "
            "loop's clients fall out of step, as plan's estimates assume (0: all equal, and the "
            f"requests end and restart together; docs/sizing.md). Default "
            f"{defaults.BENCH_OUTPUT_SPREAD:g}; with --dataset its lines say.",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        str,
        typer.Option("--concurrency", help="Requests in flight, one step each: e.g. 1,4,16."),
    ] = str(defaults.BENCH_CONCURRENCY),
    rate: Annotated[
        str | None,
        typer.Option(
            "--rate",
            help="Open loop instead: Poisson arrivals per second, one step each: e.g. 0.5,2,8.",
        ),
    ] = None,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight",
            min=1,
            max=limits.CONCURRENCY_MAX,
            help="With --rate: arrivals wait past this many.",
        ),
    ] = defaults.BENCH_MAX_IN_FLIGHT,
    prefix_share: Annotated[
        float,
        typer.Option(
            "--prefix-share",
            min=0.0,
            max=0.99,
            help="Share of each prompt that is the same for a step's requests (prefix caching).",
        ),
    ] = 0.0,
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            help="Requests from a JSON Lines file (docs/cli.md), not random words.",
        ),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            min=1,
            max=limits.REQUESTS_MAX,
            help=f"Requests per step (default {defaults.BENCH_REQUESTS}).",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            min=0.1,
            max=limits.SECONDS_MAX,
            help="Seconds per step, instead of --requests.",
        ),
    ] = None,
    slo_ttft_ms: Annotated[
        float | None,
        typer.Option("--slo-ttft-ms", min=0.0, max=limits.MS_MAX, help="TTFT SLO for goodput."),
    ] = None,
    slo_itl_ms: Annotated[
        float | None,
        typer.Option(
            "--slo-itl-ms", min=0.0, max=limits.MS_MAX, help="Per-request mean ITL SLO for goodput."
        ),
    ] = None,
    slo_attainment: Annotated[
        float,
        typer.Option(
            "--slo-attainment",
            min=0.0,
            max=1.0,
            help="Share of a step's requests that must meet the SLOs for the step to attain them.",
        ),
    ] = defaults.SLO_ATTAINMENT,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            min=0,
            max=limits.SEED_MAX,
            help="Repeat the same prompts (default: fresh ones every run).",
        ),
    ] = None,
    connector: Annotated[
        str | None,
        typer.Option("--connector", help="KV connector whose metrics to read (default: detect)."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            max=limits.SECONDS_MAX,
            help="Seconds each request may take, from sending to its last byte.",
        ),
    ] = defaults.BENCH_TIMEOUT_S,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Save this run here (CSV, JSON) and plot every run saved here, one line each.",
        ),
    ] = None,
    router_port: RouterPortOpt = defaults.PORT,
    engine_port: EnginePortOpt = defaults.PORT,
    api_key_file: ApiKeyFileOpt = None,
    cluster: ClusterOpt = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Load-test the deployment through its router: latency, throughput, goodput per step.

    Exit 1 when no request succeeded, or when an SLO given here is missed at every load step."""
    from pdctl.bench import dataset as datasets  # lazy: start-up
    from pdctl.bench import report as files  # lazy: start-up
    from pdctl.bench.run import run  # lazy: start-up
    from pdctl.bench.workload import BenchSettings, parse_concurrency, parse_rate  # lazy: start-up

    workload = BenchSettings(
        input_len=input_len,
        output_len=output_len,
        output_spread=_spread(output_spread, dataset is not None),
        concurrency=parse_concurrency(concurrency),
        rate=None if rate is None else parse_rate(rate),
        max_in_flight=max_in_flight,
        prefix_share=prefix_share,
        dataset=None if dataset is None else datasets.load(dataset),
        dataset_name=None if dataset is None else str(dataset),
        requests=requests
        if requests is not None or duration is not None
        else defaults.BENCH_REQUESTS,
        duration=duration,
        model=model,
        timeout=timeout,
        seed=seed,
        slo_ttft_ms=slo_ttft_ms,
        slo_itl_ms=slo_itl_ms,
        slo_attainment=slo_attainment,
        connector=connector,
    )
    with resolve_targets(
        url,
        prefill_url or [],
        decode_url or [],
        release,
        namespace,
        router_port,
        engine_port,
        api_key_file,
        cluster=cluster,
    ) as found:
        if output is not OutputFormat.json:
            for warning in workload.warnings:
                _output.info(f"warning: {warning}")
        progress = None if output is OutputFormat.json else _progress
        result = run(found.targets, workload, progress, found.api_key)
    payload: dict[str, Any] = result.as_dict()
    payload["warnings"] = workload.warnings
    if report is not None:
        written = files.write(result, report)
        payload["files"] = [str(p) for p in written]
        if not files.plots_available():
            payload["plots"] = files.PLOTS_NEED
    if output is OutputFormat.json:
        _output.as_json(payload)
    else:
        _print_text(result)
        for path in payload.get("files", []):
            _output.info(f"wrote {path}")
        if "plots" in payload:
            _output.info(payload["plots"])
    failed = result.none_succeeded()
    if failed:
        _output.info(failed)
        raise typer.Exit(1)
    if result.slo_missed_everywhere:
        _output.info("the SLO was missed at every load step")
        raise typer.Exit(1)
