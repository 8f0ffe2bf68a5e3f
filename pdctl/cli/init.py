"""pdctl init: plan a PD deployment and write it as a values file (checked before it is written)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import NamespaceOpt, OutputOpt, ReleaseOpt
from pdctl.cli._output import OutputFormat
from pdctl.cli.plan import (
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
    ModelConfigOpt,
    ModelOpt,
    NetworkOpt,
    OfflineOpt,
    OutputLenOpt,
    PlanArgs,
    RateOpt,
    TargetRateOpt,
    TtftOpt,
    UtilizationOpt,
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


def _command(values: list[tuple[str, Any, Any]]) -> str:
    """The command line that regenerates the file (options that differ from their default)."""
    words = ["pdctl", "init"]
    for flag, value, default in values:
        if value == default or value is None:
            continue
        if isinstance(value, bool):
            words.append(flag)
        elif isinstance(value, list):
            for item in value:
                words += [flag, str(item)]
        else:
            words += [flag, str(getattr(value, "value", value))]
    return shlex.join(words)


@handle_errors
def init(
    model: ModelOpt,
    gpus: GpusOpt,
    gpu_type: GpuTypeOpt = "H100-80GB",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Values file to write (default: <model>-values.yaml here); - for stdout.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    gpus_per_node: GpusPerNodeOpt = 8,
    input_len: InputLenOpt = 4096,
    output_len: OutputLenOpt = 512,
    concurrency: ConcurrencyOpt = 64,
    rate: RateOpt = None,
    ttft: TtftOpt = None,
    itl: ItlOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_cache_dtype: KvDtypeOpt = KvCacheDtype.auto,
    gpu_memory_utilization: UtilizationOpt = 0.9,
    model_config: ModelConfigOpt = None,
    offline: OfflineOpt = False,
    connector: ConnectorOpt = "NixlConnector",
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
    ] = "hf-token",
    hf_token_key: Annotated[str, typer.Option("--hf-token-key", help="Key in that Secret.")] = (
        "token"
    ),
    release: ReleaseOpt = "pd",
    namespace: NamespaceOpt = "default",
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Plan a PD deployment and write it as a values file, each number commented."""
    from pdctl.plan.emit import InitOptions, default_filename, write  # lazy: start-up

    args = PlanArgs(
        model,
        gpus,
        gpu_type,
        gpus_per_node,
        input_len,
        output_len,
        concurrency,
        rate,
        ttft,
        itl,
        max_model_len,
        kv_cache_dtype,
        gpu_memory_utilization,
        model_config,
        offline,
        connector,
        network_gbps,
        target_rate,
        calibrate,
        calibrate_at,
        calibrate_tp,
    )
    selector = _node_selector(node_selector or [])
    plan, wired = build_plan(args, output, router)
    target = None if out == STDOUT else Path(out or default_filename(plan.request.arch.name))
    command = _command(
        [
            ("--model", model, None),
            ("--gpus", gpus, None),
            ("--gpu-type", gpu_type, None),
            ("--gpus-per-node", gpus_per_node, 8),
            ("--input-len", input_len, 4096),
            ("--output-len", output_len, 512),
            ("--concurrency", concurrency, 64),
            ("--rate", rate, None),
            ("--ttft", ttft, None),
            ("--itl", itl, None),
            ("--max-model-len", max_model_len, None),
            ("--kv-cache-dtype", kv_cache_dtype, KvCacheDtype.auto),
            ("--gpu-memory-utilization", gpu_memory_utilization, 0.9),
            ("--connector", connector, "NixlConnector"),
            ("--network-gbps", network_gbps, None),
            ("--target-rate", target_rate, None),
            ("--calibrate", calibrate, None),
            ("--calibrate-at", calibrate_at, None),
            ("--calibrate-tp", calibrate_tp, 1),
            ("--node-selector", node_selector or [], []),
            ("--release", release, "pd"),
            ("--namespace", namespace, "default"),
            ("--out", target.name if target else STDOUT, None),
        ]
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
    written = write(plan, options, target, force=force, mode="pd")
    for finding in written.warnings:
        for line in finding.lines():
            _output.info(line)
    from pdctl.plan.report import plan_dict  # lazy: start-up

    if output is OutputFormat.json:
        payload: dict[str, Any] = {
            "file": str(target) if target else None,
            "plan": plan_dict(plan),
            "warnings": [finding.as_dict() for finding in written.warnings],
        }
        if target is None:
            payload["values"] = written.text
        _output.as_json(payload)
        return
    if target is None:
        _output.data(written.text)
    p, d = plan.prefill, plan.decode
    verdict = {"likely": "likely to help", "may": "may help", "unlikely": "unlikely to help"}
    _output.info(
        f"wrote {target or 'stdout'}: {p.replicas} prefill x TP{p.engine.tp} + {d.replicas} "
        f"decode x TP{d.engine.tp} on {plan.gpus_used} of {plan.request.gpus} "
        f"{plan.request.gpu.name}; max-model-len {plan.max_model_len}; PD "
        f"{verdict[plan.verdict]}"
    )
    for warning in plan.warnings:
        _output.info(f"warning: {warning}")
    if target is not None:
        _output.info(f"next: pdctl validate {target} && pdctl template -f {target} --summary")
