"""The cost of one scheduler step of one engine (docs/sizing.md, "One scheduler step").

A vLLM step is one forward over every token the scheduler put in it: one new token for each
running sequence (decode) and, within the token budget (--max-num-batched-tokens), chunks of
prompts (prefill), each chunk after the tokens of its prompt already in the KV cache. The cost is
built from the roofline's own pieces (pdctl.plan.roofline), so a step of prompts alone costs what
`prefill_seconds` says and a step of decode sequences alone what `decode_step_seconds` says:

    step = decode + prefill - min(prefill, weights read)

the decode sequences' step, plus the chunks' compute beyond the weight read that step pays
anyway (both stream the same weights once). The planner times every step through here; a
simulator of an engine calls `EngineStep.cost` once per step. Pure arithmetic.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import KvLayout, kv_layout
from pdctl.plan import efficiency, roofline


@dataclass(frozen=True)
class Chunk:
    """Prompt tokens computed in one step, after `context_before` tokens of the same prompt that
    earlier steps put in the KV cache."""

    tokens: int
    context_before: int = 0


@dataclass(frozen=True)
class StepCost:
    """Seconds of one step and its parts (seconds = prefill + decode - shared + pipeline)."""

    seconds: float  # from the step's start to its end, through every pipeline stage
    interval_s: float  # between two steps' ends with every PP stage busy (seconds at PP 1)
    prefill_s: float  # the chunks alone: the roofline's prefill of their tokens
    attention_s: float  # of prefill_s: the chunks' attention over their contexts
    allreduce_s: float  # of prefill_s: the TP all-reduces of the chunks' tokens
    decode_s: float  # the decode sequences alone: the roofline's decode step, its costs included
    shared_s: float  # the weight read both would pay, paid once in one forward
    pipeline_s: float  # activations handed from one PP stage to the next

    @property
    def gemm_s(self) -> float:
        """Of prefill_s: the chunks' GEMMs (dense layers, experts) at their shares of peak."""
        return self.prefill_s - self.attention_s - self.allreduce_s


def prompt_chunks(tokens: int, budget: int, context_before: int = 0) -> list[Chunk]:
    """A prompt cut as vLLM's chunked prefill cuts it, `budget` tokens a step from its start."""
    step = max(1, budget)
    return [
        Chunk(min(step, tokens - start), context_before + start) for start in range(0, tokens, step)
    ]


@dataclass(frozen=True)
class EngineStep:
    """One engine: `arch` at TP x PP on `gpu`. `layout` is the KV layout of one GPU at this TP
    over all layers (memory.kv_layout(arch, tp) at vLLM's default token budget, the default);
    the scales are --calibrate's multipliers of the prefill time and the decode step
    (pdctl.plan.calibrate).

    PP: the layers split evenly over `pp` stages in sequence, each handing its tokens' hidden
    states to the next over the GPU's network (the chart runs one stage per node), so a step
    takes the TP step plus pp - 1 hand-offs; vLLM keeps pp batches in flight, so with every stage
    busy a step ends every stage's share (interval_s)."""

    arch: ModelArch
    gpu: Gpu
    tp: int = 1
    pp: int = 1
    layout: KvLayout | None = None
    prefill_scale: float = 1.0
    decode_scale: float = 1.0

    @functools.cached_property
    def kv(self) -> KvLayout:
        budget = roofline.default_max_num_batched_tokens(self.gpu)
        return self.layout or kv_layout(self.arch, self.tp, budget=budget)

    @functools.cached_property
    def _attention_s_per_flop(self) -> float:
        """What the roofline's prefill charges one attention FLOP (its MLA share where set)."""
        return roofline.attention_seconds_per_flop(self.arch, self.gpu, self.tp)

    @functools.cached_property
    def _handoff_s_per_token(self) -> float:
        """Each GPU of a stage sends its 1/TP of a token's 16-bit hidden state over its NIC."""
        return self.arch.hidden_size * 2 / self.tp / (self.gpu.network_gbps * 1e9)

    @functools.cached_property
    def _allreduce_latency_s(self) -> float:
        """The latency part of a forward's all-reduces (no bytes): paid once per step."""
        return roofline.allreduce_seconds(self.arch, self.gpu, self.tp, 0)

    def _prefill(self, chunks: Sequence[Chunk]) -> tuple[float, float, float]:
        """(seconds, attention, all-reduce) of the chunks in one forward: the roofline's prefill
        of their tokens as one prompt, with the attention each chunk computes over its context
        (the pairs its prompt gains) in place of that one prompt's."""
        tokens = sum(c.tokens for c in chunks)
        if not tokens:
            return 0.0, 0.0, 0.0
        arch, gpu, tp = self.arch, self.gpu, self.tp
        flops = sum(
            roofline.attention_flops(arch, c.context_before + c.tokens)
            - roofline.attention_flops(arch, c.context_before)
            for c in chunks
        )
        compute = roofline.prefill_compute_seconds(arch, gpu, tp, tokens, flops)
        read = roofline.weights_read_seconds(arch, gpu, tp, tokens)
        allreduce = roofline.allreduce_seconds(arch, gpu, tp, tokens)
        return max(compute, read) + allreduce, flops * self._attention_s_per_flop, allreduce

    def _decode(self, contexts: Sequence[int]) -> tuple[float, float]:
        """(seconds, weight read) of the decode sequences' step at their mean context (the KV
        read is linear in the context up to whole blocks and the windows' caps)."""
        if not contexts:
            return 0.0, 0.0
        batch = len(contexts)
        context = round(sum(contexts) / batch)
        arch, gpu, tp = self.arch, self.gpu, self.tp
        step = roofline.decode_step_seconds(arch, gpu, tp, batch, context, self.kv)
        return step, roofline.weights_read_seconds(arch, gpu, tp, batch)

    def decode_step_s(self, batch: int, context: int) -> float:
        """One decode step of `batch` sequences of mean `context` alone in the step."""
        return _decode_step(self, batch, context, efficiency.for_gpu(self.gpu))

    def cost(
        self, prefill_chunks: Sequence[Chunk] = (), decode_contexts: Sequence[int] = ()
    ) -> StepCost:
        """One step of the prompt chunks and the decode sequences of these contexts."""
        prefill, attention, allreduce = self._prefill(prefill_chunks)
        decode, weights = self._decode(decode_contexts)
        prefill, attention, allreduce = (
            self.prefill_scale * x for x in (prefill, attention, allreduce)
        )
        decode, weights = self.decode_scale * decode, self.decode_scale * weights
        if decode_contexts:  # one forward: the chunk's all-reduces ride the decode step's
            riding = self.prefill_scale * self._allreduce_latency_s
            prefill_alone = max(0.0, prefill - riding)
        else:
            prefill_alone = prefill
        # What of the prefill hides in the decode step: a chunk that reads no more than the
        # step's weight read (and its all-reduces' latency) rides free, paying its bytes alone.
        beyond = max(0.0, prefill_alone - weights)
        shared, step = prefill - beyond, decode + beyond
        tokens = sum(c.tokens for c in prefill_chunks) + len(decode_contexts)
        handoff = 0.0
        if self.pp > 1:
            latency = efficiency.for_gpu(self.gpu).allreduce_latency_s
            handoff = tokens * self._handoff_s_per_token + latency
        return StepCost(
            seconds=step + (self.pp - 1) * handoff,
            interval_s=step / self.pp + handoff,
            prefill_s=prefill,
            attention_s=attention,
            allreduce_s=allreduce,
            decode_s=decode,
            shared_s=shared,
            pipeline_s=(self.pp - 1) * handoff,
        )


# The layout search asks for the same few thousand steps hundreds of thousands of times (each
# re-plan of `plan`'s sensitivity too); the factors are in the key, so a test or the fit script
# that swaps them gets fresh figures.
@functools.lru_cache(maxsize=1 << 16)
def _decode_step(step: EngineStep, batch: int, context: int, _: efficiency.Efficiency) -> float:
    return step.cost(decode_contexts=[context] * batch).seconds
