"""Efficiency factors of the roofline, per operation class and per GPU generation, each with its
source (docs/sizing.md, "Efficiency factors"). roofline.py reads them; `pdctl plan -o json` prints
the ones a plan used under `assumptions`.

Only Hopper (H100, H200) has been measured: this project's real vLLM 0.26.0 runs on one H200
(benchmarks/records/real-engines-h200-1gpu.json, real-engines-h200-moe-mla.json), scored through
the measurements catalog (pdctl/models/catalog/measurements.yaml: `use: fit` entries set the
factors below, `use: check` entries are kept aside and scored by
tests/test_plan_measurements.py). Every other generation keeps the defaults the planner had
before any measurement (DEFAULT): assumptions from the reference and aiconfigurator, not fits.
`python scripts/fit_efficiency.py` recomputes the fitted Hopper values from the fit entries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pdctl.models.catalog import Gpu


@dataclass(frozen=True)
class Efficiency:
    """Shares of peak each operation class reaches, and the decode step's fixed costs."""

    generation: str
    # ---- prefill (compute): share of the dense peak (FP8 peak for FP8 checkpoints)
    dense_gemm: float  # attention projections, dense MLPs, shared experts, routers
    # the same GEMMs of an FP8 checkpoint, as a share of the FP8 peak: fp8_gemm x h / (h +
    # fp8_gemm_width) at hidden size h (wider GEMMs come nearer the peak; 0: fp8_gemm at any width)
    fp8_gemm: float
    fp8_gemm_width: float
    attention: float  # QK^T and PV of the prompt
    moe_experts: float  # routed expert GEMMs
    fp8_moe_experts: float  # routed expert GEMMs of an FP8 checkpoint, as a share of the FP8 peak
    mla_prefill: float | None  # the whole forward of an MLA model; None: the classes above
    # ---- decode (HBM): share of the peak bandwidth
    bandwidth: float  # dense weights
    fp8_bandwidth: float  # dense weights of an FP8 checkpoint
    kv_bandwidth: float  # the KV cache the decode sequences' attention reads
    fp8_kv_bandwidth: float  # the same of an FP8 KV cache
    moe_expert_bandwidth: float  # routed expert weights a step touches
    # ---- decode step costs beyond HBM and compute time
    step_fixed_s: float
    step_per_layer_s: float  # per dense layer (kernels of attention and MLP)
    fp8_step_per_layer_s: float  # per dense layer of an FP8 checkpoint (its activations quantized)
    step_per_moe_layer_s: float  # per MoE layer (routing, sorting, grouped GEMMs)
    step_per_sequence_s: float
    step_floor_s: float  # the host's share of a step (scheduling, sampling): a step takes at least
    # ---- an MoE model's first step on an idle engine, past vLLM's CUDA-graph sizes, takes at
    # least this long however many layers (roofline.idle_step_floor_seconds); steps back to back
    # do not pay it
    moe_idle_step_s: float
    # ---- a request's own time outside the GPU before its first token (HTTP, tokenizing, the
    # engine's input queue, streaming the token back): added to TTFT, not to a busy engine's rate
    request_overhead_s: float
    # ---- communication
    allreduce_latency_s: float  # one all-reduce; bandwidth: the GPU catalog's link (linkGBps)
    source: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# Before any measurement, and still for every generation not measured (Ampere, Ada, Blackwell,
# AMD CDNA3):
DEFAULT = Efficiency(
    generation="default",
    # MFU 0.5: an assumption, not a measurement (docs/sizing.md, "Efficiency factors"); also for
    # attention and MoE experts (no class measured apart).
    dense_gemm=0.5,
    fp8_gemm=0.5,
    fp8_gemm_width=0.0,
    attention=0.5,
    moe_experts=0.5,
    fp8_moe_experts=0.5,
    mla_prefill=None,
    # aiconfigurator's mem_bw_empirical_scaling_factor (ai-dynamo/aiconfigurator, systems/*.yaml).
    bandwidth=0.8,
    fp8_bandwidth=0.8,
    kv_bandwidth=0.8,
    fp8_kv_bandwidth=0.8,
    moe_expert_bandwidth=0.8,
    # Fitted to the dense H200 run (pdstack-h200-llama-3.1-8b-decode-1 and -64) before the MoE
    # runs; applied unchanged to the generations not measured.
    step_fixed_s=0.97e-3,
    step_per_layer_s=0.0,
    fp8_step_per_layer_s=0.0,
    step_per_moe_layer_s=0.0,
    step_per_sequence_s=11e-6,
    step_floor_s=0.0,
    moe_idle_step_s=0.0,  # not measured outside Hopper
    request_overhead_s=0.0,
    # aiconfigurator's p2p_latency (systems/*.yaml, "10us"); not measured here (all runs TP 1).
    allreduce_latency_s=10e-6,
    source="assumptions (reference A6, aiconfigurator); step costs fitted on the dense H200 run",
)

# Hopper, fitted to vLLM 0.26.0 on one H200 (entries pdstack-h200-*; `use: fit` named per factor).
HOPPER = Efficiency(
    generation="hopper",
    # Llama-3.1-8B prefilling 2,048-token prompts back to back, 4 per step: 41.7k tokens/s
    # (pdstack-h200-llama-3.1-8b-prefill-2048, fit). Held out: vLLM's own prefill phase of one
    # such prompt in the bench run, 47.7 ms on a GPU shared with the decode engine
    # (real-engines-h200-1gpu-bench.json; 49.2 ms estimated, attention at its own share).
    dense_gemm=0.616,
    # FP8 GEMMs come nearer the FP8 peak the wider they are (per-token work beside them, such as
    # quantizing the activations, grows with the width, the GEMMs with its square): Llama-3.1-8B
    # (hidden 4,096) prefilled at 0.56 of the FP8 peak with per-tensor scales (CUTLASS) and 0.50
    # with 128x128 blocks (FlashInfer + DeepGEMM), Llama-3.1-405B's width (16,384; 4 layers) at
    # 0.69 (pdstack-h200-*-fp8-*-prefill-2048, fit, their attention at the BF16 peak; least
    # squares on the log ratio, scripts/fit_efficiency.py). One curve for both kernel families:
    # each is about 6% off it.
    fp8_gemm=0.786,
    fp8_gemm_width=2000.0,
    attention=0.5,  # not measured apart from the dense GEMMs
    # Routed experts (TRITON fused MoE): the steady prefill rates of Qwen3-30B-A3B (24 layers and
    # whole) and Mixtral-8x7B (8 layers) on one H200 (pdstack-h200-*-prefill-2048*, fit;
    # geometric mean ratio 1). Steady: steady.py separates the one-off kernel compilation that
    # fell inside those series' window (the record's notes). Narrow experts run below it, wide
    # above (0.34 of peak would fit Qwen3-30B-A3B alone, 0.50 Mixtral alone).
    moe_experts=0.39,
    # Block-FP8 routed experts (vLLM's TRITON FP8 MoE backend): Qwen3-235B-A22B-FP8 cut to 6 layers
    # (pdstack-h200-qwen3-235b-a22b-fp8-6l-prefill-2048, fit). vLLM 0.26 ships no tuned H200
    # config for its expert shape (it logged "Using default MoE config" for E=128,N=1536,
    # dtype=fp8_w8a8,block_shape=[128,128]; vllm/model_executor/layers/fused_moe/configs/), so
    # shapes it has one for (E=128,N=768: Qwen3-30B-A3B-FP8) may run faster (wider_error says so).
    fp8_moe_experts=0.205,
    # An MLA model's whole forward: aiconfigurator 0.12's estimate for DeepSeek-V3 on the H200
    # (its measured kernels run expert GEMMs and MLA at 17-22% of peak; MFU 0.5 gave 2.7x its
    # prefill rate, issue "Planner 2"): 0.5 / 2.7, for the whole model at TP 8. Not fitted to our
    # DeepSeek-V3 cut (5 layers, 3 of them dense, TP 1): its steady rate, 121.5k tokens/s, is 2.1x
    # the 58.5k this share gives it; a cut that is mostly dense layers and a whole model of narrow
    # TP-sharded experts are different mixes, which one share over the forward cannot span
    # (docs/sizing.md).
    mla_prefill=0.185,
    bandwidth=0.8,  # aiconfigurator's factor; the dense decode steps fit with it
    # Decode steps of Llama-3.1-8B, Qwen3-30B-A3B, Mixtral-8x7B and Qwen3-235B-A22B at 1 and 64
    # sequences (pdstack-h200-*-decode-1 and -decode-64, fit), and Llama-3.1-8B and the whole
    # Qwen3-30B-A3B at 1/16/64 sequences of 128, 2,048 and 8,192 tokens of context
    # (pdstack-h200-*-decode-c*-b*, fit); least squares on the ratio. The KV read's own share:
    # FlashAttention's paged KV reads stream at nearly the peak, the weights' GEMVs do not.
    kv_bandwidth=0.95,
    # An FP8 KV cache's read (FlashAttention 3 on FP8 pages): BF16 Llama-3.1-8B with
    # --kv-cache-dtype fp8 at 1/16/64 sequences of 128-8,192 tokens (pdstack-h200-llama-3.1-8b-kv-
    # fp8-decode-*, fit): half the bytes, read at a lower share.
    fp8_kv_bandwidth=0.63,
    moe_expert_bandwidth=0.86,
    step_fixed_s=0.0,
    step_per_layer_s=24e-6,
    # FP8 weights (decode): the weight read's share and the cost per layer, by least squares on
    # Llama-3.1-8B's two FP8 kernel families and Llama-3.1-405B's width cut to 4 layers
    # (pdstack-h200-*-fp8-*-decode-*, fit): per layer the activations are quantized before each
    # FP8 GEMM, so an 8B's 32 layers cost more than BF16's.
    fp8_bandwidth=0.947,
    fp8_step_per_layer_s=46e-6,
    step_per_moe_layer_s=57e-6,
    step_per_sequence_s=16e-6,
    step_floor_s=1.77e-3,  # vLLM schedules the next step while the GPU runs this one
    # One prompt alone past the CUDA-graph sizes (512 tokens): Qwen3-30B-A3B's 2,048-token prompt
    # took 108.6 ms against 31.2 ms at 512 and 190.4 at 8,192 (pdstack-h200-qwen3-30b-a3b-single-*,
    # fit), far above its GPU time (about 29 ms: a quarter of its 8,192-token batched step). The
    # fit: least squares on the fit TTFT entries of MoE models past the graph sizes (scripts/
    # fit_efficiency.py). Per step, not per layer: 16 prompts of 128 tokens sent at once to an
    # idle engine (2,048 tokens in a step) waited 95.8 ms on Qwen3-30B-A3B cut to 24 layers and
    # 94.8 ms on the whole 48 (real-engines-h200-moe-mla.json, decode series "16"), 84.7 on
    # Qwen3-235B-A22B's 4 layers and 80.8 on DeepSeek-V3's 5; yet the same cuts' steady prefill
    # runs steps of 8,192 tokens back to back in 63.5 ms (24 layers) and 37.7 ms (Qwen3-235B-A22B):
    # a latency of the first step, not a cost of every step. The cause is not identified. Not
    # seen on Mixtral-8x7B's 8 experts (a 2,048-token prompt alone on its 8-layer cut took
    # 40.1 ms, held out: a miss, docs/sizing.md), nor on block-FP8 experts (Qwen3-235B-A22B-FP8's
    # 6-layer cut: 38.4 ms, pdstack-h200-qwen3-235b-a22b-fp8-6l-single-2048): applied to BF16
    # experts only (roofline.idle_step_floor_seconds). Dense models: no fit entry past the graph
    # sizes is below its GPU time, so none is applied.
    moe_idle_step_s=97.3e-3,
    # TTFT of one such prompt alone (pdstack-h200-llama-3.1-8b-ttft-2048, fit: 60.45 ms) less its
    # prefill at the shares here (49.2 ms): scripts/fit_efficiency.py.
    request_overhead_s=11.3e-3,
    allreduce_latency_s=10e-6,  # as DEFAULT: no TP > 1 run measured
    source=(
        "fitted to vLLM 0.26.0 on one H200 (measurements pdstack-h200-*, use: fit; "
        "docs/sizing.md 'Efficiency factors')"
    ),
)

# Dense models below this many billion parameters miss the factors fitted on 8B (wider_error).
SMALL_DENSE_B = 5.0

# GPU catalog names of each measured generation; any other GPU gets DEFAULT.
GENERATIONS = {"H100-80GB": HOPPER, "H100-80GB-PCIE": HOPPER, "H200": HOPPER}


def for_gpu(gpu: Gpu) -> Efficiency:
    return GENERATIONS.get(gpu.name, DEFAULT)


def wider_error(moe: bool, params_b: float, concurrency: int, fp8: bool) -> list[str]:
    """The classes where the estimates miss their held-out bands (docs/sizing.md, "Where the model
    is known to be off"), for a model kind and size (billions of parameters) and a workload: said
    beside the plan."""
    notes = []
    if moe and not fp8 and concurrency == 1:  # the floor is for BF16 experts (roofline)
        notes.append(
            "one prompt at a time on an MoE model: past vLLM's CUDA-graph sizes a prompt alone "
            "waits at least about 97 ms for its first step (fitted on Qwen3-30B-A3B, whose "
            "2,048-token prompt took 108.6 ms; vLLM 0.26, one H200); Mixtral-8x7B's 8 experts do "
            "not show that floor, so its TTFT alone may be that much lower"
        )
    if moe and fp8:
        notes.append(
            "an FP8 MoE model: its experts' share was fitted on an expert shape vLLM 0.26 has no "
            "tuned H200 kernel config for (Qwen3-235B-A22B-FP8); shapes it has one for run faster "
            "than planned, and that cut's decode ran 15-40% faster than planned at 16-64 "
            "sequences and 15-20% slower at one (vLLM 0.26, one H200)"
        )
    if not moe and params_b < SMALL_DENSE_B:
        notes.append(
            "a small dense model: held-out Llama-3.2-3B took up to 1.6x the estimated TTFT and "
            "1.2x the decode step at 1-16 sequences of short context (vLLM 0.26, one H200); "
            "expect TTFT and ITL that much higher"
        )
    return notes
