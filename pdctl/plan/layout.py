"""The shapes of a plan: the workload and request it answers, the engines and roles it lays out,
its estimates, and the refusal when nothing fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdctl import defaults
from pdctl.errors import InputError
from pdctl.models import links
from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import GiB, KvLayout, Memory
from pdctl.plan.step import Chunk, EngineStep

if TYPE_CHECKING:
    from pdctl.plan.sensitivity import Flip


@dataclass(frozen=True)
class Workload:
    input_len: int = defaults.PLAN_INPUT_LEN
    output_len: int = defaults.PLAN_OUTPUT_LEN
    concurrency: int = defaults.PLAN_CONCURRENCY
    rate: float | None = None  # requests per second to sustain
    ttft_ms: float | None = None
    itl_ms: float | None = None
    defaults: frozenset[str] = frozenset()  # the targets ("ttft", "itl") in force by default
    rate_flag: str = "--rate"  # the option that set `rate` (--target-rate sets it too)

    @property
    def total_len(self) -> int:
        return self.input_len + self.output_len

    @property
    def mean_context(self) -> int:
        return self.input_len + self.output_len // 2


@dataclass(frozen=True)
class Request:
    arch: ModelArch
    gpu: Gpu
    gpus: int
    workload: Workload = field(default_factory=Workload)
    gpus_per_node: int = defaults.GPUS_PER_NODE
    utilization: float = defaults.GPU_MEMORY_UTILIZATION
    kv_cache_dtype: str = "auto"  # what the KV cache is sized in: --kv-cache-dtype, auto resolved
    kv_cache_dtype_asked: str = "auto"  # --kv-cache-dtype as given
    max_model_len: int | None = None
    hetero_tp: bool = True  # the connector allows prefill and decode TP to differ
    one_pair: bool = False  # the connector pairs one prefill pod with one decode pod
    hybrid_kv: bool = True  # sliding-window layers keep only their window (hybrid KV manager)
    network_gbps: float | None = None  # KV transfer bandwidth per GPU; default the GPU's NIC
    # Multipliers on the roofline's prefill time and decode step, from `plan --calibrate` (a bench
    # run on the user's own hardware, pdctl.plan.calibrate); 1.0: the estimate as it is.
    prefill_scale: float = 1.0
    decode_scale: float = 1.0
    calibration: tuple[str, ...] = ()  # what the calibration changed, in words (for the report)
    calibrated_to: str | None = None  # the bench run and step fitted to ("B.json at concurrency 1")
    mode: str = "auto"  # --mode: auto (what serves the workload better) | pd | aggregated

    def engine_step(self, tp: int, layout: KvLayout | None = None) -> EngineStep:
        """The step costs of one engine of `tp` GPUs (pdctl.plan.step), calibrated."""
        return EngineStep(
            self.arch,
            self.gpu,
            tp,
            layout=layout,
            prefill_scale=self.prefill_scale,
            decode_scale=self.decode_scale,
        )

    def prefill_s(self, tp: int, tokens: int, batch: int = 1) -> float:
        """Seconds to prefill `batch` prompts of `tokens` on one engine of `tp` GPUs."""
        return self.engine_step(tp).cost(prefill_chunks=[Chunk(tokens)] * batch).seconds

    def decode_step_s(self, tp: int, batch: int, context: int, layout: KvLayout) -> float:
        """Seconds of one decode step of `batch` sequences of mean `context`."""
        return self.engine_step(tp, layout).decode_step_s(batch, context)

    @property
    def link_gbps(self) -> float:
        """The KV transfer bandwidth the estimate assumes: --network-gbps, else the link table's
        figure for the GPU's usual network."""
        return self.network_gbps or self.gpu.network_gbps

    @property
    def link_description(self) -> str:
        if self.network_gbps:
            return f"{self.network_gbps:g} GB/s per GPU (--network-gbps or --calibrate)"
        link = links.load().by_id(self.gpu.network)
        return (
            f"{link.gbps:g} GB/s per GPU, {link.name} (the usual {self.gpu.name} network; "
            "without the network keys UCX falls back to TCP, often much slower)"
        )


@dataclass(frozen=True)
class Engine:
    """One TP size's sizing (an engine = one pod here: TP x PP GPUs, PP 1)."""

    tp: int
    memory: Memory
    layout: KvLayout

    @property
    def pool_bytes(self) -> float:
        return max(self.memory.kv_pool, 0.0) * GiB

    def fits(self, tokens: int) -> bool:
        return self.memory.kv_pool > 0 and self.layout.fits(self.pool_bytes, tokens)


@dataclass(frozen=True)
class RolePlan:
    role: str
    engine: Engine
    replicas: int

    @property
    def gpus(self) -> int:
        return self.engine.tp * self.replicas


@dataclass(frozen=True)
class Estimates:
    prefill_ms: float
    prefill_tokens_per_s: float
    decode_step_ms: float  # one decode engine at decode_step_sequences
    decode_step_sequences: int  # --concurrency, or fewer: what one engine holds (max-num-seqs, KV)
    decode_tokens_per_s: float  # the same engine's output tokens per second
    decode_batch: int  # sequences per decode engine in the layout
    itl_ms: float  # decode step at decode_batch
    kv_transfer_ms: float
    kv_transfer_mb: float
    ttft_ms: float  # with the queueing at the load (math.inf when the queue grows without bound)
    prefill_requests_per_s: float  # one prefill engine
    decode_requests_per_s: float  # one decode engine at decode_batch
    requests_per_s: float  # the layout, rate-matched
    output_tokens_per_s: float
    bottleneck: str
    concurrency_fits: bool  # one decode engine holds --concurrency sequences
    ttft_unqueued_ms: float = 0.0  # prefill + transfer + first step, nothing ahead in a queue
    ttft_queue_ms: float = 0.0  # the mean wait the load adds (pdctl.plan.queueing)
    prefill_utilization: float = 0.0  # busy share of the prefill engines at the load
    load_requests_per_s: float = 0.0  # throughput at the load: --rate, or at --concurrency
    gpus: int = 0  # GPUs the layout uses

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus if self.gpus else 0.0


@dataclass(frozen=True)
class AggregatedEstimates:
    """The same GPUs as plain engines (each prefills and decodes its own requests, no KV
    transfer), pdctl.plan.sizing.aggregated."""

    engine: Engine
    replicas: int
    prefill_ms: float  # one prompt; it stalls the engine's decoding for about that long
    decode_step_ms: float  # one step at `batch` sequences, prefill aside
    batch: int  # sequences per engine
    itl_ms: float  # --rate: the mean gap (steps stretched by the prefill share); else the median
    itl_stall_ms: float  # a step that carries one chunk of a prompt (the tail of ITL)
    prefill_share: float  # of an engine's time at the load
    ttft_ms: float  # with queueing at the load (math.inf when unbounded)
    ttft_unqueued_ms: float
    ttft_queue_ms: float
    requests_per_s: float  # what the engines sustain
    load_requests_per_s: float
    output_tokens_per_s: float
    meets: tuple[bool, ...]  # --ttft, --itl, --rate (True where not asked)
    context: int  # the longest request one engine holds

    @property
    def gpus(self) -> int:
        return self.engine.tp * self.replicas

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus


@dataclass(frozen=True)
class PlannedPool:
    """One pool of the chosen layout as the chart runs it: prefill, decode, or (aggregated) engine
    (each engine prefills and decodes); an engine spanning nodes is TP per node x PP nodes."""

    role: str
    tp: int
    pp: int
    replicas: int

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    def describe(self) -> str:
        """ "2 x TP8 x PP2 prefill", "4 x TP1 engine"."""
        pp = f" x PP{self.pp}" if self.pp > 1 else ""
        return f"{self.replicas} x TP{self.tp}{pp} {self.role}"


@dataclass(frozen=True)
class Choice:
    """The one layout plan and init stand behind (docs/sizing.md "The objective")."""

    mode: str  # pd | aggregated
    asked: str  # --mode: auto | pd | aggregated
    pools: tuple[PlannedPool, ...]
    meets: tuple[bool, ...]  # --ttft, --itl, --rate (True where no such target is in force)
    why: tuple[str, ...]  # the comparison with the other mode, in words
    cost: str | None = None  # a forced --mode: what it costs against the mode auto would pick

    @property
    def gpus(self) -> int:
        return sum(pool.gpus for pool in self.pools)

    def describe(self) -> str:
        mode = "PD" if self.mode == "pd" else "aggregated"
        return f"{mode}, " + " + ".join(pool.describe() for pool in self.pools)


@dataclass
class Plan:
    request: Request
    prefill: RolePlan
    decode: RolePlan
    max_model_len: int
    estimates: Estimates
    verdict: str
    reasons: list[str]
    warnings: list[str]  # the choice's (what init writes into the file)
    notes: list[str] = field(default_factory=list)  # what the layout needs (engines over nodes)
    pd_warnings: list[str] = field(default_factory=list)  # the PD layout's, when not chosen
    meets: tuple[bool, ...] = (True, True, True)  # --ttft, --itl, --rate (True where not asked)
    aggregated: AggregatedEstimates | None = None  # the same GPUs without PD, when it fits
    better: str = "pd"  # pd | aggregated: the choice's mode
    why: list[str] = field(default_factory=list)  # the comparison's reasons
    choice: Choice | None = None  # what plan and init stand behind (sizing.plan sets it)
    target_rate: float | None = None  # --target-rate: these are the fewest GPUs meeting it
    flip: Flip | None = None  # where the other mode wins (pdctl.plan.sensitivity)
    gpus_to_meet: int | None = None  # the choice misses the targets: the fewest GPUs that meet

    @property
    def gpus_used(self) -> int:
        return self.prefill.gpus + self.decode.gpus

    @property
    def aggregated_max_model_len(self) -> int | None:
        """The aggregated engine's --max-model-len: the model's context, cut to what it holds."""
        a = self.aggregated
        if a is None:
            return None
        return self.request.max_model_len or min(self.request.arch.max_positions, a.context)

    @property
    def pd_within_gpus(self) -> bool:
        """False when the PD layout is the smallest alternative, larger than --gpus."""
        return self.gpus_used <= self.request.gpus


class DoesNotFit(InputError):
    """The request cannot be laid out; details say why in numbers and what would fit:
    `needs_gpus` (the smallest PD layout on this GPU type, when one exists) and `fits_on` (other
    GPU types where the smallest layout fits within the GPUs asked for, fewest GPUs first)."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        details: list[str] | None = None,
        needs_gpus: int | None = None,
        fits_on: list[dict[str, Any]] | None = None,
    ):
        super().__init__(message, hint, details)
        self.needs_gpus = needs_gpus
        self.fits_on = fits_on or []

    def as_dict(self) -> dict[str, Any]:
        return {
            "fits": False,
            "error": self.message,
            "hint": self.hint,
            "details": self.details,
            "needs_gpus": self.needs_gpus,
            "fits_on": self.fits_on,
        }
