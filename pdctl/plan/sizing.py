"""The planner's arithmetic: pure functions of a model, a GPU and a workload; no I/O.

docs/sizing.md writes the model down (formulas, efficiency factors and their sources, where it is
known to be off). In short:

- memory, per GPU, as vLLM's profiler does it (gpu_worker.determine_available_memory):
  KV pool = visible memory x utilization - weights/(TP x PP) - peak activation - non-torch;
- KV bytes per token: 2 x layers x KV heads x head_dim x dtype bytes (GQA; KV heads are
  replicated when TP exceeds them), layers x (kv_lora_rank + rope dim) x bytes (MLA, not split by
  TP), sliding-window layers hold at most their window;
- prefill is compute-bound (FLOPs over TP x peak x MFU, plus TP all-reduces over the GPU link),
  decode is bandwidth-bound (weights and KV read per step over HBM bandwidth x efficiency);
- prefill and decode engines are balanced by rate matching (aiconfigurator's picking.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from pdctl.errors import InputError
from pdctl.plan.catalog import Gpu
from pdctl.plan.model_config import ModelArch

GiB = 1024**3

# ---- efficiency factors and engine constants (docs/sizing.md: "Efficiency factors") ----------
# Share of dense peak tensor throughput a prefill reaches: the assumption of the reference's worked
# example (sizing-bench A6, "MFU 0.5"), not a measurement.
MFU = 0.5
# Share of peak HBM bandwidth decode reaches: aiconfigurator's mem_bw_empirical_scaling_factor
# (systems/*.yaml; sizing-bench A4, A7).
BANDWIDTH_EFFICIENCY = 0.8
# Rate matching derates of aiconfigurator's sdk/picking.py (sizing-bench A4):
# seq/s = min(prefill seq/s x 0.9, decode seq/s x 0.92).
PREFILL_MATCH = 0.9
DECODE_MATCH = 0.92
# Latency of one all-reduce: aiconfigurator's p2p_latency (systems/*.yaml, "10us").
ALLREDUCE_LATENCY_S = 10e-6
# vLLM's default --block-size on GPUs (KV is allocated in blocks of this many tokens).
BLOCK_SIZE = 16
# Peak activation memory in GiB by config.json model_type: llm-d-planner 0.3.3
# vllm_memory_constants.json, "calibrated against vLLM v0.19.0 on H100-80GB" (sizing-bench A2).
# DeepSeek-V3 runs vLLM's DeepseekV2 code, so it takes DeepseekV2's constant.
ACTIVATION_GIB = {
    "llama": 1.89,
    "qwen2": 2.25,
    "qwen3": 2.21,
    "mistral3": 2.10,
    "deepseek_v2": 1.93,
    "deepseek_v3": 1.93,
    "mixtral": 1.21,
    "phi3": 1.52,
    "qwen2_moe": 2.47,
    "qwen3_moe": 2.68,
    "gemma3": 3.94,
}
ACTIVATION_DENSE_GIB = 2.0  # the same file's fallbacks
ACTIVATION_MOE_GIB = 2.5
# Memory outside torch's allocator (CUDA context, NCCL buffers): the same source, 0.27 GiB at TP 1
# and 2.10 GiB at TP >= 2 (measured 0.25 / 2.07 / 2.13 GiB at TP 1 / 2 / 4).
NON_TORCH_TP1_GIB = 0.27
NON_TORCH_TP_GIB = 2.10
# Bytes per parameter of each weight dtype as served. FP32 checkpoints are served in 16 bits
# (vLLM --dtype auto). int4 carries one 16-bit scale per group of 128; MXFP4 is 4.25 bits.
_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.515625}
_MXFP4_BYTES = 4.25 / 8
_CHECKPOINT_BYTES = {**_BYTES, "fp32": 4.0}

# ---- pod sizing heuristics (docs/sizing.md: "Pods") -------------------------------------------
CPU_PER_WORKER = 2  # vLLM's Kubernetes guide requests 2 CPUs for a one-GPU pod
HOST_GIB_PER_WORKER = 4  # Python runtime, CUDA context, tokenizer per GPU worker (heuristic)
SHM_GIB_PER_WORKER = 2  # vLLM's Kubernetes guide mounts a 2Gi /dev/shm for a one-GPU pod
CACHE_HEADROOM = 1.1  # the cache volume: checkpoint x 1.1 + 2 GiB (tokenizer, config, revisions)
CACHE_EXTRA_GIB = 2
# The engine's startup budget (docs/sizing.md: "Startup budget"): the checkpoint downloaded at
# STARTUP_DOWNLOAD_MIB_S into an empty cache, plus STARTUP_BASE_S for the rest (reading the
# weights onto the GPUs, torch.compile, CUDA graph capture, the KV connector's start). Both are
# assumptions chosen to be generous, not measurements: a pod that needs longer is restarted by its
# startup probe and starts the download again.
STARTUP_DOWNLOAD_MIB_S = 100
STARTUP_BASE_S = 600


# ============================================================================ model arithmetic


@dataclass(frozen=True)
class Params:
    """Parameter counts by where they live (all layers summed)."""

    embedding: int
    lm_head: int  # 0 when tied to the embedding
    attention: int
    dense_mlp: int
    experts: int  # routed experts
    shared: int  # shared experts and routers
    norms: int
    extra: int  # layers in the checkpoint that serving does not load (MTP)
    active_experts: int  # routed expert parameters one token uses

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_mlp
            + self.experts
            + self.shared
            + self.norms
        )

    @property
    def active(self) -> int:
        return self.total - self.experts + self.active_experts

    @property
    def compute(self) -> int:
        """Parameters each token multiplies through, without the embedding lookup and the LM
        head (prefill computes logits for the last position only)."""
        return self.active - self.embedding - self.lm_head


def params(arch: ModelArch) -> Params:
    h, layers = arch.hidden_size, arch.layers
    embedding = arch.vocab_size * h
    lm_head = 0 if arch.tied_embeddings else embedding
    if arch.mla:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * arch.heads * qk
        else:
            q = h * arch.heads * qk
        kv = (
            h * (m.kv_lora_rank + m.qk_rope_head_dim)
            + m.kv_lora_rank
            + m.kv_lora_rank * arch.heads * (m.qk_nope_head_dim + m.v_head_dim)
        )
        attention_layer = q + kv + arch.heads * m.v_head_dim * h
    else:
        d = arch.head_dim
        attention_layer = 2 * h * arch.heads * d + 2 * h * arch.kv_heads * d
    norms = 2 * h * layers + h
    moe = arch.moe
    if moe:
        moe_layers = layers - moe.dense_layers
        dense_mlp = moe.dense_layers * 3 * h * arch.intermediate_size
        per_expert = 3 * h * moe.expert_intermediate_size
        experts = moe_layers * moe.experts * per_expert
        active_experts = moe_layers * moe.active_experts * per_expert
        shared = moe_layers * (
            moe.shared_experts * 3 * h * moe.shared_intermediate_size + h * moe.experts
        )
        layer_avg = attention_layer + (experts + shared) // max(moe_layers, 1)
    else:
        dense_mlp = layers * 3 * h * arch.intermediate_size
        experts = shared = active_experts = 0
        layer_avg = attention_layer + 3 * h * arch.intermediate_size
    # A multi-token-prediction layer ships with its own embedding and head copies and a 2h x h
    # projection (DeepSeek-V3's 685B on Hugging Face vs 671B served).
    extra = arch.extra_layers * (layer_avg + 2 * h * h + embedding + lm_head)
    return Params(
        embedding,
        lm_head,
        attention_layer * layers,
        dense_mlp,
        experts,
        shared,
        norms,
        extra,
        active_experts,
    )


def _linear_bytes(dtype: str) -> float:
    return _MXFP4_BYTES if dtype == "mxfp4" else _BYTES[dtype]


def weight_bytes(arch: ModelArch) -> float:
    """Bytes of weights vLLM loads (all GPUs of one engine together). Quantized checkpoints keep
    the embedding, LM head and norms in 16 bits; MXFP4 (gpt-oss) quantizes the experts only."""
    p = params(arch)
    dtype = arch.weight_dtype
    sixteen = 2 * (p.embedding + p.lm_head + p.norms)
    if dtype in ("bf16", "fp16", "fp32"):
        return float(2 * p.total)
    if dtype == "mxfp4":
        return sixteen + 2 * (p.attention + p.dense_mlp + p.shared) + _MXFP4_BYTES * p.experts
    return sixteen + _BYTES[dtype] * (p.attention + p.dense_mlp + p.shared + p.experts)


def checkpoint_bytes(arch: ModelArch) -> float:
    """Bytes the Hugging Face cache holds: the served weights (FP32 checkpoints at 4 bytes) and
    layers serving does not load."""
    p = params(arch)
    served = weight_bytes(arch)
    if arch.weight_dtype == "fp32":
        served *= 2
    per_param = _CHECKPOINT_BYTES.get(arch.weight_dtype, 1.0)
    return served + per_param * p.extra


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    return 1 if kv_cache_dtype.startswith("fp8") else 2


def kv_bytes_per_token(arch: ModelArch, kv_cache_dtype: str = "auto") -> int:
    """KV cache bytes of one token in all layers of the whole model (no sharding, no window)."""
    b = kv_dtype_bytes(kv_cache_dtype)
    if arch.mla:
        return arch.layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * b


@dataclass(frozen=True)
class KvLayout:
    """KV bytes per token on one GPU of an engine: full-attention layers grow with the context,
    sliding-window layers hold at most their window (vLLM's hybrid KV cache manager)."""

    full: int  # bytes per token of the full-attention layers on this GPU
    windowed: int  # bytes per token of the sliding-window layers on this GPU
    window: int  # tokens those layers keep

    @property
    def per_token(self) -> int:
        return self.full + self.windowed

    def sequence_bytes(self, tokens: int) -> int:
        """Bytes one sequence of `tokens` occupies, in whole blocks."""
        blocks = math.ceil(tokens / BLOCK_SIZE)
        kept = min(blocks, math.ceil(self.window / BLOCK_SIZE) + 1) if self.window else 0
        return (self.full * blocks + self.windowed * kept) * BLOCK_SIZE

    def tokens(self, pool_bytes: float) -> int:
        """Tokens a pool holds, as vLLM reports them (full-attention layers, whole blocks)."""
        per = self.full or self.windowed
        return int(pool_bytes // (per * BLOCK_SIZE)) * BLOCK_SIZE if per else 0

    def sequences(self, pool_bytes: float, tokens: int) -> int:
        """Sequences of `tokens` a pool holds at once (vLLM's 'maximum concurrency')."""
        return int(pool_bytes // self.sequence_bytes(tokens)) if tokens else 0

    def longest(self, pool_bytes: float) -> int:
        """The longest sequence one pool holds (whole blocks)."""
        if self.full == 0:  # every layer windowed: any length fits once the window does
            return 1 << 30 if self.sequence_bytes(self.window) <= pool_bytes else 0
        low, high = 0, int(pool_bytes // (self.full * BLOCK_SIZE) + 1) * BLOCK_SIZE
        while high - low > BLOCK_SIZE:
            middle = (low + high) // 2 // BLOCK_SIZE * BLOCK_SIZE
            low, high = (
                (middle, high) if self.sequence_bytes(middle) <= pool_bytes else (low, middle)
            )
        return low


def kv_heads_per_gpu(arch: ModelArch, tp: int) -> int:
    """KV heads one TP rank holds: its share, or one replicated head when TP exceeds them."""
    return max(1, arch.kv_heads // tp)


def kv_layout(
    arch: ModelArch, tp: int, pp: int = 1, kv_cache_dtype: str = "auto", hybrid: bool = True
) -> KvLayout:
    b = kv_dtype_bytes(kv_cache_dtype)
    if arch.mla:  # one latent per token and layer, held whole by every TP rank
        per_layer = (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
    else:
        per_layer = 2 * kv_heads_per_gpu(arch, tp) * arch.head_dim * b
    layers = math.ceil(arch.layers / pp)
    window = arch.sliding_window
    if window and hybrid:
        windowed_layers = math.ceil(window.layers * layers / arch.layers)
        return KvLayout(
            (layers - windowed_layers) * per_layer, windowed_layers * per_layer, window.window
        )
    return KvLayout(layers * per_layer, 0, 0)


def valid_tps(arch: ModelArch, limit: int) -> list[int]:
    """Tensor parallel sizes vLLM can shard this model into, up to `limit`: heads divide evenly,
    KV heads divide or are replicated, the MLP (or each expert) splits evenly."""
    found = []
    for tp in range(1, limit + 1):
        if arch.heads % tp:
            continue
        if not arch.mla and arch.kv_heads % tp and tp % arch.kv_heads:
            continue
        mlp = arch.moe.expert_intermediate_size if arch.moe else arch.intermediate_size
        if mlp % tp:
            continue
        found.append(tp)
    return found


# ============================================================================ memory


def activation_gib(arch: ModelArch) -> float:
    if arch.model_type in ACTIVATION_GIB:
        return ACTIVATION_GIB[arch.model_type]
    return ACTIVATION_MOE_GIB if arch.moe else ACTIVATION_DENSE_GIB


def non_torch_gib(tp: int) -> float:
    return NON_TORCH_TP1_GIB if tp == 1 else NON_TORCH_TP_GIB


@dataclass(frozen=True)
class Memory:
    """One GPU of an engine, in GiB."""

    requested: float  # visible memory x --gpu-memory-utilization
    weights: float
    activation: float
    non_torch: float

    @property
    def kv_pool(self) -> float:
        return self.requested - self.weights - self.activation - self.non_torch

    def as_dict(self) -> dict[str, float]:
        return {
            "requested_gib": round(self.requested, 2),
            "weights_gib": round(self.weights, 2),
            "activation_gib": round(self.activation, 2),
            "non_torch_gib": round(self.non_torch, 2),
            "kv_pool_gib": round(self.kv_pool, 2),
        }


def memory(arch: ModelArch, gpu: Gpu, tp: int, utilization: float, pp: int = 1) -> Memory:
    return Memory(
        requested=gpu.memory_gib * utilization,
        weights=weight_bytes(arch) / (tp * pp) / GiB,
        activation=activation_gib(arch),
        non_torch=non_torch_gib(tp),
    )


# ============================================================================ roofline


def _peak_flops(arch: ModelArch, gpu: Gpu) -> float:
    """FP8 checkpoints run FP8 GEMMs where the GPU has FP8 tensor cores; everything else BF16."""
    if arch.weight_dtype == "fp8" and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    return gpu.bf16_tflops * 1e12


def _attention_dims(arch: ModelArch) -> int:
    """d_qk + d_v summed per head (MLA prefill computes the uncompressed heads)."""
    if arch.mla:
        return arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim + arch.mla.v_head_dim
    return 2 * arch.head_dim


def _causal_pairs(tokens: int, window: int | None) -> float:
    if not window or tokens <= window:
        return tokens * (tokens + 1) / 2
    return window * (window + 1) / 2 + (tokens - window) * window


def attention_flops(arch: ModelArch, tokens: int) -> float:
    """QK^T and PV of a causal prefill of `tokens`, all layers."""
    window = arch.sliding_window
    windowed = window.layers if window else 0
    pairs = (arch.layers - windowed) * _causal_pairs(tokens, None)
    if window:
        pairs += windowed * _causal_pairs(tokens, window.window)
    return 2 * pairs * arch.heads * _attention_dims(arch)


def allreduce_seconds(arch: ModelArch, gpu: Gpu, tp: int, tokens: int) -> float:
    """Two ring all-reduces of the hidden states per layer over the GPU link (16-bit)."""
    if tp == 1:
        return 0.0
    size = tokens * arch.hidden_size * 2
    ring = 2 * (tp - 1) / tp * size / (gpu.link_gbps * 1e9)
    return 2 * arch.layers * (ring + ALLREDUCE_LATENCY_S)


def prefill_seconds(arch: ModelArch, gpu: Gpu, tp: int, tokens: int, batch: int = 1) -> float:
    """`batch` prompts of `tokens` each in one forward on one engine (one prompt unless said):
    compute-bound, plus the TP all-reduces."""
    p = params(arch)
    flops = batch * (2 * p.compute * tokens + attention_flops(arch, tokens))
    return flops / (tp * _peak_flops(arch, gpu) * MFU) + allreduce_seconds(
        arch, gpu, tp, batch * tokens
    )


def experts_touched(experts: int, active: int, batch: int) -> float:
    """Expected distinct experts a batch routes to in one layer, routing uniform at random."""
    return experts * (1 - (1 - active / experts) ** batch)


def decode_step_seconds(
    arch: ModelArch,
    gpu: Gpu,
    tp: int,
    batch: int,
    context: int,
    layout: KvLayout,
) -> float:
    """One decode step of `batch` sequences of mean `context` on one engine: the larger of the
    HBM time (weights and KV read) and the compute time, plus the TP all-reduces."""
    p = params(arch)
    linear = _linear_bytes(arch.weight_dtype)
    dense_part = weight_bytes(arch) - 2 * p.embedding  # the lookup reads only `batch` rows
    read = dense_part
    if arch.moe:
        moe = arch.moe
        expert_bytes = linear * p.experts
        touched = experts_touched(moe.experts, moe.active_experts, batch) / moe.experts
        read = dense_part - expert_bytes + expert_bytes * touched
    kv_read = batch * layout.sequence_bytes(context)
    memory_s = (read / tp + kv_read) / (gpu.hbm_tbps * 1e12 * BANDWIDTH_EFFICIENCY)
    attention = 2 * batch * context * arch.heads * _attention_dims(arch) * arch.layers
    flops = 2 * batch * (p.compute + p.embedding) + attention  # logits for every sequence
    compute_s = flops / (tp * _peak_flops(arch, gpu) * MFU)
    return max(memory_s, compute_s) + allreduce_seconds(arch, gpu, tp, batch)


def default_max_num_seqs(gpu: Gpu) -> int:
    """vLLM's default --max-num-seqs for `vllm serve` (engine/arg_utils.py get_batch_defaults):
    1024 on GPUs with at least 70 GiB that are not A100s, else 256."""
    return 1024 if gpu.memory_gib >= 70 and not gpu.name.startswith("A100") else 256


# ============================================================================ the plan


@dataclass(frozen=True)
class Workload:
    input_len: int = 4096
    output_len: int = 512
    concurrency: int = 64
    rate: float | None = None  # requests per second to sustain
    ttft_ms: float | None = None
    itl_ms: float | None = None

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
    gpus_per_node: int = 8
    utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    hetero_tp: bool = True  # the connector allows prefill and decode TP to differ
    one_pair: bool = False  # the connector pairs one prefill pod with one decode pod
    hybrid_kv: bool = True  # sliding-window layers keep only their window (hybrid KV manager)
    network_gbps: float | None = None  # KV transfer bandwidth per GPU; default the GPU's NIC


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
        return self.memory.kv_pool > 0 and self.layout.sequence_bytes(tokens) <= self.pool_bytes


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
    ttft_ms: float
    prefill_requests_per_s: float  # one prefill engine
    decode_requests_per_s: float  # one decode engine at decode_batch
    requests_per_s: float  # the layout, rate-matched
    output_tokens_per_s: float
    bottleneck: str
    concurrency_fits: bool  # one decode engine holds --concurrency sequences


@dataclass
class Plan:
    request: Request
    prefill: RolePlan
    decode: RolePlan
    max_model_len: int
    estimates: Estimates
    verdict: str
    reasons: list[str]
    warnings: list[str]
    notes: list[str] = field(default_factory=list)  # what the layout needs (engines over nodes)

    @property
    def gpus_used(self) -> int:
        return self.prefill.gpus + self.decode.gpus

    def as_dict(self) -> dict[str, Any]:
        return plan_dict(self)


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


def engines(req: Request, limit: int | None = None) -> list[Engine]:
    """Every valid TP size up to `limit` (default: a node) with its memory and KV layout."""
    return [
        Engine(
            tp,
            memory(req.arch, req.gpu, tp, req.utilization),
            kv_layout(req.arch, tp, 1, req.kv_cache_dtype, req.hybrid_kv),
        )
        for tp in valid_tps(req.arch, limit or req.gpus_per_node)
    ]


def _need_tokens(req: Request) -> int:
    return max(req.workload.total_len, req.max_model_len or 0)


def _decode_batch(req: Request, engine: Engine, replicas: int) -> tuple[int, float]:
    """Sequences per decode engine and its step time: the share of --concurrency, at most what
    its KV holds at input+output tokens and vLLM's max-num-seqs, fewer if --itl demands."""
    w = req.workload
    cap = engine.layout.sequences(engine.pool_bytes, w.total_len)
    batch = max(1, min(cap, default_max_num_seqs(req.gpu), math.ceil(w.concurrency / replicas)))

    def step(b: int) -> float:
        return decode_step_seconds(req.arch, req.gpu, engine.tp, b, w.mean_context, engine.layout)

    if w.itl_ms is not None and step(batch) * 1000 > w.itl_ms:
        low, high = 1, batch  # step grows with the batch: the largest batch that meets --itl
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if step(middle) * 1000 <= w.itl_ms else (low, middle - 1)
        batch = low
    return batch, step(batch)


def transfer_seconds(req: Request, decode: Engine) -> tuple[float, float]:
    """(seconds, bytes per decode GPU) to move one prompt's KV: every decode rank pulls its share
    (the whole latent under MLA) over its own NIC."""
    per_rank = decode.layout.sequence_bytes(req.workload.input_len)
    bandwidth = (req.network_gbps or req.gpu.network_gbps) * 1e9
    return per_rank / bandwidth, per_rank


# A layout keeps at least this much context (or the model's own, if less) before throughput
# decides: a prefill engine whose KV pool holds 10k tokens would cut --max-model-len to 10k.
CONTEXT_FLOOR = 32768


@dataclass(frozen=True)
class _Candidate:
    prefill: RolePlan
    decode: RolePlan
    estimates: Estimates
    meets: tuple[bool, ...]
    context: int  # the longest request both roles hold

    def keeps_context(self, req: Request) -> bool:
        return self.context >= min(req.arch.max_positions, req.max_model_len or CONTEXT_FLOOR)


def _evaluate(req: Request, p: Engine, x: int, d: Engine, y: int) -> _Candidate:
    w = req.workload
    prefill_s = prefill_seconds(req.arch, req.gpu, p.tp, w.input_len)
    batch, step_s = _decode_batch(req, d, y)
    held = d.layout.sequences(d.pool_bytes, w.total_len)  # as the table's "requests of" row
    alone = max(1, min(w.concurrency, default_max_num_seqs(req.gpu), held))
    concurrency_step = decode_step_seconds(req.arch, req.gpu, d.tp, alone, w.mean_context, d.layout)
    transfer_s, transfer_bytes = transfer_seconds(req, d)
    prefill_rps = 1 / prefill_s
    decode_rps = batch / (w.output_len * step_s)
    prefill_side, decode_side = x * prefill_rps * PREFILL_MATCH, y * decode_rps * DECODE_MATCH
    rps = min(prefill_side, decode_side)
    wait = 0.0
    if w.rate:  # M/D/1 queue in front of each prefill engine (DistServe, sizing-bench A5)
        rho = w.rate / (x * prefill_rps)
        wait = rho * prefill_s / (2 * (1 - rho)) if rho < 1 else math.inf
    ttft_s = prefill_s + wait + transfer_s + step_s
    estimates = Estimates(
        prefill_ms=prefill_s * 1000,
        prefill_tokens_per_s=w.input_len / prefill_s,
        decode_step_ms=concurrency_step * 1000,
        decode_step_sequences=alone,
        decode_tokens_per_s=alone / concurrency_step,
        decode_batch=batch,
        itl_ms=step_s * 1000,
        kv_transfer_ms=transfer_s * 1000,
        kv_transfer_mb=transfer_bytes / 1e6,
        ttft_ms=ttft_s * 1000,
        prefill_requests_per_s=prefill_rps,
        decode_requests_per_s=decode_rps,
        requests_per_s=rps,
        output_tokens_per_s=rps * w.output_len,
        bottleneck="prefill" if prefill_side < decode_side else "decode",
        concurrency_fits=held >= w.concurrency,
    )
    meets = (
        w.ttft_ms is None or ttft_s * 1000 <= w.ttft_ms,
        w.itl_ms is None or step_s * 1000 <= w.itl_ms,
        w.rate is None or rps >= w.rate,
    )
    context = min(e.layout.longest(e.pool_bytes) for e in (p, d))
    return _Candidate(
        RolePlan("prefill", p, x), RolePlan("decode", d, y), estimates, meets, context
    )


def _better(req: Request, a: _Candidate, b: _Candidate) -> bool:
    """Whether a beats b: more targets met, then keeping CONTEXT_FLOOR tokens of context, then
    throughput (1% is a tie), then more of the GPUs asked for in use, a smaller prefill TP (more
    prefill engines), a larger decode TP (more KV per GPU)."""
    if sum(a.meets) != sum(b.meets):
        return sum(a.meets) > sum(b.meets)
    if a.keeps_context(req) != b.keeps_context(req):
        return a.keeps_context(req)
    ra, rb = a.estimates.requests_per_s, b.estimates.requests_per_s
    if abs(ra - rb) > 0.01 * max(ra, rb):
        return ra > rb
    used_a = a.prefill.gpus + a.decode.gpus
    used_b = b.prefill.gpus + b.decode.gpus
    if used_a != used_b:
        return used_a > used_b
    if a.prefill.engine.tp != b.prefill.engine.tp:
        return a.prefill.engine.tp < b.prefill.engine.tp
    return a.decode.engine.tp > b.decode.engine.tp


def _fit_report(req: Request) -> tuple[Engine | None, list[str]]:
    """The smallest engine that holds one request, looking past a node; lines explaining why
    smaller ones do not."""
    need = _need_tokens(req)
    lines: list[str] = []
    for engine in engines(req, limit=64):
        m = engine.memory
        if engine.fits(need):
            return engine, lines
        kv_need = engine.layout.sequence_bytes(need) / GiB
        lines.append(
            f"TP{engine.tp} on {req.gpu.name}: {m.requested:.1f} GiB usable per GPU "
            f"({req.gpu.memory_gib:g} GiB x {req.utilization:g}) - weights {m.weights:.1f} - "
            f"activation {m.activation:.2f} - non-torch {m.non_torch:.2f} = KV pool "
            f"{m.kv_pool:.1f} GiB; one request of {need} tokens needs {kv_need:.2f} GiB"
        )
    return None, lines


def spanning_engines(req: Request, need: int) -> list[Engine]:
    """The smallest engine over whole nodes that holds one request (TP a multiple of
    --gpus-per-node beyond one node; the chart runs it as a LeaderWorkerSet group of TP
    gpus-per-node x PP nodes), or none. Its numbers are TP's: pipeline stages hold only their
    layers' KV, so the KV pool of the rendered TP x PP engine is larger than estimated."""
    found = [
        e
        for e in engines(req, limit=64)
        if e.tp > req.gpus_per_node and e.tp % req.gpus_per_node == 0 and e.fits(need)
    ]
    return found[:1]


def nodes_per_engine(req: Request, engine: Engine) -> int:
    """Pods (nodes) one engine spans: 1 within a node, else TP / --gpus-per-node."""
    return max(1, engine.tp // req.gpus_per_node) if engine.tp > req.gpus_per_node else 1


def _elsewhere_hint(where: list[dict[str, Any]]) -> str | None:
    layouts = [
        f"{w['gpu']} (1 x TP{w['prefill_tp']} prefill + 1 x TP{w['decode_tp']} decode = "
        f"{w['gpus']} GPUs)"
        for w in where[:3]
    ]
    return ("it fits on " + "; ".join(layouts)) if layouts else None


def smallest_layout(req: Request) -> tuple[int, int] | None:
    """(prefill TP, decode TP) of the smallest PD layout within a node, or None."""
    need = _need_tokens(req)
    fitting = [e.tp for e in engines(req) if e.fits(need)]
    return (fitting[0], fitting[0]) if fitting else None


def _elsewhere(req: Request, others: list[Gpu], within: int | None = None) -> list[dict[str, Any]]:
    """Other GPU types where the smallest layout fits in one node (within that many GPUs, when
    given), fewest GPUs first."""
    found = []
    for gpu in others:
        if gpu.name == req.gpu.name:
            continue
        layout = smallest_layout(replace(req, gpu=gpu))
        if layout and (within is None or sum(layout) <= within):
            found.append((sum(layout), gpu.name, layout))
    found.sort()
    return [{"gpu": name, "prefill_tp": p, "decode_tp": d, "gpus": n} for n, name, (p, d) in found]


def plan(req: Request, other_gpus: list[Gpu] | None = None) -> Plan:
    """The best PD layout for the request; DoesNotFit (exit 1) with the numbers otherwise."""
    w = req.workload
    arch = req.arch
    if w.total_len > arch.max_positions:
        raise DoesNotFit(
            f"--input-len {w.input_len} + --output-len {w.output_len} = {w.total_len} tokens is "
            f"more than {arch.name}'s context ({arch.max_positions} tokens)"
        )
    if req.max_model_len is not None:
        if req.max_model_len > arch.max_positions:
            raise DoesNotFit(
                f"--max-model-len {req.max_model_len} is more than {arch.name}'s context "
                f"({arch.max_positions} tokens)"
            )
        if req.max_model_len < w.total_len:
            raise DoesNotFit(
                f"--max-model-len {req.max_model_len} is shorter than --input-len + "
                f"--output-len ({w.total_len})"
            )
    need = _need_tokens(req)
    fitting = [e for e in engines(req) if e.fits(need)] or spanning_engines(req, need)
    if fitting and fitting[0].tp > req.gpus_per_node and req.gpus < 2 * fitting[0].tp:
        engine, lines = _fit_report(req)
        nodes = fitting[0].tp // req.gpus_per_node
        where = _elsewhere(req, other_gpus or [])
        raise DoesNotFit(
            f"{arch.name} ({weight_bytes(arch) / GiB:.1f} GiB of weights) needs "
            f"TP{fitting[0].tp} per engine on {req.gpu.name}: more GPUs per engine than a node "
            f"has (--gpus-per-node {req.gpus_per_node}), so each engine spans {nodes} nodes; "
            f"{req.gpus} GPUs cannot hold 1 prefill + 1 decode engine ({2 * fitting[0].tp} GPUs)",
            hint=_elsewhere_hint(where),
            details=lines[-3:],
            needs_gpus=2 * fitting[0].tp,
            fits_on=where,
        )
    if not fitting:
        engine, lines = _fit_report(req)
        weights = weight_bytes(arch) / GiB
        where = _elsewhere(req, other_gpus or [])
        hint = _elsewhere_hint(where)
        if engine:
            raise DoesNotFit(
                f"{arch.name} ({weights:.1f} GiB of weights) needs TP{engine.tp} per engine on "
                f"{req.gpu.name}: more GPUs per engine than a node has (--gpus-per-node "
                f"{req.gpus_per_node}), and not a whole number of such nodes",
                hint=hint,
                details=lines[-3:],
                fits_on=where,
            )
        raise DoesNotFit(
            f"{arch.name} ({weights:.1f} GiB of weights) does not fit on {req.gpu.name} "
            "at any tensor parallel size",
            hint=hint,
            details=lines[-3:],
            fits_on=where,
        )
    smallest = fitting[0].tp * 2
    if req.gpus < smallest:
        # Only GPU types whose smallest PD layout fits the GPUs asked for are worth naming.
        where = _elsewhere(req, other_gpus or [], within=req.gpus)
        aggregated = (
            f"; {req.gpus} GPU(s) hold one engine of TP{fitting[0].tp}, which serves it "
            "aggregated (without PD)"
            if req.gpus >= fitting[0].tp
            else ""
        )
        raise DoesNotFit(
            f"{req.gpus} x {req.gpu.name} cannot hold a PD layout of {arch.name}: the smallest "
            f"is 1 prefill + 1 decode engine of TP{fitting[0].tp} = {smallest} GPUs",
            hint=f"give --gpus {smallest}{aggregated}"
            + (f"; or {_elsewhere_hint(where)}" if where else ""),
            needs_gpus=smallest,
            fits_on=where,
            details=[
                f"TP{fitting[0].tp}: weights {fitting[0].memory.weights:.1f} GiB and a KV pool of "
                f"{fitting[0].memory.kv_pool:.1f} GiB per GPU"
            ],
        )
    best: _Candidate | None = None
    for p in fitting:
        for d in fitting:
            if not req.hetero_tp and p.tp != d.tp:
                continue
            max_x = 1 if req.one_pair else (req.gpus - d.tp) // p.tp
            for x in range(1, max_x + 1):
                y = (req.gpus - x * p.tp) // d.tp
                if req.one_pair:
                    y = min(y, 1)
                if y < 1:
                    break
                candidate = _evaluate(req, p, x, d, y)
                if best is None or _better(req, candidate, best):
                    best = candidate
    assert best is not None  # a layout of the smallest engines exists (checked above)
    max_len = _max_model_len(req, best)
    verdict, reasons = _verdict(req, best)
    nodes = nodes_per_engine(req, best.decode.engine)
    notes = []
    if nodes_per_engine(req, best.prefill.engine) > 1 or nodes > 1:
        tp = best.decode.engine.tp
        notes.append(
            f"{arch.name} needs TP{tp} per engine, more GPUs than a node has (--gpus-per-node "
            f"{req.gpus_per_node}): each engine spans {nodes} nodes as one LeaderWorkerSet group "
            f"(tensor parallel {req.gpus_per_node} within a node, pipeline parallel {nodes} "
            f"across nodes); the estimates are TP{tp}'s, and the KV pool of the pipelined engine "
            "is larger (each stage holds only its layers' KV)"
        )
    return Plan(
        request=req,
        prefill=best.prefill,
        decode=best.decode,
        max_model_len=max_len,
        estimates=best.estimates,
        verdict=verdict,
        reasons=reasons,
        warnings=_warnings(req, best),
        notes=notes,
    )


def _max_model_len(req: Request, best: _Candidate) -> int:
    """--max-model-len when not given: the model's context, cut to what one request can fill in
    the smaller KV pool (whole 1024s); never below input + output."""
    if req.max_model_len:
        return req.max_model_len
    longest = min(
        role.engine.layout.longest(role.engine.pool_bytes) for role in (best.prefill, best.decode)
    )
    fitting = longest // 1024 * 1024 if longest >= 1024 else longest
    return max(min(req.arch.max_positions, fitting), req.workload.total_len)


def _verdict(req: Request, best: _Candidate) -> tuple[str, list[str]]:
    """Whether PD is likely to help this workload: likely | may | unlikely, with the reasons."""
    w, e = req.workload, best.estimates
    reasons: list[str] = []
    unlikely = False
    if w.input_len < 2048:
        unlikely = True
        reasons.append(
            f"prompts of {w.input_len} tokens are short (under 2048, pdctl validate's PD101): "
            "prefill interrupts decoding only briefly"
        )
    if e.prefill_ms <= e.itl_ms:
        unlikely = True
        reasons.append(
            f"one prefill ({e.prefill_ms:.0f} ms) takes no longer than one decode step "
            f"({e.itl_ms:.0f} ms): little interference to remove"
        )
    if w.rate is not None:
        aggregated = 1 / (e.prefill_ms / 1000 + w.output_len * e.itl_ms / 1000 / e.decode_batch)
        if w.rate <= aggregated:
            unlikely = True
            reasons.append(
                f"low load: one aggregated engine of TP{best.decode.engine.tp} serves about "
                f"{aggregated:.1f} requests/s, --rate is {w.rate:g} (Dynamo: at low load stay "
                "aggregated)"
            )
    ratio = w.input_len / max(w.output_len, 1)
    if unlikely:
        reasons.append(
            "PD separates TTFT from ITL; it does not raise throughput by itself (vLLM docs)"
        )
        return "unlikely", reasons
    long_prompts, long_stalls = ratio >= 10, e.prefill_ms >= 2 * e.itl_ms
    evidence = [
        (
            long_prompts,
            f"input:output is {ratio:.1f}:1, "
            + ("at or above" if long_prompts else "below")
            + " the 10:1 from which PD usually pays (llm-d)",
        ),
        (
            long_stalls,
            f"each prefill ({e.prefill_ms:.0f} ms) would stall decoding for "
            f"{e.prefill_ms / e.itl_ms:.1f} steps of {e.itl_ms:.0f} ms"
            + ("" if long_stalls else " (PD removes stalls of two steps or more)"),
        ),
    ]
    if long_prompts and long_stalls:
        return "likely", reasons + [text for _, text in evidence]
    return "may", reasons + [
        ("for PD: " if good else "against PD: ") + text for good, text in evidence
    ]


def _warnings(req: Request, best: _Candidate) -> list[str]:
    w, e = req.workload, best.estimates
    warnings = []
    unused = req.gpus - best.prefill.gpus - best.decode.gpus
    if unused:
        warnings.append(f"{unused} of {req.gpus} GPUs are left unused by this layout")
    if not e.concurrency_fits:
        warnings.append(
            f"one decode engine holds {e.decode_step_sequences} sequences of {w.total_len} "
            f"tokens, fewer than --concurrency {w.concurrency}: the decode step is estimated at "
            f"{e.decode_step_sequences}; more decode GPUs or a shorter context hold more"
        )
    if w.ttft_ms is not None and e.ttft_ms > w.ttft_ms:
        warnings.append(f"--ttft {w.ttft_ms:g} ms is not met: estimated {e.ttft_ms:.0f} ms")
    if w.itl_ms is not None and e.itl_ms > w.itl_ms:
        warnings.append(f"--itl {w.itl_ms:g} ms is not met: estimated {e.itl_ms:.1f} ms")
    if w.rate is not None and e.requests_per_s < w.rate:
        warnings.append(
            f"--rate {w.rate:g}/s is not met: this layout sustains about "
            f"{e.requests_per_s:.2f}/s ({e.bottleneck}-bound)"
        )
    if req.arch.sliding_window and req.hybrid_kv:
        warnings.append(
            "sliding-window layers are sized at their window (vLLM's hybrid KV cache manager, on "
            "with NixlConnector since vLLM PR #41847); with it off they cost full-attention KV"
        )
    return warnings


# ============================================================================ pods


@dataclass(frozen=True)
class Pod:
    cpu: int
    memory_gib: int
    cache_gib: int
    shm_gib: int
    checkpoint_gib: float
    weights_gib: float


def _round_up(value: float, step: int) -> int:
    return int(math.ceil(value / step) * step)


def startup_seconds(arch: ModelArch) -> int:
    """Seconds an engine of `arch` may need from start to serving with an empty model cache."""
    download = checkpoint_bytes(arch) / (STARTUP_DOWNLOAD_MIB_S * 2**20)
    return int(math.ceil(download + STARTUP_BASE_S))


def pod(arch: ModelArch, workers: int) -> Pod:
    """Resources of one engine pod with `workers` GPU workers (docs/sizing.md: "Pods")."""
    weights = weight_bytes(arch) / GiB
    checkpoint = checkpoint_bytes(arch) / GiB
    return Pod(
        cpu=CPU_PER_WORKER * workers,
        memory_gib=_round_up(weights + HOST_GIB_PER_WORKER * workers, 4),
        cache_gib=_round_up(checkpoint * CACHE_HEADROOM + CACHE_EXTRA_GIB, 10),
        shm_gib=SHM_GIB_PER_WORKER * workers,
        checkpoint_gib=checkpoint,
        weights_gib=weights,
    )


# ============================================================================ JSON


def _round(value: float, digits: int = 2) -> float:
    return round(value, digits) if math.isfinite(value) else -1.0


def _role_dict(plan_: Plan, role: RolePlan) -> dict[str, Any]:
    engine, w = role.engine, plan_.request.workload
    pod_ = pod(plan_.request.arch, engine.tp)
    return {
        "tp": engine.tp,
        "pp": 1,
        "replicas": role.replicas,
        "gpus": role.gpus,
        "gpus_per_engine": engine.tp,
        "nodes_per_engine": nodes_per_engine(plan_.request, engine),
        "weights_gib_per_gpu": _round(engine.memory.weights),
        "kv_pool_gib_per_gpu": _round(engine.memory.kv_pool),
        "kv_bytes_per_token_per_gpu": engine.layout.per_token,
        "kv_tokens_per_gpu": engine.layout.tokens(engine.pool_bytes),
        "max_seqs_at_max_model_len": engine.layout.sequences(
            engine.pool_bytes, plan_.max_model_len
        ),
        "max_seqs_at_workload": engine.layout.sequences(engine.pool_bytes, w.total_len),
        "memory": engine.memory.as_dict(),
        "pod": {
            "cpu": pod_.cpu,
            "memory_gib": pod_.memory_gib,
            "cache_gib": pod_.cache_gib,
            "shm_gib": pod_.shm_gib,
        },
    }


def plan_dict(plan_: Plan) -> dict[str, Any]:
    """The JSON of `pdctl plan -o json`; field names are documented in docs/sizing.md."""
    req, arch, e, w = plan_.request, plan_.request.arch, plan_.estimates, plan_.request.workload
    p = params(arch)
    return {
        "schema_version": 1,
        "model": {
            "name": arch.name,
            "source": arch.source,
            "architecture": arch.architecture,
            "model_type": arch.model_type,
            "attention": arch.attention,
            "moe": arch.moe is not None,
            "sliding_window": arch.sliding_window.window if arch.sliding_window else None,
            "params_billion": _round(p.total / 1e9),
            "active_params_billion": _round(p.active / 1e9),
            "weight_dtype": arch.weight_dtype,
            "weights_gib": _round(weight_bytes(arch) / GiB),
            "checkpoint_gib": _round(checkpoint_bytes(arch) / GiB),
            "max_position_embeddings": arch.max_positions,
            "gated": arch.gated,
        },
        "gpu": {
            "name": req.gpu.name,
            "memory_gib": req.gpu.memory_gib,
            "hbm_tbps": req.gpu.hbm_tbps,
            "bf16_tflops": req.gpu.bf16_tflops,
            "link": req.gpu.link,
            "resource": req.gpu.resource,
        },
        "request": {
            "gpus": req.gpus,
            "gpus_per_node": req.gpus_per_node,
            "gpu_memory_utilization": req.utilization,
            "kv_cache_dtype": req.kv_cache_dtype,
            "input_len": w.input_len,
            "output_len": w.output_len,
            "concurrency": w.concurrency,
            "rate": w.rate,
            "ttft_ms": w.ttft_ms,
            "itl_ms": w.itl_ms,
        },
        "kv_bytes_per_token": kv_bytes_per_token(arch),
        "kv_bytes_per_token_fp8": kv_bytes_per_token(arch, "fp8"),
        "kv_bytes_per_token_planned": kv_bytes_per_token(arch, req.kv_cache_dtype),
        "max_model_len": plan_.max_model_len,
        "gpus_used": plan_.gpus_used,
        "roles": {
            "prefill": _role_dict(plan_, plan_.prefill),
            "decode": _role_dict(plan_, plan_.decode),
        },
        "estimates": {
            "prefill_ms": _round(e.prefill_ms, 1),
            "prefill_tokens_per_s": _round(e.prefill_tokens_per_s, 0),
            "prefill_requests_per_s_per_engine": _round(e.prefill_requests_per_s),
            "decode_step_ms": _round(e.decode_step_ms),
            "decode_step_sequences": e.decode_step_sequences,
            "decode_tokens_per_s": _round(e.decode_tokens_per_s, 0),
            "decode_batch_per_engine": e.decode_batch,
            "itl_ms": _round(e.itl_ms),
            "decode_requests_per_s_per_engine": _round(e.decode_requests_per_s),
            "kv_transfer_ms": _round(e.kv_transfer_ms),
            "kv_transfer_mb_per_gpu": _round(e.kv_transfer_mb, 1),
            "kv_transfer_link_gbps": req.network_gbps or req.gpu.network_gbps,
            "ttft_ms": _round(e.ttft_ms, 1),
            "requests_per_s": _round(e.requests_per_s),
            "output_tokens_per_s": _round(e.output_tokens_per_s, 0),
            "bottleneck": e.bottleneck,
        },
        "assumptions": {
            "mfu": MFU,
            "bandwidth_efficiency": BANDWIDTH_EFFICIENCY,
            "rate_matching": {"prefill": PREFILL_MATCH, "decode": DECODE_MATCH},
            "allreduce_latency_us": ALLREDUCE_LATENCY_S * 1e6,
            "block_size": BLOCK_SIZE,
            "hybrid_kv_cache": req.hybrid_kv,
            "max_num_seqs": default_max_num_seqs(req.gpu),
        },
        "verdict": {"pd": plan_.verdict, "reasons": plan_.reasons},
        "warnings": plan_.warnings,
        "notes": plan_.notes,
    }
