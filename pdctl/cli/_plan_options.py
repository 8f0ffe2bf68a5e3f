"""The options `pdctl plan` and `pdctl init` share (Annotated aliases), and PlanArgs: the plan they
ask for, built from the command's parameters by name (PlanArgs.from_parameters)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._options import count
from pdctl.cli._output import OutputFormat

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
    gpu_memory_utilization: float
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

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> PlanArgs:
        """The plan a command asks for: its parameters of PlanArgs' field names (a command's
        `locals()` before it assigns any; the other parameters are left out)."""
        return cls(**{field.name: parameters[field.name] for field in fields(cls)})

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
            utilization=self.gpu_memory_utilization,
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
