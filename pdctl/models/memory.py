"""Memory arithmetic: pure functions of a model and a GPU, as vLLM's profiler does it
(gpu_worker.determine_available_memory); no I/O. docs/sizing.md writes the model down.

- KV pool per GPU = visible memory x utilization - weights/(TP x PP) - peak activation - non-torch;
- KV bytes per token: 2 x layers x KV heads x head_dim x dtype bytes (GQA; KV heads are
  replicated when TP exceeds them), layers x (kv_lora_rank + rope dim) x bytes (MLA, not split by
  TP), sliding-window layers read their window and hold at most the window and the tokens in
  flight (vLLM 0.26);
- an engine's startup budget: its checkpoint downloaded into an empty cache, then loaded.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from pdctl import vllm_image
from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch

GiB = 1024**3

# vLLM's default --block-size on GPUs (KV is allocated in blocks of this many tokens).
BLOCK_SIZE = vllm_image.grammar().block_size
# Peak activation memory in GiB by config.json model_type: llm-d-planner 0.3.3
# vllm_memory_constants.json, "calibrated against vLLM v0.19.0 on H100-80GB".
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

# The engine's startup budget (docs/sizing.md: "Startup budget"): the checkpoint downloaded at
# STARTUP_DOWNLOAD_MIB_S into an empty cache, plus STARTUP_BASE_S for the rest (reading the
# weights onto the GPUs, torch.compile, CUDA graph capture, the KV connector's start). Both are
# assumptions chosen to be generous, not measurements: a pod that needs longer is restarted by its
# startup probe and starts the download again.
STARTUP_DOWNLOAD_MIB_S = 100
STARTUP_BASE_S = 600


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


# The planner asks for the same model's counts at every layout it scores (millions of calls at
# hundreds of GPUs); a ModelArch is frozen, so they are computed once per model.
@functools.lru_cache(maxsize=256)
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


def linear_bytes(dtype: str) -> float:
    return _MXFP4_BYTES if dtype == "mxfp4" else _BYTES[dtype]


@functools.lru_cache(maxsize=256)
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
    """An engine's KV cache on one GPU as vLLM 0.26's KV cache manager lays it out
    (vllm/v1/core/kv_cache_utils.py, get_kv_cache_config_from_groups): the attention layers fall
    into groups of equal size, each of one attention type; one block number takes one page in
    each of `group_size` shared tensors, so every block costs `block_bytes` whatever its group.
    A sequence takes one block per 16 tokens in each full-attention group; a sliding-window group
    holds at most `window_reserve` tokens of it plus a block (vllm/v1/kv_cache_interface.py,
    SlidingWindowSpec.max_admission_blocks_per_request: the window, less one, plus the tokens
    scheduled and not yet settled; the scheduler reserves that many, not the window alone) and a
    decode step reads only the window's blocks."""

    block_bytes: int  # bytes of one block number on this GPU (16 tokens of one group's layers)
    full_groups: int  # groups of full-attention layers (or of every layer, as one type)
    window_groups: int  # groups of sliding-window layers
    window: int  # tokens a sliding-window group attends to (0: none)
    window_reserve: int = 0  # tokens a sliding-window group reserves per sequence (0: none)
    fp8: bool = False  # the cache holds FP8 (one byte an element)

    @property
    def groups(self) -> int:
        return self.full_groups + self.window_groups

    @property
    def per_token(self) -> int:
        """Bytes per token held in every group (padding layers included)."""
        return self.groups * self.block_bytes // BLOCK_SIZE

    def _window_cap(self, tokens: int) -> int:
        """Blocks a sliding-window group reserves for a sequence of `tokens`
        (max_admission_blocks_per_request, capped at the sequence's own length)."""
        return math.ceil(min(self.window_reserve, tokens) / BLOCK_SIZE) + 1

    def sequence_blocks(self, tokens: int) -> int:
        """Blocks a running sequence of `tokens` holds: in a sliding-window group the scheduler
        clamps its blocks to the admission cap (single_type_kv_cache_manager,
        get_num_blocks_to_allocate with apply_admission_cap)."""
        blocks = math.ceil(tokens / BLOCK_SIZE)
        kept = min(blocks, self._window_cap(tokens)) if self.window_groups else 0
        return self.full_groups * blocks + self.window_groups * kept

    def sequence_bytes(self, tokens: int) -> int:
        """Bytes one sequence of `tokens` occupies, in whole blocks."""
        return self.sequence_blocks(tokens) * self.block_bytes

    def read_bytes(self, tokens: int) -> int:
        """Bytes a decode step reads for one sequence of `tokens`: its window (whole blocks, the
        window may start inside one) in each sliding-window group, every block elsewhere."""
        blocks = math.ceil(tokens / BLOCK_SIZE)
        attended = min(blocks, math.ceil(self.window / BLOCK_SIZE) + 1)
        return (self.full_groups * blocks + self.window_groups * attended) * self.block_bytes

    def request_blocks(self, max_model_len: int) -> int:
        """Blocks vLLM sets aside for one request of `max_model_len` when it checks the pool at
        start-up and reports its concurrency (kv_cache_utils._max_memory_usage_bytes_from_groups
        and get_max_concurrency_for_kv_cache_config: each group's max_memory_usage_bytes; a
        sliding-window group's cap counts its extra block even when the length caps it)."""
        blocks = math.ceil(max_model_len / BLOCK_SIZE)
        return self.full_groups * blocks + self.window_groups * self._window_cap(max_model_len)

    def request_bytes(self, max_model_len: int) -> int:
        return self.request_blocks(max_model_len) * self.block_bytes

    def blocks(self, pool_bytes: float) -> int:
        return int(pool_bytes // self.block_bytes) if self.block_bytes else 0

    def concurrency(self, pool_bytes: float, max_model_len: int) -> float:
        """vLLM's "Maximum concurrency for `max_model_len` tokens per request" (blocks over one
        request's blocks, kv_cache_utils.get_max_concurrency_for_kv_cache_config)."""
        return self.blocks(pool_bytes) / self.request_blocks(max_model_len) if self.groups else 0.0

    def tokens(self, pool_bytes: float, max_model_len: int) -> int:
        """Tokens vLLM logs for a pool ("GPU KV cache size"): since vLLM 0.26 its concurrency times
        `max_model_len` (kv_cache_utils.get_kv_cache_capacity), all blocks x 16 for full attention
        alone. With sliding-window groups the count depends on `max_model_len`: gpt-oss-20b's
        12 + 12 layers log about a full-attention count at a short one, twice that at 131,072."""
        return int(self.concurrency(pool_bytes, max_model_len) * max_model_len)

    def sequences(self, pool_bytes: float, tokens: int) -> int:
        """Sequences of `tokens` a pool holds at once."""
        return self.blocks(pool_bytes) // self.sequence_blocks(tokens) if tokens else 0

    def fits(self, pool_bytes: float, max_model_len: int) -> bool:
        """vLLM starts with this --max-model-len: the pool holds one request of it
        (kv_cache_utils._check_enough_kv_cache_memory)."""
        return self.request_bytes(max_model_len) <= pool_bytes

    def longest(self, pool_bytes: float) -> int:
        """The longest --max-model-len one pool starts with (whole blocks)."""
        return _longest(self, pool_bytes)


@functools.lru_cache(maxsize=1 << 14)  # the layout search asks for the same pools again and again
def _longest(layout: KvLayout, pool_bytes: float) -> int:
    if layout.full_groups == 0:  # every layer windowed: any length fits once the window does
        return 1 << 30 if layout.fits(pool_bytes, layout.window_reserve) else 0
    low, high = 0, (layout.blocks(pool_bytes) // layout.full_groups + 1) * BLOCK_SIZE
    while high - low > BLOCK_SIZE:
        middle = (low + high) // 2 // BLOCK_SIZE * BLOCK_SIZE
        low, high = (middle, high) if layout.fits(pool_bytes, middle) else (low, middle)
    return low


def kv_heads_per_gpu(arch: ModelArch, tp: int) -> int:
    """KV heads one TP rank holds: its share, or one replicated head when TP exceeds them."""
    return max(1, arch.kv_heads // tp)


def kv_groups(full: int, windowed: int) -> tuple[int, int, int]:
    """vLLM's KV cache groups of a model with `full` full-attention and `windowed` sliding-window
    layers under the hybrid manager (kv_cache_utils._get_kv_cache_groups_uniform_page_size):
    (layers per group, full-attention groups, sliding-window groups). The group size is the
    smaller count, or the larger when it is under 1.5 times the smaller; the last group of a type
    is padded to that size (e.g. 52 sliding and 10 full layers: 6 + 1 groups of 10)."""
    if not full or not windowed:
        return full + windowed, int(bool(full)), int(bool(windowed))
    size = min(full, windowed)
    if max(full, windowed) < 1.5 * size:
        size = max(full, windowed)
    return size, math.ceil(full / size), math.ceil(windowed / size)


def in_flight_tokens(arch: ModelArch, budget: int, pp: int = 1) -> int:
    """Tokens scheduled and not yet settled (vllm/config/vllm.py, max_in_flight_tokens): a step's
    token budget (--max-num-batched-tokens) in each batch in flight, two with async scheduling
    (on by default) at PP 1; at PP > 1, PP batches under the V1 model runner (MoE models) and
    PP + 1 under the V2 one (the default for dense models, _is_default_v2_model_runner_model)."""
    if pp == 1:
        return 2 * budget
    return (pp if arch.moe else pp + 1) * budget


def kv_layout(
    arch: ModelArch,
    tp: int,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    hybrid: bool = True,
    *,
    budget: int,
) -> KvLayout:
    """The KV layout of one GPU of an engine with the step token budget `budget`. With `hybrid`
    off (--disable-hybrid-kv-cache-manager, or a connector without it) vLLM turns sliding-window
    layers into full-attention ones (kv_cache_utils.unify_hybrid_kv_cache_specs): one group of
    every layer."""
    b = kv_dtype_bytes(kv_cache_dtype)
    if arch.mla:  # one latent per token and layer, held whole by every TP rank
        per_layer = (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
    else:
        per_layer = 2 * kv_heads_per_gpu(arch, tp) * arch.head_dim * b
    window = arch.sliding_window
    windowed = window.layers if window else 0
    if window and windowed and (hybrid or windowed == arch.layers):
        size, full_groups, window_groups = kv_groups(arch.layers - windowed, windowed)
        kept = window.window
        reserve = kept - 1 + in_flight_tokens(arch, budget, pp)
    else:
        size, full_groups, window_groups, kept, reserve = arch.layers, 1, 0, 0, 0
    # Pipeline stages split each group's layers (layers[i::groups]): a stage holds its share.
    block_bytes = math.ceil(size / pp) * per_layer * BLOCK_SIZE
    return KvLayout(block_bytes, full_groups, window_groups, kept, reserve, fp8=b == 1)


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


def startup_seconds(arch: ModelArch) -> int:
    """Seconds an engine of `arch` may need from start to serving with an empty model cache."""
    download = checkpoint_bytes(arch) / (STARTUP_DOWNLOAD_MIB_S * 2**20)
    return int(math.ceil(download + STARTUP_BASE_S))
