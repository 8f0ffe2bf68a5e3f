"""Time estimates from a roofline model: prefill is compute-bound (FLOPs over TP x peak x MFU,
plus TP all-reduces over the GPU link), decode is bandwidth-bound (weights and KV read per step
over HBM bandwidth x efficiency). Pure functions; docs/sizing.md writes the model down."""

from __future__ import annotations

from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import KvLayout, linear_bytes, params, weight_bytes

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
# What a decode step costs beyond its HBM and compute time (scheduling, sampling, kernel launches,
# streaming), fixed plus per sequence: fitted to this project's real-engine run, one H200 with
# vLLM 0.26.0 (measurements pdstack-h200-llama-3.1-8b-decode-1 and -decode-64, `use: fit`); held
# out: -decode-16 and the published entries (docs/sizing.md, "Compared with measurements"). Mostly
# host-side work, so applied to every GPU; one model on one GPU fitted it.
STEP_OVERHEAD_S = 0.97e-3
STEP_OVERHEAD_PER_SEQUENCE_S = 11e-6


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
    HBM time (weights and KV read) and the compute time, plus the TP all-reduces and the step's
    overhead."""
    p = params(arch)
    linear = linear_bytes(arch.weight_dtype)
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
    overhead_s = STEP_OVERHEAD_S + STEP_OVERHEAD_PER_SEQUENCE_S * batch
    return max(memory_s, compute_s) + allreduce_seconds(arch, gpu, tp, batch) + overhead_s


def default_max_num_seqs(gpu: Gpu) -> int:
    """vLLM's default --max-num-seqs for `vllm serve` (engine/arg_utils.py get_batch_defaults):
    1024 on GPUs with at least 70 GiB that are not A100s, else 256."""
    return 1024 if gpu.memory_gib >= 70 and not gpu.name.startswith("A100") else 256


def default_max_num_batched_tokens(gpu: Gpu) -> int:
    """vLLM's default --max-num-batched-tokens for `vllm serve` (the same get_batch_defaults): the
    chunked-prefill token budget of one step, 8192 where max-num-seqs is 1024, else 2048."""
    return 8192 if default_max_num_seqs(gpu) == 1024 else 2048
