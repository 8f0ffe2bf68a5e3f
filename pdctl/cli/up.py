"""pdctl up and pdctl down: a release as processes on this machine (pdctl.local)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import ChartOpt, FilesArg, HelmOpt, ReleaseOpt, SetOpt, ValuesOpt

if TYPE_CHECKING:
    from pdctl.local.lifecycle import Source, Started


class Engine(str, Enum):
    auto = "auto"
    vllm = "vllm"
    sim = "sim"


def _source(
    files: list[Path] | None,
    values: list[Path] | None,
    set_values: list[str] | None,
    helm: str | None,
    chart: Path | None,
) -> Source:
    """A folder given alone is a rendered release; anything else is values files."""
    from pdctl.cli._options import values_files  # lazy: start-up
    from pdctl.errors import UsageError  # lazy: start-up
    from pdctl.local.lifecycle import Source  # lazy: start-up

    given = [*(files or []), *(values or [])]
    if any(path.is_dir() for path in given):
        if len(given) > 1 or set_values:
            raise UsageError(
                "a rendered folder is run as it is: name it alone, without other files or --set"
            )
        return Source(rendered=given[0])
    return Source(values_files(files, values), set_values or [], None, helm, chart)


def _print_plan(started: Started) -> None:
    """Before anything starts: every command up runs and every env variable it adds."""
    from pdctl.local.layout import described  # lazy: start-up

    _output.info("pdctl up runs these commands, with this env added to yours:")
    for proc in started.layout.processes:
        shown = described(proc)
        _output.info(f"  {shown['name']}: {shown['command']}")
        for name, value in {**shown["env"], **started.added_env}.items():
            _output.info(f"    {name}={value}")


def _print_started(started: Started) -> None:
    plan = started.layout
    _output.data(f"local release {plan.release} (pdctl up) is up; engines: {started.why}")
    for proc in plan.engines:
        _output.data(f"  {proc.role:<8} {proc.name:<40} {proc.url}")
    if plan.router is not None:
        _output.data(f"  {'router':<8} {plan.router_by:<40} {plan.router.url}")
    _output.info("changed from the render (running as processes, not pods):")
    for change in plan.changes:
        _output.info(f"  - {change}")
    for warning in started.warnings:
        _output.info(warning)
    _output.info(f"logs: {started.folder.logs}")
    _output.info(
        f"next: pdctl verify --release {plan.release}, pdctl bench --release {plan.release}; "
        f"stop with pdctl down --release {plan.release}"
    )


@handle_errors
def up(
    files: FilesArg = None,
    values: ValuesOpt = None,
    set_values: SetOpt = None,
    release: ReleaseOpt = defaults.RELEASE,
    engine: Annotated[
        Engine,
        typer.Option(
            "--engine",
            help="The engines: vllm (needs vLLM and a GPU), sim (the pd-stack simulator, not "
            "vLLM), or auto: vllm where both are present, else sim.",
        ),
    ] = Engine.auto,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            max=limits.SECONDS_MAX,
            help="Seconds for every process to be ready.",
        ),
    ] = defaults.UP_TIMEOUT_S,
    hf_token_file: Annotated[
        Path | None,
        typer.Option(
            "--hf-token-file",
            help="File holding a Hugging Face token for gated weights (default: $HF_TOKEN).",
        ),
    ] = None,
    foreground: Annotated[
        bool,
        typer.Option(
            "--foreground",
            help="Stay in the foreground and stream the processes' logs; Ctrl-C stops them.",
        ),
    ] = False,
    gpu_type: Annotated[
        str,
        typer.Option(
            "--gpu-type",
            help="The catalog GPU the simulator times its steps for (--engine sim): the one the "
            "values were planned for; `pdctl catalog gpus` lists them.",
        ),
    ] = defaults.GPU_TYPE,
    allow_env: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-env",
            metavar="NAME",
            help="Pass env NAME from the values or render although the chart does not render it "
            "(PYTHONPATH, LD_PRELOAD, PATH, ... change what runs). Repeatable.",
        ),
    ] = None,
    allow_command: Annotated[
        bool,
        typer.Option(
            "--allow-command",
            help="Run a rendered command other than the chart's (vllm serve, vllm-router).",
        ),
    ] = False,
    allow_code_flag: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-code-flag",
            metavar="NAME",
            help="Pass a vLLM flag that loads code (middleware, tool-parser-plugin, "
            "worker-extension-cls, kv_connector_module_path, ...; docs/security.md lists them). "
            "Repeatable.",
        ),
    ] = None,
    chart: ChartOpt = None,
    helm: HelmOpt = None,
) -> None:
    """Run the release on this machine: its router and engines as processes, on loopback.

    FILE is a values file (rendered through helm) or a folder `pdctl template --output-dir`
    wrote (no helm needed): it is code that runs here. up runs only the chart's commands (vLLM's
    or the simulator's serve, vllm-router) with the env the chart renders, prints every command
    and the env it adds before starting them, and refuses anything else unless --allow-env,
    --allow-command or --allow-code-flag allows it. A router that no package index has
    (production-stack's: roundrobin, session, disaggregated_prefill; LMCache's PD proxy) is
    played by pd-stack's router stand-in, named as such. Every process listens on 127.0.0.1
    whatever the arguments say. Returns once every process is ready, leaving a supervisor that
    `pdctl down` stops; verify, bench and status then talk to this local release."""
    from pdctl.local import consent, lifecycle  # lazy: start-up

    options = lifecycle.UpOptions(
        release=release,
        engine=None if engine is Engine.auto else engine.value,
        timeout=timeout,
        hf_token_file=hf_token_file,
        foreground=foreground,
        gpu_type=gpu_type,
        allowed=consent.Consent(
            frozenset(allow_env or ()),
            allow_command,
            frozenset(consent.code_flag(name) for name in allow_code_flag or ()),
        ),
    )
    source = _source(files, values, set_values, helm, chart)
    code = lifecycle.up(source, options, _output.info, _print_started, _print_plan)
    if code:
        raise typer.Exit(code)


@handle_errors
def down(release: ReleaseOpt = defaults.RELEASE) -> None:
    """Stop the local release `pdctl up` started: every process; their logs are kept."""
    from pdctl.local import lifecycle  # lazy: start-up

    stopped = lifecycle.down(release)
    if stopped.was_up:
        _output.info(f"stopped the local release {release}; logs kept in {stopped.logs}")
    else:
        _output.info(
            f"the local release {release} was not running (its last run: {stopped.last}); "
            f"logs of that run: {stopped.logs}"
        )
