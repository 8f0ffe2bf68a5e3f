"""One scheduler step of one engine (pdctl.plan.step): the roofline's figures for steps of prompts
alone and of decode sequences alone, mixed steps that read the weights once, pipeline stages, and
the per-step use a simulator of an engine makes of it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from pdctl.models import catalog, memory
from pdctl.plan import roofline
from pdctl.plan.layout import Request, Workload
from pdctl.plan.sizing import plan
from pdctl.plan.step import Chunk, EngineStep, prompt_chunks

MODELS = sorted(catalog.models())
GPUS = ["H100-80GB", "H200", "A100-80GB", "L40S", "MI300X"]


def _arch(name: str):  # type: ignore[no-untyped-def]
    return catalog.models()[name].arch


def _engines(name: str):  # type: ignore[no-untyped-def]
    arch = _arch(name)
    for gpu_name in GPUS:
        gpu = catalog.gpu(gpu_name)
        for tp in memory.valid_tps(arch, 8):
            yield arch, gpu, tp


@pytest.mark.parametrize("name", MODELS)
def test_a_step_of_prompts_alone_costs_the_roofline_prefill(name: str) -> None:
    for arch, gpu, tp in _engines(name):
        engine = EngineStep(arch, gpu, tp)
        for tokens in (128, 4096):
            one = engine.cost(prefill_chunks=[Chunk(tokens)]).seconds
            assert one == roofline.prefill_seconds(arch, gpu, tp, tokens)
            four = engine.cost(prefill_chunks=[Chunk(tokens)] * 4).seconds
            assert four == pytest.approx(roofline.prefill_seconds(arch, gpu, tp, tokens, 4), 1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_a_step_of_decode_sequences_alone_costs_the_roofline_decode_step(name: str) -> None:
    for arch, gpu, tp in _engines(name):
        layout = memory.kv_layout(arch, tp, budget=roofline.default_max_num_batched_tokens(gpu))
        engine = EngineStep(arch, gpu, tp, layout=layout)
        for batch in (1, 64):
            for context in (128, 8192):
                step = engine.cost(decode_contexts=[context] * batch).seconds
                assert step == roofline.decode_step_seconds(arch, gpu, tp, batch, context, layout)


# a dense model, two MoE, an MLA model and one with sliding-window layers
KINDS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-120b",
]


def _engine(name: str, gpu: str = "H200") -> EngineStep:
    arch = _arch(name)
    tp = next(tp for tp in memory.valid_tps(arch, 8) if engines_fit(arch, tp, gpu))
    return EngineStep(arch, catalog.gpu(gpu), tp)


def engines_fit(arch, tp: int, gpu: str) -> bool:  # type: ignore[no-untyped-def]
    return memory.memory(arch, catalog.gpu(gpu), tp, 0.9).kv_pool > 4


@pytest.mark.parametrize("name", KINDS)
def test_more_tokens_or_more_context_is_never_cheaper(name: str) -> None:
    engine = _engine(name)
    decoding = [2048] * 32
    last = 0.0
    for tokens in (1, 16, 256, 1024, 4096, 8000):
        cost = engine.cost([Chunk(tokens, 1000)], decoding).seconds
        assert cost >= last
        last = cost
    last = 0.0
    for before in (0, 512, 4096, 32000):
        cost = engine.cost([Chunk(2048, before)], decoding).seconds
        assert cost >= last
        last = cost
    last = 0.0
    for batch in (0, 1, 8, 64, 256):
        cost = engine.cost([Chunk(512)], [4096] * batch).seconds
        assert cost >= last
        last = cost
    last = 0.0
    for context in (128, 2048, 16384, 100000):
        cost = engine.cost([Chunk(512)], [context] * 16).seconds
        assert cost >= last
        last = cost
    assert engine.cost([Chunk(2048, 4096)]).attention_s > engine.cost([Chunk(2048)]).attention_s


@pytest.mark.parametrize("name", KINDS)
def test_a_mixed_step_reads_the_weights_once(name: str) -> None:
    engine = _engine(name)
    for tokens, batch in ((64, 64), (2048, 16), (8000, 192)):
        chunks, decoding = [Chunk(tokens, 1024)], [4096] * batch
        prefill = engine.cost(prefill_chunks=chunks)
        decode = engine.cost(decode_contexts=decoding)
        mixed = engine.cost(chunks, decoding)
        assert mixed.seconds < prefill.seconds + decode.seconds
        assert mixed.seconds >= max(prefill.seconds, decode.seconds)
        saved = prefill.seconds + decode.seconds - mixed.seconds
        weights = roofline.weights_read_seconds(engine.arch, engine.gpu, engine.tp, batch)
        assert saved == pytest.approx(mixed.shared_s, rel=1e-9)
        assert mixed.shared_s >= min(prefill.seconds, weights) * (1 - 1e-9)
        parts = mixed.gemm_s + mixed.attention_s + mixed.allreduce_s + mixed.decode_s
        assert parts - mixed.shared_s + mixed.pipeline_s == pytest.approx(mixed.seconds)
        assert mixed.gemm_s > 0 and mixed.attention_s > 0


def test_a_small_chunk_rides_free_in_a_memory_bound_decode_step() -> None:
    engine = _engine("meta-llama/Llama-3.1-70B-Instruct")
    decoding = [4096] * 64
    arch, gpu, tp = engine.arch, engine.gpu, engine.tp
    chunk_bytes = roofline.allreduce_seconds(arch, gpu, tp, 32) - roofline.allreduce_seconds(
        arch, gpu, tp, 0
    )  # its all-reduces' bytes: their latency is the decode step's
    assert engine.cost([Chunk(32)], decoding).seconds == pytest.approx(
        engine.cost((), decoding).seconds + chunk_bytes, rel=1e-12
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_prompt_in_chunks_costs_its_prefill_in_one(name: str) -> None:
    """Attention telescopes over the chunks (pairs each chunk adds to its prompt) and GEMMs are
    linear in tokens: at TP 1 (no all-reduce per step) the chunks sum to one prefill."""
    arch, gpu = _arch(name), catalog.gpu("H200")
    engine = EngineStep(arch, gpu, 1)
    chunks = prompt_chunks(20000, 8128)
    assert [(c.tokens, c.context_before) for c in chunks] == [
        (8128, 0),
        (8128, 8128),
        (3744, 16256),
    ]
    total = sum(engine.cost([c]).seconds for c in chunks)
    assert total == pytest.approx(roofline.prefill_seconds(arch, gpu, 1, 20000), rel=1e-9)


def test_pipeline_stages_hand_off_and_overlap() -> None:
    arch, gpu = _arch("meta-llama/Llama-3.1-405B-Instruct"), catalog.gpu("H100-80GB")
    flat = EngineStep(arch, gpu, 8).cost([Chunk(2048)], [4096] * 64)
    assert flat.interval_s == flat.seconds and flat.pipeline_s == 0
    staged = EngineStep(arch, gpu, 8, pp=2).cost([Chunk(2048)], [4096] * 64)
    handoff = (2048 + 64) * arch.hidden_size * 2 / 8 / (gpu.network_gbps * 1e9) + 10e-6
    assert staged.pipeline_s == pytest.approx(handoff)
    assert staged.seconds == pytest.approx(flat.seconds + handoff)
    assert staged.interval_s == pytest.approx(flat.seconds / 2 + handoff)


def test_calibration_scales_each_kind_of_step() -> None:
    arch, gpu = _arch("meta-llama/Llama-3.1-8B-Instruct"), catalog.gpu("H200")
    plain = EngineStep(arch, gpu)
    scaled = EngineStep(arch, gpu, prefill_scale=1.5, decode_scale=2.0)
    assert scaled.cost([Chunk(4096)]).seconds == pytest.approx(
        1.5 * plain.cost([Chunk(4096)]).seconds
    )
    decode = plain.cost(decode_contexts=[2048] * 8).seconds
    assert scaled.cost(decode_contexts=[2048] * 8).seconds == pytest.approx(2 * decode)


# ---- a simulator of one engine, as `pdctl up` could run it: the test's own, not the planner's


@dataclass
class _Sequence:
    prompt: int
    output: int
    computed: int = 0  # prompt tokens in the KV cache
    generated: int = 0
    token_times: list[float] = field(default_factory=list)


def _simulate(engine: EngineStep, sequences: list[_Sequence], budget: int) -> list[float]:
    """vLLM's continuous batching at one engine, all requests there at t=0: each step decodes
    every sequence past its prompt first, then fills the rest of the token budget with prompt
    chunks in arrival order. Returns each step's seconds."""
    now, steps = 0.0, []
    while any(s.generated < s.output for s in sequences):
        decoding = [s for s in sequences if s.computed == s.prompt and 0 < s.generated < s.output]
        left = budget - len(decoding)
        chunked: list[tuple[_Sequence, Chunk]] = []
        for s in sequences:
            if s.computed < s.prompt and left > 0:
                chunk = Chunk(min(left, s.prompt - s.computed), s.computed)
                chunked.append((s, chunk))
                left -= chunk.tokens
        cost = engine.cost([c for _, c in chunked], [s.prompt + s.generated for s in decoding])
        now += cost.seconds
        steps.append(cost.seconds)
        for s in decoding:
            s.generated += 1
            s.token_times.append(now)
        for s, chunk in chunked:
            s.computed += chunk.tokens
            if s.computed == s.prompt:  # the last chunk's forward samples the first token
                s.generated = 1
                s.token_times.append(now)
    return steps


def test_a_simulator_steps_an_engine_through_a_continuous_batching_schedule() -> None:
    arch, gpu = _arch("meta-llama/Llama-3.1-8B-Instruct"), catalog.gpu("H200")
    engine = EngineStep(arch, gpu, 1)
    sequences = [_Sequence(prompt=3000, output=50) for _ in range(8)]
    steps = _simulate(engine, sequences, budget=8192)
    # the first step takes two whole prompts and a chunk of the third (3000 + 3000 + 2192)
    assert steps[0] == engine.cost([Chunk(3000), Chunk(3000), Chunk(2192)]).seconds
    first, second = sequences[0], sequences[1]
    assert first.token_times[0] == second.token_times[0] == steps[0]
    assert all(len(s.token_times) == 50 for s in sequences)
    # a decoding sequence's gaps: steps that carry prompt chunks stall it beyond a plain step
    gaps = [b - a for a, b in zip(first.token_times, first.token_times[1:], strict=False)]
    plain = engine.cost(decode_contexts=[3000 + 25] * 8).seconds
    assert max(gaps) > 5 * plain
    assert min(gaps) == pytest.approx(plain, rel=0.05)
    # the third prompt's chunks: 2192 tokens in the first step, the other 808 in the second
    third = sequences[2]
    assert third.token_times[0] == pytest.approx(steps[0] + steps[1])
    assert max(s.token_times[-1] for s in sequences) == pytest.approx(sum(steps))


# ---- the planner's aggregated estimate uses mixed steps


def test_aggregated_chunk_steps_are_mixed_steps() -> None:
    """A step that carries a prompt chunk costs the mixed step, not a decode step plus a whole
    prefill of the chunk (which read the weights twice)."""
    arch, gpu = _arch("meta-llama/Llama-3.1-70B-Instruct"), catalog.gpu("H200")
    req = Request(arch, gpu, 8, Workload(input_len=4096, output_len=512, concurrency=64))
    agg = plan(req).aggregated
    assert agg is not None
    engine = EngineStep(arch, gpu, agg.engine.tp, layout=agg.engine.layout)
    decoding = [req.workload.mean_context] * agg.batch
    budget = roofline.default_max_num_batched_tokens(gpu) - agg.batch
    chunk_steps = [engine.cost([c], decoding).seconds for c in prompt_chunks(4096, budget)]
    assert agg.itl_stall_ms == pytest.approx(1000 * max(chunk_steps))
    separately = agg.decode_step_ms + 1000 * roofline.prefill_seconds(
        arch, gpu, agg.engine.tp, 4096
    )
    assert agg.itl_stall_ms < separately
    # a request's prefill takes from the engine what its chunk steps cost beyond decode steps
    extra = sum(chunk_steps) - len(chunk_steps) * agg.decode_step_ms / 1000
    assert agg.prefill_ms == pytest.approx(1000 * extra)
    assert math.isfinite(agg.ttft_ms)


def test_aggregated_short_prompts_riding_free_still_plan() -> None:
    """Prompts whose chunk hides under the decode step's weight read take no engine time of
    their own; the queueing then has no prefill server to wait for."""
    arch, gpu = _arch("meta-llama/Llama-3.1-70B-Instruct"), catalog.gpu("H200")
    req = Request(arch, gpu, 8, Workload(input_len=32, output_len=256, concurrency=64))
    agg = plan(req).aggregated
    assert agg is not None
    assert agg.prefill_ms < 0.05 * agg.decode_step_ms  # the chunk's all-reduce bytes alone
    assert agg.ttft_queue_ms >= 0 and math.isfinite(agg.ttft_ms)
