"""pdctl init: plan a PD deployment and write it as a values file (checked before it is written)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from pdctl import defaults
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import NamespaceOpt, OutputOpt, ReleaseOpt
from pdctl.cli._output import OutputFormat
from pdctl.cli._plan_options import (
    CalibrateAtOpt,
    CalibrateOpt,
    CalibrateTpOpt,
    ConcurrencyOpt,
    ConnectorOpt,
    GpusOpt,
    GpusPerNodeOpt,
    GpuTypeOpt,
    InputLenOpt,
    ItlOpt,
    KvCacheDtype,
    KvDtypeOpt,
    MaxModelLenOpt,
    Mode,
    ModelConfigOpt,
    ModelOpt,
    ModeOpt,
    NetworkOpt,
    OfflineOpt,
    OutputLenOpt,
    PlanArgs,
    RateOpt,
    TargetRateOpt,
    TtftOpt,
    UtilizationOpt,
    WeightDtypeOpt,
    build_plan,
)
from pdctl.errors import UsageError

STDOUT = "-"


def _node_selector(pairs: list[str]) -> dict[str, str]:
    selector = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--node-selector {pair!r}: expected KEY=VALUE")
        selector[key] = value
    return selector


# Options that change no byte of the file: left out of the command that writes it again.
_NOT_IN_FILE = frozenset({"output"})


def _command(ctx: typer.Context, always: dict[str, Any]) -> str:
    """The command line that writes the file again: every option given on the command line, as
    given (click's parameter sources say which), and `always` (mode and the targets in force, so
    that a later change of their defaults cannot change the file). The source is compared by
    its name: its enum lives in click before typer 0.26 and inside typer after."""
    words = ["pdctl", "init"]
    for param in ctx.command.params:
        name = param.name or ""
        if name in always:
            value = always[name]
        elif name in _NOT_IN_FILE or (
            getattr(ctx.get_parameter_source(name), "name", None) != "COMMANDLINE"
        ):
            continue
        else:
            value = ctx.params[name]
        flag = max(param.opts, key=len)  # the long form
        if isinstance(value, bool):
            words += [flag] if value else list(param.secondary_opts[:1])
        elif isinstance(value, (list, tuple)):
            for item in value:
                words += [flag, str(item)]
        elif isinstance(value, float):
            words += [flag, f"{value:.15g}"]  # 100, not 100.0: as a person writes it
        elif value is not None:
            words += [flag, str(getattr(value, "value", value))]
    return shlex.join(words)


def _target(value: float | None) -> str:
    """A target in force as its option's value (none: removed)."""
    return "none" if value is None else f"{value:g}"


@handle_errors
def init(
    ctx: typer.Context,
    model: ModelOpt,
    gpus: GpusOpt,
    gpu_type: GpuTypeOpt = defaults.GPU_TYPE,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Values file to write (default: <model>-values.yaml here); - for stdout.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    gpus_per_node: GpusPerNodeOpt = defaults.GPUS_PER_NODE,
    input_len: InputLenOpt = defaults.PLAN_INPUT_LEN,
    output_len: OutputLenOpt = defaults.PLAN_OUTPUT_LEN,
    concurrency: ConcurrencyOpt = defaults.PLAN_CONCURRENCY,
    rate: RateOpt = None,
    ttft: TtftOpt = None,
    itl: ItlOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_cache_dtype: KvDtypeOpt = KvCacheDtype.auto,
    gpu_memory_utilization: UtilizationOpt = defaults.GPU_MEMORY_UTILIZATION,
    model_config: ModelConfigOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    offline: OfflineOpt = False,
    connector: ConnectorOpt = defaults.CONNECTOR,
    router: Annotated[
        str | None,
        typer.Option(
            "--router",
            help="PD router; the planner writes vllm-router values (production-stack: not yet).",
        ),
    ] = None,
    network_gbps: NetworkOpt = None,
    target_rate: TargetRateOpt = None,
    calibrate: CalibrateOpt = None,
    calibrate_at: CalibrateAtOpt = None,
    calibrate_tp: CalibrateTpOpt = 1,
    mode: ModeOpt = Mode.auto,
    node_selector: Annotated[
        list[str] | None,
        typer.Option(
            "--node-selector",
            help="KEY=VALUE node label for both pools (repeatable), e.g. "
            "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3.",
        ),
    ] = None,
    hf_token_secret: Annotated[
        str, typer.Option("--hf-token-secret", help="Secret holding the Hugging Face token.")
    ] = defaults.HF_TOKEN_SECRET,
    hf_token_key: Annotated[str, typer.Option("--hf-token-key", help="Key in that Secret.")] = (
        defaults.HF_TOKEN_KEY
    ),
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Plan a deployment and write it as a values file, each number commented.

    The layout is plan's choice (--mode auto: PD or aggregated, whichever the objective picks
    within the TTFT and ITL targets, defaults 2000 and 200 ms); the file's header records the
    mode and the targets, so its command line reproduces it.
    """
    args = PlanArgs.from_parameters(locals())
    from pdctl.plan import emit, report  # lazy: start-up
    from pdctl.plan.emit import InitOptions, default_filename, write  # lazy: start-up

    selector = _node_selector(node_selector or [])
    plan, wired = build_plan(args, output, router)
    target = None if out == STDOUT else Path(out or default_filename(plan.request.arch.name))
    workload = plan.request.workload
    command = _command(
        ctx, {"mode": mode, "ttft": _target(workload.ttft_ms), "itl": _target(workload.itl_ms)}
    )
    options = InitOptions(
        wiring=wired,
        release=release,
        namespace=namespace,
        node_selector=selector,
        secret_name=hf_token_secret,
        secret_key=hf_token_key,
        command=command,
    )
    written = write(plan, options, target, force=force)
    for finding in written.warnings:
        for line in finding.lines():
            _output.info(line)
    if output is OutputFormat.json:
        payload: dict[str, Any] = {
            "file": str(target) if target else None,
            "plan": report.plan_dict(plan),
            "warnings": [finding.as_dict() for finding in written.warnings],
        }
        if target is None:
            payload["values"] = written.text
        _output.as_json(payload)
        return
    if target is None:
        _output.data(written.text)
    choice = plan.choice
    assert choice is not None  # sizing.plan sets it
    _output.info(
        f"wrote {target or 'stdout'}: {choice.describe()} on {choice.gpus} of {plan.request.gpus} "
        f"{plan.request.gpu.name} (--mode {choice.asked}) at {report.assumed_load(plan)}; "
        f"max-model-len {emit.max_model_len(plan)}"
    )
    for reason in choice.why:
        _output.info(f"  - {reason}")
    said: list[tuple[str, str | None]] = [
        ("where the choice flips", report.flip_line(plan)),
        ("fewest GPUs meeting the targets", report.gpus_line(plan)),
    ]
    for title, said_line in said:
        if said_line:
            _output.info(f"{title}: {said_line}")
    if choice.cost:
        _output.info(f"cost: {choice.cost}")
    for warning in plan.warnings:
        _output.info(f"warning: {warning}")
    if target is not None:
        _output.info(f"next: pdctl validate {target} && pdctl template -f {target} --summary")
