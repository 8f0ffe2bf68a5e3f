"""The planner's arithmetic against published figures (each test names its source: a model's
config.json, llm-d-planner 0.3.3's accuracy report, aiconfigurator) and its invariants (property
tests)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdctl.models import catalog, memory, pods
from pdctl.models.config import ModelArch, SlidingWindow
from pdctl.plan import efficiency, measurements, objective, roofline, sizing
from pdctl.plan.layout import DoesNotFit, Request, Workload
from pdctl.plan.report import plan_dict


def arch(name: str) -> ModelArch:
    found = catalog.find_model(name)
    assert found is not None
    return found.arch


# vLLM's default --max-num-batched-tokens on an H100 or H200 (engine/arg_utils.py)
BUDGET = 8192


def request(model: str, gpu: str, gpus: int, **kw: object) -> Request:
    return Request(arch=arch(model), gpu=catalog.gpu(gpu), gpus=gpus, **kw)  # type: ignore[arg-type]


# ---- KV bytes per token (from each model's config.json)


@pytest.mark.parametrize(
    ("model", "bf16", "fp8"),
    [
        ("llama-3.1-8b", 131072, 65536),
        ("llama-3.1-70b", 327680, 163840),
        ("qwen2.5-7b", 57344, 28672),
        ("deepseek-v3", 70272, 35136),
        ("llama-3.1-405b", 516096, 258048),
        ("llama-3.2-1b", 32768, 16384),
        ("qwen3-235b-a22b", 192512, 96256),
        ("gpt-oss-20b", 49152, 24576),
    ],
)
def test_kv_bytes_per_token_whole_model(model: str, bf16: int, fp8: int) -> None:
    assert memory.kv_bytes_per_token(arch(model)) == bf16
    assert memory.kv_bytes_per_token(arch(model), "fp8") == fp8


def test_gqa_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    qwen = arch("qwen2.5-7b")  # 4 KV heads
    per_gpu = [memory.kv_layout(qwen, tp, budget=BUDGET).per_token for tp in (1, 2, 4, 8)]
    assert per_gpu == [57344, 28672, 14336, 14336]  # one head per rank from TP 4 on


def test_mla_latent_is_not_split_by_tp() -> None:
    deepseek = arch("deepseek-v3")
    assert {memory.kv_layout(deepseek, tp, budget=BUDGET).per_token for tp in (1, 2, 4, 8)} == {
        70272
    }


def test_sliding_window_layers_read_only_their_window() -> None:
    oss = arch("gpt-oss-120b")  # 18 of 36 layers slide over 128 tokens
    layout = memory.kv_layout(oss, 1, budget=BUDGET)
    half = 73728 // 2  # bytes per token of 18 layers
    assert (layout.full_groups, layout.window_groups) == (1, 1)
    assert layout.block_bytes == half * memory.BLOCK_SIZE
    long, longer = layout.read_bytes(8192), layout.read_bytes(16384)
    assert longer - long == half * 8192  # a decode step reads only the full-attention half more
    assert layout.read_bytes(8192) == half * (8192 + 9 * 16)  # the window: 8 blocks and one more
    flat = memory.kv_layout(oss, 1, hybrid=False, budget=BUDGET)
    assert flat.sequence_bytes(16384) == flat.read_bytes(16384) == 73728 * 16384


def test_a_sliding_window_group_reserves_the_window_and_the_tokens_in_flight() -> None:
    """vLLM 0.26 (kv_cache_interface.SlidingWindowSpec.max_admission_blocks_per_request): a
    sliding-window group reserves cdiv(window - 1 + in-flight tokens, 16) + 1 blocks a sequence,
    the in-flight tokens two steps' budget (async scheduling, config/vllm.py
    max_in_flight_tokens). gpt-oss's 128-token window at the 8,192-token budget: 16,511 tokens,
    1,033 blocks; a shorter sequence holds its own blocks in both groups."""
    layout = memory.kv_layout(arch("gpt-oss-20b"), 1, budget=BUDGET)
    assert layout.window_reserve == 127 + 2 * 8192
    assert layout.sequence_blocks(2048) == 2 * 128
    assert layout.sequence_blocks(131072) == 8192 + 1033
    assert layout.request_blocks(131072) == 8192 + 1033
    # the length caps the reservation, and vLLM's start-up count keeps its extra block
    assert layout.request_blocks(9216) == 576 + 577
    assert layout.sequence_blocks(9216) == 576 + 576
    assert memory.in_flight_tokens(arch("gpt-oss-20b"), BUDGET, pp=2) == 2 * BUDGET  # V1 runner
    assert memory.in_flight_tokens(arch("mistral-7b-v0.1"), BUDGET, pp=2) == 3 * BUDGET  # V2


@pytest.mark.parametrize(
    ("model", "pool", "max_model_len", "logged"),
    [  # vLLM 0.26.0 on one H200, benchmarks/records/real-engines-h200-accuracy-*.json
        ("gpt-oss-20b", 2 * memory.GiB, 9216, 43_650),
        ("mistral-7b-v0.1", 2 * memory.GiB, 9216, 16_355),
        ("llama-3.1-8b", 70_866_960_384, 9216, 540_672),
        ("llama-3.2-3b", 17_179_869_184, 9216, 149_792),
    ],
)
def test_kv_tokens_are_what_vllm_logs(
    model: str, pool: int, max_model_len: int, logged: int
) -> None:
    """vLLM 0.26 logs its concurrency at --max-model-len times that length
    (kv_cache_utils.get_kv_cache_capacity): the same figure as blocks x 16 for full attention,
    fewer where a sliding-window group reserves a block more than the length."""
    layout = memory.kv_layout(arch(model), 1, budget=BUDGET)
    assert layout.tokens(pool, max_model_len) == logged


def test_gpt_oss_at_utilization_09_logs_what_vllm_does() -> None:
    """vLLM 0.26.0, one H200, gpt-oss-20b at --gpu-memory-utilization 0.9 and the default
    max-model-len (benchmarks/records/real-engines-h200-gpt-oss-pool.json): "GPU KV cache size:
    4,233,249 tokens", "Maximum concurrency for 131,072 tokens per request: 32.30x". The count is
    about twice the full-attention count of the same pool (the sliding half reserves 1,033 blocks
    a request, not 8,192), so blocks // groups x 16 (vLLM before 0.26) is 1.76x off."""
    oss = arch("gpt-oss-20b")
    pool = memory.memory(oss, catalog.gpu("H200"), 1, 0.9).kv_pool * memory.GiB
    layout = memory.kv_layout(oss, 1, budget=BUDGET)
    assert layout.tokens(pool, 131072) == pytest.approx(4_233_249, rel=0.03)
    assert layout.concurrency(pool, 131072) == pytest.approx(32.30, rel=0.03)
    assert layout.blocks(pool) // layout.groups * memory.BLOCK_SIZE < 0.6 * 4_233_249


def test_hybrid_groups_pad_the_last_group_of_a_type_as_vllm_does() -> None:
    """kv_cache_utils._get_kv_cache_groups_uniform_page_size: 52 sliding and 10 full layers (a
    5:1 pattern) make 6 + 1 groups of 10 layers, 8 of them padding; 12 sliding and 13 full make
    one group of 13 each; one attention type is one group of every layer."""
    assert memory.kv_groups(10, 52) == (10, 1, 6)
    assert memory.kv_groups(13, 12) == (13, 1, 1)
    assert memory.kv_groups(18, 18) == (18, 1, 1)
    assert memory.kv_groups(32, 0) == (32, 1, 0)
    assert memory.kv_groups(0, 32) == (32, 0, 1)
    five_to_one = replace(arch("gpt-oss-120b"), layers=62, sliding_window=SlidingWindow(1024, 52))
    layout = memory.kv_layout(five_to_one, 1, budget=BUDGET)
    per_layer = 2 * 8 * 64 * 2
    assert layout.block_bytes == 10 * per_layer * memory.BLOCK_SIZE
    pool = 20 * memory.GiB
    # One request of 131,072 tokens: 8,192 blocks in the full group, 1,089 in each of 6 windowed
    blocks = pool // layout.block_bytes
    assert layout.concurrency(pool, 131072) == blocks / (8192 + 6 * 1089)


def test_disabling_the_hybrid_manager_keeps_an_all_sliding_model_windowed() -> None:
    """unify_hybrid_kv_cache_specs turns sliding-window layers into full attention only when both
    types are present: Mistral-7B-v0.1 (every layer windowed) keeps its window."""
    mistral = arch("mistral-7b-v0.1")
    on = memory.kv_layout(mistral, 1, budget=BUDGET)
    off = memory.kv_layout(mistral, 1, hybrid=False, budget=BUDGET)
    assert on == off
    assert on.read_bytes(32768) == on.read_bytes(4096 + 16)
    assert on.sequence_bytes(32768) == on.sequence_bytes(4095 + 2 * BUDGET + 16)
    assert on.longest(on.request_bytes(32768)) == 1 << 30  # any length once the window fits


# ---- memory: vLLM's measured figure and the reference's worked examples


def test_llama_8b_on_one_h100_matches_vllms_measured_kv_pool() -> None:
    """llm-d-planner 0.3.3's accuracy report: vLLM 0.19 measured 58.11 GiB = 476,016 tokens for
    Llama-3.1-8B, TP 1, --gpu-memory-utilization 0.95 on an H100 (weights 14.99, activation 1.89,
    non-torch 0.25)."""
    llama = arch("llama-3.1-8b")
    used = memory.memory(llama, catalog.gpu("H100-80GB"), 1, 0.95)
    assert used.kv_pool == pytest.approx(58.11, rel=0.05)
    tokens = memory.kv_layout(llama, 1, budget=BUDGET).tokens(used.kv_pool * memory.GiB, 8192)
    assert tokens == pytest.approx(476_016, rel=0.05)
    assert used.weights == pytest.approx(14.99, rel=0.01)


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "weights", "pool"),
    [  # worked capacity examples by the same formula (util 0.9; docs/sizing.md)
        ("llama-3.1-8b", "H100-80GB", 1, 15.0, 54.2),
        ("llama-3.1-70b", "H100-80GB", 4, 32.9, 34.4),
        ("llama-3.1-70b", "H100-80GB", 8, 16.4, 50.9),
        ("llama-3.1-70b", "H200", 2, 65.7, 56.1),
        ("qwen3-32b", "L40S", 2, 30.5, 5.1),
        ("qwen2.5-7b", "L4", 1, 14.2, 3.1),
    ],
)
def test_worked_capacity_examples(
    model: str, gpu: str, tp: int, weights: float, pool: float
) -> None:
    used = memory.memory(arch(model), catalog.gpu(gpu), tp, 0.9)
    assert used.weights == pytest.approx(weights, abs=0.1)
    assert used.kv_pool == pytest.approx(pool, abs=0.15)


def test_valid_tps_follow_heads_and_kv_heads() -> None:
    assert memory.valid_tps(arch("qwen2.5-7b"), 8) == [1, 2, 4]  # 28 heads
    assert memory.valid_tps(arch("llama-3.1-70b"), 8) == [1, 2, 4, 8]
    assert memory.valid_tps(arch("llama-3.2-3b"), 8) == [1, 2, 4, 8]  # 24 heads, 8 KV heads


# ---- the roofline against a hand calculation (docs/sizing.md, "Compared with a hand calculation")


def test_roofline_close_to_the_reference_illustration() -> None:
    """A6: Llama-3.1-70B BF16 on H100, ISL 8000, MFU 0.5, bandwidth 0.8, B 64: a TP4 prefill
    engine does about 14k tokens/s, a TP4 decode step takes about 29 ms. Ours adds attention
    FLOPs and all-reduces, so it is a little slower, and Hopper's step costs per layer and per
    sequence measured on the H200 (pdctl/plan/efficiency.py), which the illustration leaves out:
    about 3 ms of a 64-sequence step of 80 layers."""
    llama, h100 = arch("llama-3.1-70b"), catalog.gpu("H100-80GB")
    prefill = 8000 / roofline.prefill_seconds(llama, h100, 4, 8000)
    # the illustration's MFU 0.5, scaled to Hopper's dense share fitted on the H200 (0.616)
    scale = efficiency.for_gpu(h100).dense_gemm / 0.5
    assert 0.8 * 14000 * scale <= prefill <= 14000 * scale
    step = roofline.decode_step_seconds(
        llama, h100, 4, 64, 8250, memory.kv_layout(llama, 4, budget=BUDGET)
    )
    assert 29 <= step * 1000 <= 29 * 1.2


def test_70b_on_8_h100_sizes_prefill_for_the_prompt() -> None:
    """A6 found 1P(TP4)+1D(TP4) the only layout keeping a long context on both roles. Prefill
    engines only need the prompt: 2 x TP2 prefill (each holds 10k tokens, more than 8000 x 1.25)
    + 1 x TP4 decode gives more output tokens/s per GPU, and --max-model-len is what the prefill
    engines hold (one value for both pools), which still admits the workload."""
    req = request("llama-3.1-70b", "h100", 8, workload=Workload(8000, 500))
    plan = sizing.plan(req)
    assert (plan.prefill.engine.tp, plan.prefill.replicas) == (2, 2)
    assert (plan.decode.engine.tp, plan.decode.replicas) == (4, 1)
    assert plan.prefill.engine.tp < plan.decode.engine.tp
    assert plan.estimates.bottleneck == "prefill"
    fitting = [e for e in sizing.engines(req) if e.fits(8500)]
    old = sizing._evaluate(req, fitting[1], 1, fitting[1], 1)  # 1 x TP4 + 1 x TP4
    assert (old.prefill.engine.tp, old.decode.engine.tp) == (4, 4)
    assert plan.estimates.output_tokens_per_s_per_gpu > old.estimates.output_tokens_per_s_per_gpu
    # the prefill engines hold the prompt plus margin and the rendered --max-model-len; the
    # longest prompt decode admits with this output length, prefill admits too
    prefill = plan.prefill.engine
    assert prefill.layout.longest(prefill.pool_bytes) >= objective.prompt_floor(req) >= 10000
    assert prefill.fits(plan.max_model_len)
    assert plan.max_model_len == 10240
    # --max-model-len asks for a longer context: prefill engines are sized for it again
    longer = sizing.plan(replace(req, max_model_len=32768))
    assert longer.prefill.engine.tp == 4 and longer.max_model_len == 32768


def test_moe_decode_reads_only_the_experts_a_batch_touches() -> None:
    assert roofline.experts_touched(256, 8, 1) == pytest.approx(8)
    assert roofline.experts_touched(256, 8, 1000) == pytest.approx(256, rel=0.01)
    deepseek, h200 = arch("deepseek-v3"), catalog.gpu("H200")
    layout = memory.kv_layout(deepseek, 8, budget=BUDGET)
    one = roofline.decode_step_seconds(deepseek, h200, 8, 1, 4096, layout)
    many = roofline.decode_step_seconds(deepseek, h200, 8, 64, 4096, layout)
    assert many > 2 * one  # 64 sequences touch most experts; one touches 8 of 256


def test_fp8_gemms_come_nearer_the_peak_the_wider_each_gpus_share() -> None:
    """Hopper's FP8 prefill share: fp8_gemm x w / (w + fp8_gemm_width), w the hidden size over
    TP (the fitted Llama-3.1-8B at 4,096 wide and Llama-3.1-405B's width at 16,384); BF16 keeps
    its one share at any width."""
    h200, eff = catalog.gpu("H200"), efficiency.HOPPER
    fp8_8b = replace(arch("llama-3.1-8b"), weight_dtype="fp8")
    fp8_405b = replace(arch("llama-3.1-405b"), weight_dtype="fp8")
    at_8b = eff.fp8_gemm * 4096 / (4096 + eff.fp8_gemm_width)
    assert roofline._gemm_share(fp8_8b, h200, 1) == pytest.approx(at_8b)
    assert roofline._gemm_share(fp8_405b, h200, 4) == pytest.approx(at_8b)  # 16,384 over TP 4
    assert roofline._gemm_share(fp8_405b, h200, 1) > 1.3 * at_8b
    assert roofline._gemm_share(arch("llama-3.1-405b"), h200, 1) == eff.dense_gemm
    # a prompt's attention runs at the BF16 peak whatever the weights (an FP8 8B's 8,192-token
    # prompt alone took 19-25 ms more than attention at the FP8 peak gave)
    attention = roofline.attention_flops(fp8_8b, 8192)
    with_it = roofline.prefill_compute_seconds(fp8_8b, h200, 1, 8192, attention)
    without = roofline.prefill_compute_seconds(fp8_8b, h200, 1, 8192, 0.0)
    assert with_it - without == pytest.approx(attention / (h200.bf16_tflops * 1e12 * eff.attention))
    # the 8B's FP8 prefill (73.7k tokens/s measured) is faster than BF16's (41.7k) by that share
    bf16 = roofline.prefill_seconds(arch("llama-3.1-8b"), h200, 1, 2048, 4)
    fp8 = roofline.prefill_seconds(fp8_8b, h200, 1, 2048, 4)
    assert 1.6 < bf16 / fp8 < 1.8


def test_fp8_weights_and_an_fp8_kv_cache_have_their_own_decode_shares() -> None:
    """A decode step of FP8 weights reads them at fp8_bandwidth and pays fp8_step_per_layer_s a
    layer; an FP8 KV cache is read at fp8_kv_bandwidth, not at the BF16 cache's share."""
    h200, eff = catalog.gpu("H200"), efficiency.HOPPER
    llama = arch("llama-3.1-8b")
    bf16_kv = memory.kv_layout(llama, 1, budget=BUDGET)
    fp8_kv = memory.kv_layout(llama, 1, kv_cache_dtype="fp8", budget=BUDGET)
    assert fp8_kv.fp8 and not bf16_kv.fp8
    same_bytes = replace(fp8_kv, fp8=False)  # the FP8 cache's bytes read at the BF16 share
    kv_read = 64 * fp8_kv.read_bytes(8192) / (h200.hbm_tbps * 1e12)
    step = roofline.decode_step_seconds(llama, h200, 1, 64, 8192, fp8_kv)
    as_bf16 = roofline.decode_step_seconds(llama, h200, 1, 64, 8192, same_bytes)
    assert step - as_bf16 == pytest.approx(
        kv_read * (1 / eff.fp8_kv_bandwidth - 1 / eff.kv_bandwidth)
    )
    fp8 = replace(llama, weight_dtype="fp8")
    one = roofline.decode_step_seconds(fp8, h200, 1, 1, 128, bf16_kv)
    read = roofline.weights_read_seconds(fp8, h200, 1, 1)
    assert read == pytest.approx(
        (memory.weight_bytes(fp8) - 2 * memory.params(fp8).embedding)
        / (h200.hbm_tbps * 1e12 * eff.fp8_bandwidth)
    )
    kv_one = bf16_kv.read_bytes(128) / (h200.hbm_tbps * 1e12 * eff.kv_bandwidth)
    overhead = eff.fp8_step_per_layer_s * 32 + eff.step_per_sequence_s
    assert one == pytest.approx(read + kv_one + overhead)


def test_the_moe_idle_step_floor_is_for_bf16_experts() -> None:
    """Qwen3-235B-A22B's BF16 cut waited the floor for a 2,048-token prompt alone; its block-FP8
    cut did not (38.4 ms, pdstack-h200-qwen3-235b-a22b-fp8-6l-single-2048)."""
    h200, qwen = catalog.gpu("H200"), arch("qwen3-235b-a22b")
    assert roofline.idle_step_floor_seconds(qwen, h200, 2048) == efficiency.HOPPER.moe_idle_step_s
    fp8 = replace(qwen, weight_dtype="fp8")
    assert roofline.idle_step_floor_seconds(fp8, h200, 2048) == 0.0


# ---- refusals


def test_70b_on_one_l4_is_refused_with_the_numbers() -> None:
    with pytest.raises(DoesNotFit) as caught:
        sizing.plan(request("llama-3.1-70b", "L4", 1), list(catalog.gpus().values()))
    error = caught.value
    assert error.exit_code == 1
    assert "needs TP16 per engine on L4" in error.message
    assert "more GPUs per engine than a node has" in error.message
    assert any("TP8 on L4" in line and "KV pool -0.6 GiB" in line for line in error.details)
    assert "H100-80GB" in (error.hint or "") or "B200" in (error.hint or "")


def test_more_gpus_per_engine_than_gpus_per_node_spans_nodes() -> None:
    # DeepSeek-V3 needs TP16 on H100-80GB: two engines of two 8-GPU nodes need 32 GPUs.
    with pytest.raises(DoesNotFit, match="more GPUs per engine than a node has"):
        sizing.plan(request("deepseek-v3", "H100-80GB", 16))
    spanning = sizing.plan(request("deepseek-v3", "H100-80GB", 32))
    assert spanning.decode.engine.tp == 16
    assert sizing.nodes_per_engine(spanning.request, spanning.decode.engine) == 2
    assert any("spans 2 nodes" in note for note in spanning.notes)
    assert plan_dict(spanning)["roles"]["decode"]["nodes_per_engine"] == 2
    # the same request fits when a node has 16 GPUs (an NVL-style node)
    plan = sizing.plan(request("deepseek-v3", "H100-80GB", 32, gpus_per_node=16))
    assert plan.decode.engine.tp == 16


def test_too_few_gpus_for_two_engines_names_the_smallest_layout() -> None:
    with pytest.raises(
        DoesNotFit, match="the smallest is 1 prefill \\+ 1 decode engine of TP2 = 4"
    ):
        sizing.plan(request("llama-3.1-70b", "H100-80GB", 3))
    with pytest.raises(DoesNotFit, match="= 2 GPUs"):
        sizing.plan(request("llama-3.1-8b", "H100-80GB", 1))


def test_workload_longer_than_the_model_is_refused() -> None:
    with pytest.raises(DoesNotFit, match="more than .*context"):
        sizing.plan(request("qwen2.5-7b", "H100-80GB", 2, workload=Workload(32000, 2000)))


def test_connector_constraints_shape_the_layout() -> None:
    same_tp = sizing.plan(request("llama-3.1-70b", "H100-80GB", 12, hetero_tp=False))
    assert same_tp.prefill.engine.tp == same_tp.decode.engine.tp
    pair = sizing.plan(request("llama-3.1-8b", "H100-80GB", 8, one_pair=True))
    assert (pair.prefill.replicas, pair.decode.replicas) == (1, 1)


def test_targets_move_the_layout() -> None:
    loose = sizing.plan(request("llama-3.1-8b", "H100-80GB", 2))
    tight = sizing.plan(request("llama-3.1-8b", "H100-80GB", 2, workload=Workload(itl_ms=10)))
    assert tight.estimates.itl_ms <= 10 < loose.estimates.itl_ms
    assert tight.estimates.decode_batch < loose.estimates.decode_batch
    missed = sizing.plan(request("llama-3.1-8b", "H100-80GB", 2, workload=Workload(rate=100)))
    assert any("--rate 100/s is not met" in w for w in missed.warnings)


def test_verdicts() -> None:
    long_prompts = Workload(input_len=16000, output_len=400)
    assert sizing.plan(request("llama-3.1-70b", "H100-80GB", 8, workload=long_prompts)).verdict == (
        "likely"
    )
    chat = Workload(input_len=512, output_len=256)
    unlikely = sizing.plan(request("llama-3.1-8b", "H100-80GB", 2, workload=chat))
    assert unlikely.verdict == "unlikely"
    assert any("short" in reason for reason in unlikely.reasons)
    low_load = Workload(rate=0.1)
    assert sizing.plan(request("llama-3.1-8b", "H100-80GB", 2, workload=low_load)).verdict == (
        "unlikely"
    )


def test_pod_sizing_holds_the_weights_and_the_checkpoint() -> None:
    deepseek = arch("deepseek-v3")
    pod = pods.pod(deepseek, 8)
    assert pod.memory_gib >= pod.weights_gib
    assert pod.cache_gib >= pod.checkpoint_gib > memory.weight_bytes(deepseek) / memory.GiB
    assert (pod.cpu, pod.shm_gib) == (16, 16)


# ---- invariants

MODELS = sorted(catalog.models())
GPUS = sorted(catalog.gpus())


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    gpu=st.sampled_from(GPUS),
    gpus=st.integers(1, 24),
    input_len=st.integers(64, 16384),
    output_len=st.integers(1, 4096),
    utilization=st.sampled_from([0.8, 0.9, 0.95]),
    kv=st.sampled_from(["auto", "fp8"]),
)
def test_every_plan_fits_what_it_was_given(
    model: str, gpu: str, gpus: int, input_len: int, output_len: int, utilization: float, kv: str
) -> None:
    req = Request(
        arch=arch(model),
        gpu=catalog.gpu(gpu),
        gpus=gpus,
        workload=Workload(input_len, output_len),
        utilization=utilization,
        kv_cache_dtype=kv,
    )
    try:
        plan = sizing.plan(req)
    except DoesNotFit as refused:
        assert refused.exit_code == 1 and refused.message
        return
    assert plan.gpus_used <= gpus
    assert req.workload.total_len <= plan.max_model_len <= req.arch.max_positions
    for role in (plan.prefill, plan.decode):
        engine = role.engine
        assert role.replicas >= 1
        assert engine.tp <= req.gpus_per_node or engine.tp % req.gpus_per_node == 0
        assert engine.memory.kv_pool > 0
        assert engine.layout.fits(engine.pool_bytes, plan.max_model_len)
    e = plan.estimates
    assert (
        0
        < e.requests_per_s
        <= min(
            plan.prefill.replicas * e.prefill_requests_per_s,
            plan.decode.replicas * e.decode_requests_per_s,
        )
    )
    assert plan_dict(plan)["kv_bytes_per_token"] == memory.kv_bytes_per_token(req.arch)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS))
def test_more_tp_never_means_less_kv_pool_per_gpu(model: str, gpu: str) -> None:
    a, g = arch(model), catalog.gpu(gpu)
    tps = memory.valid_tps(a, 8)
    pools = [memory.memory(a, g, tp, 0.9).kv_pool for tp in tps]
    per_token = [memory.kv_layout(a, tp, budget=BUDGET).per_token for tp in tps]
    # pool per GPU grows with TP (only the TP1 -> TP2 step pays the NCCL buffers)
    assert all(b >= a_ - 2 for a_, b in zip(pools, pools[1:], strict=False))
    assert per_token == sorted(per_token, reverse=True)


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(2, 32))
def test_more_gpus_never_lower_throughput(gpus: int) -> None:
    base = request("llama-3.1-8b", "H100-80GB", gpus)
    more = replace(base, gpus=gpus + 2)
    assert (
        sizing.plan(more).estimates.requests_per_s
        >= 0.99 * sizing.plan(base).estimates.requests_per_s
    )


def test_the_plan_states_its_wider_error_where_the_estimates_still_miss() -> None:
    """One prompt at a time on an MoE model and a small dense model are outside the held-out
    bands (docs/sizing.md, "Where the model is known to be off"); a busy 8B is not."""
    alone = sizing.plan(request("qwen3-30b-a3b", "H200", 2, workload=Workload(2048, 256, 1)))
    assert any("97 ms for its first step" in w for w in alone.notes)
    small = sizing.plan(request("llama-3.2-3b", "H200", 2, workload=Workload(128, 128, 16)))
    assert any("Llama-3.2-3B took up to 1.6x" in w for w in small.notes)
    assert not any("97 ms" in w for w in small.notes)
    busy = sizing.plan(request("llama-3.1-8b", "H200", 2, workload=Workload(8192, 256, 64)))
    assert not any("97 ms" in w or "Llama-3.2-3B" in w for w in busy.notes)
    # FP8 experts: their own note, and not the BF16 experts' floor (roofline applies none)
    fp8 = Request(
        arch=replace(arch("qwen3-30b-a3b"), weight_dtype="fp8"),
        gpu=catalog.gpu("H200"),
        gpus=2,
        workload=Workload(2048, 256, 1),
    )
    notes = sizing.plan(fp8).notes
    assert any("an FP8 MoE model" in w for w in notes) and not any("97 ms" in w for w in notes)


def test_cuda_graph_sizes_are_vllms_defaults() -> None:
    """vllm/config/vllm.py: min(2 x max-num-seqs, 512, the token budget); gpt-oss sets 1024
    (GptOssForCausalLMConfig)."""
    h200, l4 = catalog.gpu("H200"), catalog.gpu("L4")
    assert roofline.max_cudagraph_tokens(arch("qwen3-30b-a3b"), h200) == 512
    assert roofline.max_cudagraph_tokens(arch("gpt-oss-20b"), h200) == 1024
    assert roofline.max_cudagraph_tokens(arch("gpt-oss-20b"), l4) == 1024
    assert roofline.max_cudagraph_tokens(arch("llama-3.1-8b"), l4) == 512


def test_an_moe_prompt_alone_past_the_graph_sizes_waits_for_the_idle_step_floor() -> None:
    """Qwen3-30B-A3B on one H200 (benchmarks/records/real-engines-h200-accuracy-moe.json, fit):
    one 2,048-token prompt alone took 108.6 ms, 2.7x its GPU time, 512 tokens 31.2 ms; the
    floor is the first step's on an idle engine, so a busy engine's rate keeps its GPU time."""
    qwen, h200 = arch("qwen3-30b-a3b"), catalog.gpu("H200")
    floor = efficiency.for_gpu(h200).moe_idle_step_s
    overhead = roofline.request_overhead_seconds(h200)
    for tokens, measured in ((512, 31.2e-3), (2048, 108.6e-3)):
        prefill = roofline.prefill_seconds(qwen, h200, 1, tokens)
        alone = roofline.alone_ttft_seconds(qwen, h200, tokens, prefill)
        assert alone == pytest.approx(measured, rel=0.2)
    assert roofline.alone_ttft_seconds(qwen, h200, 2048, 0.03) == floor + overhead
    # its 24-layer cut ran busy steps of 4 x 2,048 tokens in 63.5 ms (real-engines-h200-moe-mla)
    busy = roofline.prefill_seconds(measurements.cut(qwen, 24), h200, 1, 2048, 4)
    assert busy < floor and busy == pytest.approx(63.5e-3, rel=0.15)
    llama = arch("llama-3.2-3b")  # dense: no floor
    assert roofline.alone_ttft_seconds(llama, h200, 2048, 0.03) == 0.03 + overhead
    plan = sizing.plan(request("qwen3-30b-a3b", "H200", 2, workload=Workload(2048, 256, 1)))
    assert plan.estimates.ttft_unqueued_ms > 1000 * (floor + overhead)
    assert plan.aggregated is not None and plan.aggregated.batch == 1
    assert plan.aggregated.ttft_unqueued_ms >= 1000 * (floor + overhead)
