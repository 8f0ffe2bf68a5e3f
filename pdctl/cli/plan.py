"""pdctl plan: size a PD deployment from a model and a GPU count, and print why.

The options shared with `pdctl init` are defined here (PlanArgs); the library is pdctl.plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl import defaults, limits
from pdctl.cli import _output, _plan_view
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import OutputOpt, count
from pdctl.cli._output import OutputFormat
from pdctl.cli._plan_view import ms
from pdctl.errors import UsageError

if TYPE_CHECKING:
    from pdctl.models.config import ModelArch
    from pdctl.plan.emit import Wiring
    from pdctl.plan.layout import Plan, Request


class KvCacheDtype(str, Enum):
    auto = "auto"
    fp8 = "fp8"


ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="Hugging Face model id or a catalog alias (e.g. meta-llama/Llama-3.1-8B-Instruct, "
        "llama-3.1-8b).",
        show_default=False,
    ),
]
GpusOpt = Annotated[
    int, count("--gpus", limits.GPUS_MAX, "GPUs available in total.", show_default=False)
]
GpuTypeOpt = Annotated[
    str,
    typer.Option(
        "--gpu-type",
        help="GPU from the catalog: A10G, L4, L40S, A100-40GB, A100-80GB, H100-80GB, "
        "H100-80GB-PCIE, H200, B200, MI300X (case-insensitive; aliases such as h100 work).",
    ),
]
GpusPerNodeOpt = Annotated[
    int,
    count(
        "--gpus-per-node",
        limits.GPUS_PER_NODE_MAX,
        "GPUs in one node: the most one engine (pod) can use.",
    ),
]
InputLenOpt = Annotated[int, count("--input-len", limits.TOKENS_MAX, "Prompt tokens per request.")]
OutputLenOpt = Annotated[
    int, count("--output-len", limits.TOKENS_MAX, "Generated tokens per request.")
]
ConcurrencyOpt = Annotated[
    int, count("--concurrency", limits.CONCURRENCY_MAX, "Requests in flight across the deployment.")
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate",
        min=0.0,
        max=limits.RATE_MAX,
        help="Requests per second to sustain: a target, and the load (open arrivals) at which "
        "TTFT and ITL are estimated (default: a closed loop of --concurrency).",
    ),
]
TtftOpt = Annotated[
    str | None,
    typer.Option(
        "--ttft",
        help="Mean time-to-first-token target, ms, at the load; none removes it. Default "
        f"{defaults.TTFT_MS:g} (MLPerf Inference's Llama-2-70B server target; docs/sizing.md).",
        show_default=False,
    ),
]
ItlOpt = Annotated[
    str | None,
    typer.Option(
        "--itl",
        help="Mean inter-token latency target, ms, at the load; none removes it. Default "
        f"{defaults.ITL_MS:g} (MLPerf's TPOT target for the same scenario).",
        show_default=False,
    ),
]


class Mode(str, Enum):
    auto = "auto"
    pd = "pd"
    aggregated = "aggregated"


ModeOpt = Annotated[
    Mode,
    typer.Option(
        "--mode",
        help="auto: PD or aggregated, whichever the objective picks (within the targets, the most "
        "output tokens/s per GPU; docs/sizing.md); pd or aggregated: that mode, with what it costs "
        "against auto's pick.",
    ),
]
MaxModelLenOpt = Annotated[
    int | None,
    typer.Option(
        "--max-model-len",
        min=1,
        max=limits.TOKENS_MAX,
        help="vLLM --max-model-len (default: the model's context, cut to what the KV pool holds).",
    ),
]
KvDtypeOpt = Annotated[
    KvCacheDtype, typer.Option("--kv-cache-dtype", help="KV cache dtype (fp8 halves it).")
]
UtilizationOpt = Annotated[
    float,
    typer.Option(
        "--gpu-memory-utilization",
        min=0.05,
        max=1.0,
        help="vLLM --gpu-memory-utilization: the share of GPU memory vLLM may use.",
    ),
]
ModelConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-config",
        help="A Hugging Face config.json (or a folder with one) to size from instead of the "
        "catalog.",
    ),
]


class WeightDtype(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"
    int4 = "int4"


WeightDtypeOpt = Annotated[
    WeightDtype | None,
    typer.Option(
        "--weight-dtype",
        help="The weights' dtype where the checkpoint declares no quantization (config.json's "
        "quantization_config, hf_quant_config.json); default: its torch_dtype.",
        show_default=False,
    ),
]
OfflineOpt = Annotated[
    bool,
    typer.Option(
        "--offline", help="Never read config.json from the Hugging Face hub (catalog only)."
    ),
]
ConnectorOpt = Annotated[
    str, typer.Option("--connector", help="KV connector (helm/files/connectors.yaml).")
]
NetworkOpt = Annotated[
    float | None,
    typer.Option(
        "--network-gbps",
        min=0.001,
        max=limits.NETWORK_GBPS_MAX,
        help="KV transfer bandwidth per GPU in GB/s (default: the GPU catalog's RDMA NIC figure).",
    ),
]

CalibrateOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibrate",
        help="A `pdctl bench -o json` result from your own deployment: fit the prefill time, "
        "decode step and KV link to its lowest --concurrency step (docs/sizing.md).",
    ),
]
CalibrateAtOpt = Annotated[
    int | None,
    count("--calibrate-at", limits.CONCURRENCY_MAX, "With --calibrate: the step's concurrency."),
]
CalibrateTpOpt = Annotated[
    int,
    count(
        "--calibrate-tp",
        limits.GPUS_PER_NODE_MAX,
        "With --calibrate: the TP of the engines benched.",
    ),
]

TargetRateOpt = Annotated[
    float | None,
    typer.Option(
        "--target-rate",
        min=0.0,
        max=limits.RATE_MAX,
        help="Plan the fewest GPUs (up to --gpus) whose choice sustains this many requests/s "
        "and meets the TTFT and ITL targets in force there (as --rate, which it replaces).",
    ),
]
ParetoOpt = Annotated[
    bool,
    typer.Option(
        "--pareto",
        help="Also list the PD and aggregated layouts on the frontier of output tokens/s per GPU "
        "against TTFT and ITL, the choice marked.",
    ),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="With --pareto: also draw the frontier into this PNG (tokens/s per GPU against TTFT "
        "and ITL, the plan's layout marked; needs matplotlib: pip install '.[plot]' in a pd-stack "
        "checkout).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class PlanArgs:
    model: str
    gpus: int
    gpu_type: str
    gpus_per_node: int
    input_len: int
    output_len: int
    concurrency: int
    rate: float | None
    ttft: str | None
    itl: str | None
    max_model_len: int | None
    kv_cache_dtype: KvCacheDtype
    utilization: float
    model_config: Path | None
    offline: bool
    connector: str
    network_gbps: float | None
    target_rate: float | None = None
    calibrate: Path | None = None
    calibrate_at: int | None = None
    calibrate_tp: int = 1
    mode: Mode = Mode.auto
    weight_dtype: WeightDtype | None = None

    def calibration(self, arch: ModelArch) -> tuple[Callable[[Request], Request] | None, list[str]]:
        """With --calibrate: the function that fits the request to the bench file, and the
        warning when the bench ran another model than `arch`."""
        if self.calibrate is None:
            return None, []
        from pdctl.bench import runs  # lazy: start-up
        from pdctl.plan import calibrate  # lazy: start-up

        path = self.calibrate
        data = runs.read(path, schema=runs.CALIBRATION).data
        warning = calibrate.mismatch(data, arch, str(path))

        def fitted(request: Request) -> Request:
            found = calibrate.fit(data, request, self.calibrate_tp, str(path), self.calibrate_at)
            return found.apply(request)

        return fitted, [warning] if warning else []

    def build(self, router: str | None = None, fallback: bool = False) -> tuple[Plan, Wiring]:
        from pdctl.plan import Workload, make_plan, resolve_model  # lazy: start-up
        from pdctl.plan.emit import wiring  # lazy: start-up
        from pdctl.plan.objective import targets  # lazy: start-up

        ttft_ms, itl_ms, defaults = targets(self.ttft, self.itl)
        wired = wiring(self.connector, router)
        stated = self.weight_dtype.value if self.weight_dtype else None
        arch = resolve_model(self.model, self.model_config, self.offline, stated)
        calibrate, warnings = self.calibration(arch)
        workload = Workload(
            input_len=self.input_len,
            output_len=self.output_len,
            concurrency=self.concurrency,
            rate=self.rate,
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            defaults=defaults,
        )
        plan = make_plan(
            arch,
            self.gpu_type,
            self.gpus,
            workload,
            gpus_per_node=self.gpus_per_node,
            utilization=self.utilization,
            kv_cache_dtype=self.kv_cache_dtype.value,
            max_model_len=self.max_model_len,
            hetero_tp=wired.hetero_tp,
            one_pair=wired.one_pair,
            network_gbps=self.network_gbps,
            fallback=fallback,
            target_rate=self.target_rate,
            calibrate=calibrate,
            mode=self.mode.value,
        )
        plan.warnings[:0] = warnings
        return plan, wired


def build_plan(
    args: PlanArgs, output: OutputFormat, router: str | None = None, fallback: bool = False
) -> tuple[Plan, Wiring]:
    """args.build(); under -o json a refusal is JSON on stdout too (why, and what would fit).
    `fallback`: too few GPUs for PD plan aggregated serving beside the smallest PD layout."""
    from pdctl.plan.layout import DoesNotFit  # lazy: start-up

    try:
        return args.build(router, fallback)
    except DoesNotFit as refused:
        if output is OutputFormat.json:
            _output.as_json(refused.as_dict())
        raise


def print_plan(plan: Plan) -> None:
    """The plan for people: a table per role, the estimates, the verdict (rich, on stdout)."""
    from rich.table import Table

    from pdctl.plan.report import plan_dict  # lazy: start-up

    data = plan_dict(plan)
    console = _output.Screen()
    model, gpu, request = data["model"], data["gpu"], data["request"]
    active = f", {model['active_params_billion']}B active" if model["moe"] else ""
    declared = f"; weights' dtype from {model['quantization']}" if model["quantization"] else ""
    console.line(
        f"{model['name']}: {model['params_billion']}B parameters{active}, "
        f"{model['weight_dtype'].upper()}, {model['weights_gib']} GiB of weights "
        f"(from {model['source']}{declared})"
    )
    console.line(
        f"KV cache: {data['kv_bytes_per_token']:,} bytes per token in all layers (BF16), "
        f"{data['kv_bytes_per_token_fp8']:,} in FP8; planned in {_kv_planned(data)}; "
        f"{model['attention'].upper()} attention"
        + (f", sliding window {model['sliding_window']}" if model["sliding_window"] else "")
    )
    _print_choice(console, plan, data)
    if data["objective"]["target_rate"] is not None:
        title = (
            f"Fewest GPUs meeting the targets at --target-rate "
            f"{data['objective']['target_rate']:g}/s: {data['gpus_used']} x {gpu['name']}"
        )
    elif data["pd_within_gpus"]:
        title = (
            f"{'PD layout' if data['choice']['mode'] == 'pd' else 'Best PD layout (not chosen)'} "
            f"on {request['gpus']} x {gpu['name']}: {data['gpus_used']} GPUs used"
        )
    else:
        title = (
            f"Smallest PD layout: {data['gpus_used']} x {gpu['name']} (more than the "
            f"{request['gpus']} given)"
        )
    table = Table()
    table.add_column("", overflow="fold")
    table.add_column("prefill", justify="right", overflow="fold")
    table.add_column("decode", justify="right", overflow="fold")
    roles = [data["roles"]["prefill"], data["roles"]["decode"]]
    workload_len = request["input_len"] + request["output_len"]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("TP x replicas = GPUs", lambda r: f"{r['tp']} x {r['replicas']} = {r['gpus']}"),
        ("weights per GPU", lambda r: f"{r['weights_gib_per_gpu']} GiB"),
        ("KV pool per GPU", lambda r: f"{r['kv_pool_gib_per_gpu']} GiB"),
        ("KV tokens per engine", lambda r: f"{r['kv_tokens_per_gpu']:,}"),
        (
            f"requests of {data['max_model_len']} tokens",
            lambda r: str(r["max_seqs_at_max_model_len"]),
        ),
        (f"requests of {workload_len} tokens", lambda r: str(r["max_seqs_at_workload"])),
        ("pod CPU / memory", lambda r: f"{r['pod']['cpu']} / {r['pod']['memory_gib']}Gi"),
        ("cache volume / shm", lambda r: f"{r['pod']['cache_gib']}Gi / {r['pod']['shm_gib']}Gi"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in roles))
    console.table(table, heading=f"{title}, max-model-len {data['max_model_len']}")
    e = data["estimates"]
    console.line(
        f"Estimates ({e['basis']}; docs/sizing.md), prompts {request['input_len']} and "
        f"answers {request['output_len']} tokens:"
    )
    for note in (data["assumptions"]["calibration"] or {}).get("notes", []):
        console.line(f"  calibration: {note}")
    console.line(
        f"  prefill: {e['prefill_ms']} ms per prompt, {e['prefill_tokens_per_s']:,.0f} tokens/s "
        f"per engine"
    )
    held = e["decode_step_sequences"]
    most = f" (the most it holds; --concurrency is {request['concurrency']})"
    console.line(
        f"  decode: {e['decode_step_ms']} ms per step at {held} sequences on one engine"
        f"{most if held < request['concurrency'] else ''}; in this layout "
        f"{e['decode_batch_per_engine']} per engine, ITL {e['itl_ms']} ms"
    )
    console.line(
        f"  KV transfer: {e['kv_transfer_ms']} ms per request "
        f"({e['kv_transfer_mb_per_gpu']} MB per decode GPU at {e['kv_transfer_link_gbps']} GB/s)"
    )
    load = (
        f"--rate {request['rate']:g}/s"
        if request["rate"] is not None
        else f"--concurrency {request['concurrency']} (a closed loop)"
    )
    console.line(
        f"  TTFT about {ms(e['ttft_ms'])} at {load}: {e['ttft_unqueued_ms']} ms unqueued "
        f"(prefill, transfer, first step) + {ms(e['ttft_queue_ms'])} queueing, prefill engines "
        f"{e['prefill_utilization']:.0%} busy"
    )
    console.line(
        f"  throughput: about {e['requests_per_s']} requests/s, "
        f"{e['output_tokens_per_s']:,.0f} output tokens/s, {e['output_tokens_per_s_per_gpu']:,.1f} "
        f"per GPU ({e['bottleneck']}-bound)"
    )
    _plan_view.print_aggregated(console, data)
    _print_objective(console, data)
    if data["choice"]["rules_of_thumb_agree"]:
        verdict = {"likely": "is likely to help", "unlikely": "is unlikely to help"}
        console.line(
            f"Rules of thumb (the workload's shape alone; they agree with the estimates): PD "
            f"{verdict[plan.verdict]}:"
        )
        for reason in plan.reasons:
            console.line(f"  - {reason}")
    choice = data["choice"]
    console.line(f"Why {'PD' if choice['mode'] == 'pd' else 'aggregated'}:")
    for reason in choice["why"]:
        console.line(f"  - {reason}")
    if choice["cost"]:
        console.line(f"cost: {choice['cost']}", style="yellow")
    for warning in plan.warnings:
        console.line(f"warning: {warning}", style="yellow")
    for warning in plan.pd_warnings:
        console.line(f"the PD layout (not chosen): {warning}")
    for note in plan.notes:
        console.line(f"note: {note}")


def _kv_planned(data: dict[str, Any]) -> str:
    planned = "FP8" if data["request"]["kv_cache_dtype"] == "fp8" else "BF16"
    if data["model"]["kv_cache_dtype_auto"] and data["request"]["kv_cache_dtype_asked"] == "auto":
        return f"{planned} (what vLLM's --kv-cache-dtype auto picks for this checkpoint)"
    return f"{planned} (--kv-cache-dtype {data['request']['kv_cache_dtype_asked']})"


def targets(data: dict[str, Any]) -> str:
    """The targets in force with their sources and whether the choice meets them."""
    objective = data["objective"]
    found = []
    for key, flag, title, unit in (
        ("ttft_ms", "ttft", "TTFT", " ms"),
        ("itl_ms", "itl", "ITL", " ms"),
        ("rate", "rate", "rate", "/s"),
    ):
        value, met = objective["slo"][key], objective["met"][flag]
        if value is not None:
            where = objective["source"][key]
            found.append(f"{title} {value:g}{unit} ({where}) {'met' if met else 'NOT met'}")
    return "; ".join(found) if found else "none (--ttft none --itl none)"


def _print_choice(console: _output.Screen, plan: Plan, data: dict[str, Any]) -> None:
    from pdctl.plan import report  # lazy: start-up

    choice, request = data["choice"], data["request"]
    pools = " + ".join(
        f"{r['replicas']} x TP{r['tp']}" + (f" x PP{r['pp']}" if r["pp"] > 1 else "") + f" {role}"
        for role, r in choice["roles"].items()
    )
    mode = "PD" if choice["mode"] == "pd" else "aggregated"
    console.line(
        f"Choice (--mode {choice['asked']}) at {report.assumed_load(plan)}: {mode}, {pools} = "
        f"{choice['gpus']} of {request['gpus']} x {data['gpu']['name']}; targets: {targets(data)}"
    )
    flips = report.flip_line(plan)
    if flips:
        console.line(f"Where the choice flips: {flips}")
    fewest = report.gpus_line(plan)
    if fewest:
        console.line(f"Fewest GPUs meeting the targets: {fewest}")


def _print_objective(console: _output.Screen, data: dict[str, Any]) -> None:
    console.line(
        "Objective: within the targets, the most output tokens/s per GPU given (within 1% a tie, "
        f"broken by TTFT, then ITL); targets: {targets(data)}"
    )


@handle_errors
def plan(
    model: ModelOpt,
    gpus: GpusOpt,
    gpu_type: GpuTypeOpt = defaults.GPU_TYPE,
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
    network_gbps: NetworkOpt = None,
    target_rate: TargetRateOpt = None,
    calibrate: CalibrateOpt = None,
    calibrate_at: CalibrateAtOpt = None,
    calibrate_tp: CalibrateTpOpt = 1,
    mode: ModeOpt = Mode.auto,
    pareto: ParetoOpt = False,
    plot: PlotOpt = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Size a deployment: PD or aggregated, TP and replicas per pool, memory, KV and estimates.

    PD and aggregated serving are both sized on the GPUs given; the choice is the objective's:
    within the TTFT and ITL targets (defaults 2000 and 200 ms; --ttft/--itl change them, none
    removes one) and --rate, the most output tokens/s per GPU, within 1% a tie broken by TTFT,
    then ITL. --rate sets the load the latencies are estimated at (default: a closed loop of
    --concurrency); --target-rate plans the fewest GPUs meeting the targets at that rate.
    """
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
        mode,
        weight_dtype,
    )
    from pdctl.plan.frontier import Point, with_pick  # lazy: start-up
    from pdctl.plan.frontier import pareto as frontier  # lazy: start-up
    from pdctl.plan.report import plan_dict  # lazy: start-up

    if plot is not None and not pareto:
        raise UsageError("--plot draws the Pareto frontier: give --pareto too")
    result, _ = build_plan(args, output, fallback=True)
    points = frontier(result.request) if pareto else None
    front = None if points is None else with_pick(points, result)
    drawn = None
    if points is not None and plot is not None:
        from pdctl.plan import frontier_plot  # lazy: start-up

        title = f"{model} on up to {gpus} x {result.request.gpu.name}: the Pareto frontier"
        drawn = frontier_plot.write(points, Point.chosen(result), plot, title)
    if output is OutputFormat.json:
        data = plan_dict(result)
        if front is not None:
            data["pareto"] = front
        if drawn is not None:
            data["pareto_plot"] = str(drawn)
        _output.as_json(data)
    else:
        print_plan(result)
        if front is not None:
            _plan_view.print_pareto(front)
        if drawn is not None:
            _output.info(f"wrote {drawn}")
