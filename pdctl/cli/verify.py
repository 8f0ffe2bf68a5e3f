"""pdctl verify: parse the options, run the checks (pdctl.verify), print the verdicts."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import (
    ApiKeyFileOpt,
    ClusterOpt,
    DecodeUrlOpt,
    EnginePortOpt,
    EngineUrlOpt,
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
    from pdctl.verify.checks import Report

_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "warn": "WARN"}


def _ms(stat: dict[str, float] | None) -> str:
    if not stat:
        return "n/a"
    return ", ".join(f"{k} {stat[k]:.1f}" for k in ("mean", "p50", "p90", "p99")) + " ms"


def _print_text(report: Report, show_curl: bool) -> None:
    connector = report.connector or "unknown"
    if report.connector_source == "detected":
        connector += " (detected from the engines' metrics)"
    router = report.router.url or report.router.name
    if report.router.name not in (router, "router"):
        router += f" ({report.router.name})"  # what plays it: vllm-router, or the stand-in
    _output.data(f"router {router} · model {report.model or '?'} · connector {connector}")
    forwards = [e.forward for e in (report.router, *report.targets.engines) if e.forward]
    if show_curl and forwards:
        _output.data("# the URLs below are port-forwards; to repeat by hand, first run:")
        for command in forwards:
            _output.data(f"#   {command} &")
    previous: list[str] = []
    for check in report.checks:
        _output.data(f"{_MARK[check.status.value]}  {check.id:<15} {check.summary}")
        for line in check.details:
            _output.data(f"      {line}")
        if show_curl and check.curl and check.curl != previous:
            for command in check.curl:
                _output.data(f"      $ {command}")
        previous = check.curl or previous
    latency = report.latency
    if latency and latency.get("succeeded"):
        _output.data(
            f"latency over {latency['succeeded']} streaming request(s), measured by pdctl:\n"
            f"  TTFT {_ms(latency['ttft_ms'])}\n"
            f"  ITL  {_ms(latency['itl_ms'])} (per {latency['itl_basis']})\n"
            f"  TPOT {_ms(latency['tpot_ms'])} (server token counts)\n"
            f"  e2e  {_ms(latency['e2e_ms'])}"
        )
    counts = report.counts()
    verdict = "passed" if report.passed else "FAILED"
    if report.aggregated:
        pd = "aggregated release (every engine prefills and decodes): no KV transfer to prove"
    else:
        pd = "PD proven" if report.pd_proven else "PD not proven"
    _output.info(
        f"verify {verdict}: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['skip']} skipped, {counts['warn']} warned; {pd}"
    )


@handle_errors
def verify(
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    url: RouterUrlOpt = None,
    prefill_url: PrefillUrlOpt = None,
    decode_url: DecodeUrlOpt = None,
    engine_url: EngineUrlOpt = None,
    model: ModelOpt = None,
    connector: Annotated[
        str | None,
        typer.Option(
            "--connector",
            help="KV connector whose metrics to check (default: detect from the engines).",
        ),
    ] = None,
    requests: Annotated[
        int,
        typer.Option("--requests", min=1, max=1000, help="Streaming requests to time."),
    ] = defaults.VERIFY_REQUESTS,
    max_tokens: Annotated[
        int,
        typer.Option(
            "--max-tokens",
            min=2,
            max=limits.TOKENS_MAX,
            help="Output tokens per streaming request.",
        ),
    ] = defaults.VERIFY_MAX_TOKENS,
    prompt_words: Annotated[
        int,
        typer.Option(
            "--prompt-words",
            min=32,
            max=limits.TOKENS_MAX,
            help="Words in the PD proof's unique prompt.",
        ),
    ] = defaults.VERIFY_PROMPT_WORDS,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            max=limits.SECONDS_MAX,
            help="Seconds each request may take, from sending to its last byte (engines are "
            "probed at once).",
        ),
    ] = defaults.VERIFY_TIMEOUT_S,
    settle: Annotated[
        float,
        typer.Option(
            "--settle",
            min=0.0,
            max=limits.SECONDS_MAX,
            help="Seconds to wait for the engines' counters to show the PD probe (at least "
            "one period and a margin for a connector that updates its metrics on a timer, as "
            "LMCache does).",
        ),
    ] = defaults.VERIFY_SETTLE_S,
    min_kv_gbps: Annotated[
        float | None,
        typer.Option(
            "--min-kv-gbps",
            min=0.0,
            max=limits.NETWORK_GBPS_MAX,
            help="KV bandwidth (GB/s) below which pd-kv-bandwidth warns (default: a quarter of "
            "the slowest RDMA link, helm/files/links.yaml).",
        ),
    ] = None,
    router_port: RouterPortOpt = defaults.PORT,
    engine_port: EnginePortOpt = defaults.PORT,
    api_key_file: ApiKeyFileOpt = None,
    cluster: ClusterOpt = False,
    show_curl: Annotated[
        bool, typer.Option("--show-curl", help="Print the curl command of each check.")
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Smoke-test a deployment and prove PD from the engines' counters (exit 1 if a check fails).

    An aggregated release (engines of role both: found by the pods' role label, or given with
    --engine-url) gets health, models, completion and streaming checks; the PD checks are
    skipped, as there is no KV transfer to prove."""
    from pdctl.verify.checks import Settings, run  # lazy: start-up

    settings = Settings(
        model=model,
        connector=connector,
        requests=requests,
        max_tokens=max_tokens,
        prompt_words=prompt_words,
        timeout=timeout,
        settle=settle,
        min_kv_gbps=min_kv_gbps,
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
        engine_url,
        cluster,
    ) as found:
        report = run(found.targets, dataclasses.replace(settings, api_key=found.api_key))
    if output is OutputFormat.json:
        _output.as_json(report.as_dict())
    else:
        _print_text(report, show_curl)
    if not report.passed:
        raise typer.Exit(1)
