"""What times and sizes a simulated engine of a model: the planner's step cost for the model on
the GPU at TP x PP (pdctl.plan.step), the KV blocks of pdctl's KV sizing at the GPU memory
utilization (pdctl.models.memory), and vLLM's defaults for the token budget and max-num-seqs."""

from __future__ import annotations

from pdctl import defaults
from pdctl.models.catalog import Gpu
from pdctl.models.config import ModelArch
from pdctl.models.memory import GiB, kv_layout, memory
from pdctl.plan.roofline import default_max_num_batched_tokens, default_max_num_seqs
from pdctl.plan.step import Chunk, EngineStep
from pdctl.simulator.engine import Timing


def timing(
    arch: ModelArch,
    gpu: Gpu,
    tp: int = 1,
    pp: int = 1,
    *,
    utilization: float = defaults.GPU_MEMORY_UTILIZATION,
    kv_cache_dtype: str = "auto",
    budget: int | None = None,
    max_seqs: int | None = None,
) -> Timing:
    budget = budget or default_max_num_batched_tokens(gpu)
    layout = kv_layout(arch, tp, pp, kv_cache_dtype, budget=budget)
    step = EngineStep(arch, gpu, tp, pp, layout=layout)

    def cost(chunks: list[Chunk], contexts: list[int]) -> float:
        if not chunks and not contexts:
            return 0.0
        return step.cost(chunks, contexts).seconds

    pool = max(memory(arch, gpu, tp, utilization, pp).kv_pool, 0.0) * GiB
    return Timing(
        cost=cost,
        blocks_of=layout.sequence_blocks,
        blocks=layout.blocks(pool),
        budget=budget,
        max_seqs=max_seqs or default_max_num_seqs(gpu),
    )
