"""A continuous-batching scheduler in the manner of vLLM V1's (vllm/v1/core/sched/scheduler.py),
timed by the planner's step cost (pdctl.plan.step) and driven by a clock, real or virtual.

Each step takes, within the token budget (--max-num-batched-tokens): one token of every running
sequence past its prompt (decode), the next chunk of every running prompt (chunked prefill), then
waiting requests in arrival order while the budget, --max-num-seqs and the KV blocks allow. A
request waits when its prompt's blocks are not free; a decode that needs a block none has left
preempts the newest running sequence, which recomputes later (vLLM's recompute preemption). A
step costs `EngineStep.cost` of its chunks and decode contexts. Pure bookkeeping: the caller owns
the clock and calls `schedule`, waits the step's seconds, then `complete`.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pdctl.plan.step import Chunk

StepCost = Callable[[list[Chunk], list[int]], float]  # (chunks, decode contexts) -> seconds
Blocks = Callable[[int], int]  # KV blocks a sequence of n tokens takes
_ids = itertools.count()


@dataclass(eq=False)
class Sequence:
    """One request on one engine. `cached` prompt tokens are in the KV cache on arrival (prefix
    hits, or a PD decode's transferred KV)."""

    prompt: int
    max_tokens: int
    cached: int = 0
    arrival: float = 0.0
    ident: int = field(default_factory=lambda: next(_ids))
    computed: int = 0  # tokens in the KV cache
    target: int = 0  # tokens to be in the KV cache before the next token samples
    generated: int = 0
    blocks: int = 0
    scheduled_at: float | None = None  # first scheduled (queue time ends)
    token_times: list[float] = field(default_factory=list)
    aborted: bool = False  # its client left: it holds nothing and gets no more tokens

    def __post_init__(self) -> None:
        self.computed = min(self.cached, self.prompt)
        self.target = self.prompt

    @property
    def prefilling(self) -> bool:
        return self.computed < self.target

    @property
    def done(self) -> bool:
        return self.generated >= self.max_tokens


@dataclass(frozen=True)
class Batch:
    chunks: list[tuple[Sequence, int]]  # (sequence, prompt tokens computed this step)
    decodes: list[Sequence]
    seconds: float

    def __bool__(self) -> bool:
        return bool(self.chunks or self.decodes)


class Scheduler:
    def __init__(
        self, cost: StepCost, blocks_of: Blocks, blocks: int, budget: int, max_seqs: int
    ) -> None:
        self.cost, self.blocks_of = cost, blocks_of
        self.total_blocks, self.free_blocks = blocks, blocks
        self.budget, self.max_seqs = max(1, budget), max(1, max_seqs)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    @property
    def usage(self) -> float:
        """vllm:kv_cache_usage_perc: the share of blocks in use."""
        used = self.total_blocks - self.free_blocks
        return used / self.total_blocks if self.total_blocks else 0.0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        """Its client left: it leaves the queues and frees its blocks (vLLM's abort_requests)."""
        seq.aborted = True
        if seq in self.waiting:
            self.waiting.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
        self._free(seq)

    def _grow(self, seq: Sequence, tokens: int) -> bool:
        """Hold blocks for `tokens` in seq's KV; False when not enough are free."""
        need = self.blocks_of(tokens) - seq.blocks
        if need > self.free_blocks:
            return False
        self.free_blocks -= max(need, 0)
        seq.blocks += max(need, 0)
        return True

    def _free(self, seq: Sequence) -> None:
        self.free_blocks += seq.blocks
        seq.blocks = 0

    def _preempt(self, seq: Sequence) -> None:
        """Send `seq` back to wait; it recomputes its prompt and output so far."""
        self.running.remove(seq)
        self._free(seq)
        seq.computed, seq.target = 0, seq.prompt + seq.generated
        self.waiting.appendleft(seq)

    def _take(self, seq: Sequence, budget: int) -> int:
        """Tokens running `seq` computes this step within `budget` (0: none). Blocks short, the
        newest running sequence is preempted, `seq` itself when it is the newest."""
        tokens = min(seq.target - seq.computed, budget) if seq.prefilling else 1
        while tokens > 0 and not self._grow(seq, seq.computed + tokens):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return 0
        return max(tokens, 0)

    @staticmethod
    def _put(
        seq: Sequence, tokens: int, chunks: list[tuple[Sequence, int]], decodes: list[Sequence]
    ) -> None:
        if seq.prefilling:
            chunks.append((seq, tokens))
        else:
            decodes.append(seq)

    def schedule(self, now: float) -> Batch:
        """The next step's batch (empty when nothing can run)."""
        budget = self.budget
        chunks: list[tuple[Sequence, int]] = []
        decodes: list[Sequence] = []
        for seq in list(self.running):
            if budget <= 0 or seq not in self.running:
                continue
            tokens = self._take(seq, budget)
            if tokens:
                budget -= tokens
                self._put(seq, tokens, chunks, decodes)
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            seq = self.waiting[0]
            tokens = min(seq.target - seq.computed, budget) if seq.prefilling else 1
            if not self._grow(seq, seq.computed + tokens):
                break  # its blocks are short: it waits
            self.waiting.popleft()
            self.running.append(seq)
            if seq.scheduled_at is None:
                seq.scheduled_at = now
            budget -= tokens
            self._put(seq, tokens, chunks, decodes)
        seconds = self.cost(
            [Chunk(n, seq.computed) for seq, n in chunks], [s.computed + 1 for s in decodes]
        )
        return Batch(chunks, decodes, seconds)

    def complete(self, batch: Batch, now: float) -> list[Sequence]:
        """The step ended at `now`: every sequence that finished its prompt or decoded samples a
        token. Returns the sequences that got a token (finished ones leave, blocks freed)."""
        sampled = []
        for seq, tokens in batch.chunks:
            if seq.aborted:  # during the step
                continue
            seq.computed += tokens
            if not seq.prefilling:
                sampled.append(seq)
        for seq in batch.decodes:
            if seq.aborted:
                continue
            seq.computed += 1 if seq.generated else 0
            sampled.append(seq)
        for seq in sampled:
            seq.generated += 1
            seq.token_times.append(now)
            if seq.done:
                self.running.remove(seq)
                self._free(seq)
        return sampled
