"""Time estimates from a roofline model: prefill is compute-bound (FLOPs over TP x peak x the
share of peak each operation class reaches, plus TP all-reduces over the GPU link), decode is
bandwidth-bound (weights and KV read per step over HBM bandwidth x efficiency, plus the step's
costs). The factors are per GPU generation, in efficiency.py. Pure functions; docs/sizing.md
writes the model down."""

from __future__ import annotations

from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import KvLayout, linear_bytes, params, weight_bytes
from pdctl.plan import efficiency

# ---- engine constants (the efficiency factors are per operation class and GPU generation, in
# efficiency.py; docs/sizing.md: "Efficiency factors")
# Rate matching derates of aiconfigurator's sdk/picking.py (ai-dynamo/aiconfigurator):
# seq/s = min(prefill seq/s x 0.9, decode seq/s x 0.92).
PREFILL_MATCH = 0.9
DECODE_MATCH = 0.92


def _fp8(arch: ModelArch, gpu: Gpu) -> bool:
    """FP8 checkpoints run FP8 GEMMs where the GPU has FP8 tensor cores; everything else BF16."""
    return arch.weight_dtype == "fp8" and bool(gpu.fp8_tflops)


def _peak_flops(arch: ModelArch, gpu: Gpu) -> float:
    if _fp8(arch, gpu) and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    return gpu.bf16_tflops * 1e12


def _gemm_share(arch: ModelArch, gpu: Gpu, tp: int) -> float:
    """The dense GEMMs' share of the peak _peak_flops picks: FP8 GEMMs have a class of their own,
    nearer the peak the wider each GPU's share of the model (efficiency.py, fp8_gemm_width: TP
    splits the GEMMs, while every GPU quantizes and normalizes the whole hidden state)."""
    eff = efficiency.for_gpu(gpu)
    if not _fp8(arch, gpu):
        return eff.dense_gemm
    width = arch.hidden_size / tp
    return eff.fp8_gemm * width / (width + eff.fp8_gemm_width)


def _expert_share(arch: ModelArch, gpu: Gpu) -> float:
    eff = efficiency.for_gpu(gpu)
    return eff.fp8_moe_experts if _fp8(arch, gpu) else eff.moe_experts


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
    return 2 * arch.layers * (ring + efficiency.for_gpu(gpu).allreduce_latency_s)


def prefill_compute_seconds(
    arch: ModelArch, gpu: Gpu, tp: int, tokens: int, attention: float
) -> float:
    """The compute of a forward over `tokens` prompt tokens whose attention is `attention`
    FLOPs: each operation class at its share of peak."""
    eff = efficiency.for_gpu(gpu)
    p = params(arch)
    peak = tp * _peak_flops(arch, gpu)
    experts = 2 * tokens * p.active_experts
    dense = 2 * tokens * p.compute - experts
    if arch.mla and eff.mla_prefill:
        return (dense + experts + attention) / (peak * eff.mla_prefill)
    compute_s = dense / (peak * _gemm_share(arch, gpu, tp))
    compute_s += attention * attention_seconds_per_flop(arch, gpu, tp)
    if experts:
        compute_s += experts / (peak * _expert_share(arch, gpu))
    return compute_s


def attention_seconds_per_flop(arch: ModelArch, gpu: Gpu, tp: int) -> float:
    """What a prompt's attention FLOP (QK^T, PV) costs: at the BF16 peak whatever the weights
    (FlashAttention computes it from BF16 activations: FP8 Llama-3.1-8B's 8,192-token prompt alone
    took 162-167 ms on one H200, 19-25 ms more than attention at the FP8 peak gave, as much as
    attention at the BF16 peak adds); an MLA model's whole forward at its share where set."""
    eff = efficiency.for_gpu(gpu)
    if arch.mla and eff.mla_prefill:
        return 1 / (tp * _peak_flops(arch, gpu) * eff.mla_prefill)
    return 1 / (tp * gpu.bf16_tflops * 1e12 * eff.attention)


def prefill_seconds(arch: ModelArch, gpu: Gpu, tp: int, tokens: int, batch: int = 1) -> float:
    """`batch` prompts of `tokens` each in one forward on one engine (one prompt unless said):
    the compute, but no less than reading the weights the step uses (few tokens in a step: an
    MoE's experts, touched nearly all, are read for little compute), plus the TP all-reduces."""
    total = batch * tokens
    compute_s = prefill_compute_seconds(arch, gpu, tp, total, batch * attention_flops(arch, tokens))
    read_s = weights_read_seconds(arch, gpu, tp, total)
    return max(compute_s, read_s) + allreduce_seconds(arch, gpu, tp, total)


def max_cudagraph_tokens(arch: ModelArch, gpu: Gpu) -> int:
    """The most tokens a step runs as a CUDA graph under vLLM 0.26's defaults (vllm/config/
    vllm.py: min(2 x max-num-seqs, 512, the token budget); gpt-oss sets 1024 in place of the
    first two (model_executor/models/config.py, GptOssForCausalLMConfig))."""
    budget = default_max_num_batched_tokens(gpu)
    if arch.architecture == "GptOssForCausalLM":
        return min(1024, budget)
    return min(2 * default_max_num_seqs(gpu), 512, budget)


def idle_step_floor_seconds(arch: ModelArch, gpu: Gpu, tokens: int) -> float:
    """The least the first step of `tokens` tokens on an idle engine takes: 0 where a CUDA graph
    replays it; past the graph sizes an MoE model's first step takes at least a fixed time
    whatever its depth (efficiency.py moe_idle_step_s), so a prompt of a few thousand tokens
    alone waits for it. Steps back to back do not: a busy engine's rate is its GPU time. Seen on
    BF16 experts only: a block-FP8 MoE's prompt alone did not wait for it (efficiency.py)."""
    if not arch.moe or _fp8(arch, gpu) or tokens <= max_cudagraph_tokens(arch, gpu):
        return 0.0
    return efficiency.for_gpu(gpu).moe_idle_step_s


def alone_ttft_seconds(arch: ModelArch, gpu: Gpu, tokens: int, prefill_s: float) -> float:
    """A prompt of `tokens` alone on an idle engine, its prefill forward `prefill_s`: its first
    token after that forward (or the idle step's floor) and the request's own overhead."""
    floor = idle_step_floor_seconds(arch, gpu, tokens)
    return max(prefill_s, floor) + request_overhead_seconds(gpu)


def request_overhead_seconds(gpu: Gpu) -> float:
    """A request's time outside the GPU before its first token (efficiency.py)."""
    return efficiency.for_gpu(gpu).request_overhead_s


def experts_touched(experts: int, active: int, batch: int) -> float:
    """Expected distinct experts a batch routes to in one layer, routing uniform at random."""
    return experts * (1 - (1 - active / experts) ** batch)


def weights_read_seconds(arch: ModelArch, gpu: Gpu, tp: int, batch: int) -> float:
    """HBM time of reading the weights a forward of `batch` tokens touches, per GPU: the dense
    weights once (the embedding lookup reads only `batch` rows; a tied embedding is read whole
    as the LM head), the routed experts the batch routes to at their own efficiency."""
    eff = efficiency.for_gpu(gpu)
    p = params(arch)
    dense_read = weight_bytes(arch) - (0 if arch.tied_embeddings else 2 * p.embedding)
    expert_read = 0.0
    if arch.moe:
        moe = arch.moe
        expert_bytes = linear_bytes(arch.weight_dtype) * p.experts
        touched = experts_touched(moe.experts, moe.active_experts, batch) / moe.experts
        dense_read -= expert_bytes
        expert_read = expert_bytes * touched
    hbm = gpu.hbm_tbps * 1e12
    share = eff.fp8_bandwidth if _fp8(arch, gpu) else eff.bandwidth
    return dense_read / tp / (hbm * share) + expert_read / tp / (hbm * eff.moe_expert_bandwidth)


def decode_step_seconds(
    arch: ModelArch,
    gpu: Gpu,
    tp: int,
    batch: int,
    context: int,
    layout: KvLayout,
) -> float:
    """One decode step of `batch` sequences of mean `context` on one engine: the larger of the
    HBM time (weights and KV read; routed experts at their own efficiency) and the compute time,
    plus the TP all-reduces and the step's costs per layer and sequence; at least the host's
    share of a step."""
    eff = efficiency.for_gpu(gpu)
    p = params(arch)
    moe_layers = arch.layers - arch.moe.dense_layers if arch.moe else 0
    kv_read = batch * layout.read_bytes(context)
    kv_share = eff.fp8_kv_bandwidth if layout.fp8 else eff.kv_bandwidth
    memory_s = weights_read_seconds(arch, gpu, tp, batch) + kv_read / (
        gpu.hbm_tbps * 1e12 * kv_share
    )
    attention = 2 * batch * context * arch.heads * _attention_dims(arch) * arch.layers
    flops = 2 * batch * (p.compute + p.embedding) + attention  # logits for every sequence
    compute_s = flops / (tp * _peak_flops(arch, gpu) * _gemm_share(arch, gpu, tp))
    per_layer = eff.fp8_step_per_layer_s if _fp8(arch, gpu) else eff.step_per_layer_s
    overhead_s = (
        eff.step_fixed_s
        + per_layer * (arch.layers - moe_layers)
        + eff.step_per_moe_layer_s * moe_layers
        + eff.step_per_sequence_s * batch
    )
    gpu_s = max(memory_s, compute_s) + allreduce_seconds(arch, gpu, tp, batch) + overhead_s
    return max(eff.step_floor_s, gpu_s)


def default_max_num_seqs(gpu: Gpu) -> int:
    """vLLM's default --max-num-seqs for `vllm serve` (engine/arg_utils.py get_batch_defaults):
    1024 on GPUs with at least 70 GiB that are not A100s, else 256."""
    return 1024 if gpu.memory_gib >= 70 and not gpu.name.startswith("A100") else 256


def default_max_num_batched_tokens(gpu: Gpu) -> int:
    """vLLM's default --max-num-batched-tokens for `vllm serve` (the same get_batch_defaults): the
    chunked-prefill token budget of one step, 8192 where max-num-seqs is 1024, else 2048."""
    return 8192 if default_max_num_seqs(gpu) == 1024 else 2048
