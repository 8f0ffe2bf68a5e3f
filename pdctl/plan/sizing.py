"""The layout search: which TP and how many prefill and decode engines serve a workload best on
the GPUs given, with the estimates, the verdict on whether PD pays, and the refusals with their
numbers. Prefill and decode engines are balanced by rate matching (aiconfigurator's picking.py).
The memory arithmetic is pdctl.models.memory's, the time estimates pdctl.plan.roofline's."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pdctl.models.catalog import Gpu
from pdctl.models.memory import GiB, kv_layout, memory, valid_tps, weight_bytes
from pdctl.plan import queueing
from pdctl.plan import verdict as verdicts
from pdctl.plan.aggregated import aggregated
from pdctl.plan.layout import (
    DoesNotFit,
    Engine,
    Estimates,
    Plan,
    Request,
    RolePlan,
)
from pdctl.plan.objective import (
    context_floor,
    engine_counts,
    meets,
    need_tokens,
    prompt_floor,
)
from pdctl.plan.roofline import (
    DECODE_MATCH,
    PREFILL_MATCH,
    default_max_num_seqs,
    request_overhead_seconds,
)


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


def _decode_batch(req: Request, engine: Engine, replicas: int) -> tuple[int, float]:
    """Sequences per decode engine and its step time: the share of --concurrency, at most what
    its KV holds at input+output tokens and vLLM's max-num-seqs, fewer if --itl demands."""
    w = req.workload
    cap = engine.layout.sequences(engine.pool_bytes, w.total_len)
    batch = max(1, min(cap, default_max_num_seqs(req.gpu), math.ceil(w.concurrency / replicas)))

    def step(b: int) -> float:
        return req.decode_step_s(engine.tp, b, w.mean_context, engine.layout)

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
    bandwidth = req.link_gbps * 1e9
    return per_rank / bandwidth, per_rank


def _bottleneck(prefill_rps: float, decode_rps: float, link_rps: float) -> str:
    stages = {"prefill": prefill_rps, "decode": decode_rps, "kv-transfer": link_rps}
    return min(stages, key=lambda stage: stages[stage])


@dataclass(frozen=True)
class _Candidate:
    prefill: RolePlan
    decode: RolePlan
    estimates: Estimates
    meets: tuple[bool, ...]  # --ttft, --itl, --rate (True where not asked)
    prefill_context: int  # the longest request one prefill engine holds
    decode_context: int  # the longest request one decode engine holds

    @property
    def context(self) -> int:
        """The longest request both roles hold (what --max-model-len is cut to)."""
        return min(self.prefill_context, self.decode_context)

    def keeps_context(self, req: Request) -> bool:
        return self.prefill_context >= prompt_floor(req) and self.decode_context >= context_floor(
            req
        )


def _evaluate(req: Request, p: Engine, x: int, d: Engine, y: int) -> _Candidate:
    w = req.workload
    prefill_s = req.prefill_s(p.tp, w.input_len)
    batch, step_s = _decode_batch(req, d, y)
    held = d.layout.sequences(d.pool_bytes, w.total_len)  # as the table's "requests of" row
    alone = max(1, min(w.concurrency, default_max_num_seqs(req.gpu), held))
    concurrency_step = req.decode_step_s(d.tp, alone, w.mean_context, d.layout)
    transfer_s, transfer_bytes = transfer_seconds(req, d)
    # A prefill engine whose KV holds one prompt at a time waits for decode to read it before it
    # starts the next one.
    serial = p.layout.sequences(p.pool_bytes, w.input_len) < 2
    service_s = prefill_s + (transfer_s if serial else 0.0)
    prefill_rps = 1 / service_s
    decode_rps = batch / (w.output_len * step_s)
    prefill_side, decode_side = x * prefill_rps * PREFILL_MATCH, y * decode_rps * DECODE_MATCH
    # Each decode engine reads one prompt's KV after another over its NIC: the link is a stage too
    # (it binds at TCP speed: 16 requests in flight waited 8.7 s for KV on the H200 bench record).
    link_rps = y / transfer_s
    rps = min(prefill_side, decode_side, link_rps)
    unqueued_s = prefill_s + transfer_s + step_s + request_overhead_seconds(req.gpu)
    load = queueing.under_load(
        servers=x,
        service_s=service_s,
        fixed_s=unqueued_s,
        decode_s=(w.output_len - 1) * step_s,
        capacity=min(x * prefill_rps, y * decode_rps, link_rps),  # raw rates, not derated
        rate=w.rate,
        concurrency=w.concurrency,
    )
    ttft_s = unqueued_s + load.queue_s
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
        bottleneck=_bottleneck(prefill_side, decode_side, link_rps),
        concurrency_fits=held >= w.concurrency,
        ttft_unqueued_ms=unqueued_s * 1000,
        ttft_queue_ms=load.queue_s * 1000,
        prefill_utilization=load.utilization,
        load_requests_per_s=load.requests_per_s,
        gpus=x * p.tp + y * d.tp,
    )
    return _Candidate(
        RolePlan("prefill", p, x),
        RolePlan("decode", d, y),
        estimates,
        meets(w, ttft_s, step_s, rps),
        p.layout.longest(p.pool_bytes),
        d.layout.longest(d.pool_bytes),
    )


def evaluate_layout(req: Request, p: Engine, x: int, d: Engine, y: int) -> Estimates:
    """The estimates of `x` prefill engines `p` and `y` decode engines `d` under req's workload."""
    return _evaluate(req, p, x, d, y).estimates


def _better(req: Request, a: _Candidate, b: _Candidate) -> bool:
    """Whether a beats b (the objective, docs/sizing.md): more targets met, then keeping the
    floors (prefill engines hold the prompt plus margin, decode engines CONTEXT_FLOOR), then
    throughput on the GPUs given (1% is a tie), then more of the GPUs asked for in use, a smaller
    prefill TP (more prefill engines), a larger decode TP (more KV per GPU)."""
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


def search(req: Request, fitting: list[Engine]) -> _Candidate | None:
    """The best PD layout of `fitting` engines on req.gpus GPUs: every prefill and decode TP and
    prefill engine count, with as many decode engines as the rest of the GPUs hold (fewer only
    where _decode_counts says they can be better)."""
    best: _Candidate | None = None
    for p in fitting:
        for d in fitting:
            if not req.hetero_tp and p.tp != d.tp:
                continue
            max_x = 1 if req.one_pair else (req.gpus - d.tp) // p.tp
            for x in range(1, max_x + 1):
                most = (req.gpus - x * p.tp) // d.tp
                if req.one_pair:
                    most = min(most, 1)
                for y in engine_counts(req, most):
                    candidate = _evaluate(req, p, x, d, y)
                    if best is None or _better(req, candidate, best):
                        best = candidate
                    if candidate.meets[0]:
                        break
    return best


def every_layout(req: Request, fitting: list[Engine]) -> list[_Candidate]:
    """Every PD layout of `fitting` engines within req.gpus, pruning nothing: for checking the
    search (tests), not for planning."""
    found = []
    for p in fitting:
        for d in fitting:
            if not req.hetero_tp and p.tp != d.tp:
                continue
            for x in range(1, (1 if req.one_pair else req.gpus // p.tp) + 1):
                for y in range(1, (1 if req.one_pair else req.gpus // d.tp) + 1):
                    if x * p.tp + y * d.tp <= req.gpus:
                        found.append(_evaluate(req, p, x, d, y))
    return found


def _fit_report(req: Request) -> tuple[Engine | None, list[str]]:
    """The smallest engine that holds one request, looking past a node; lines explaining why
    smaller ones do not."""
    need = need_tokens(req)
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
    need = need_tokens(req)
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


def plan(req: Request, other_gpus: list[Gpu] | None = None, *, fallback: bool = False) -> Plan:
    """The best PD layout for the request, with aggregated serving on the same GPUs beside it;
    DoesNotFit (exit 1) with the numbers otherwise. With `fallback`, GPUs too few for PD but
    enough for one engine give the aggregated answer and the smallest PD layout (on more GPUs
    than asked: Plan.pd_within_gpus is false) instead of a refusal."""
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
    need = need_tokens(req)
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
    pd_req = req
    if req.gpus < smallest and fallback and req.gpus >= fitting[0].tp:
        pd_req = replace(req, gpus=smallest)  # the smallest PD alternative, beside aggregated
    elif req.gpus < smallest:
        # Only GPU types whose smallest PD layout fits the GPUs asked for are worth naming.
        where = _elsewhere(req, other_gpus or [], within=req.gpus)
        one_engine = (
            f"; {req.gpus} GPU(s) hold one engine of TP{fitting[0].tp}, which serves it "
            "aggregated (without PD)"
            if req.gpus >= fitting[0].tp
            else ""
        )
        raise DoesNotFit(
            f"{req.gpus} x {req.gpu.name} cannot hold a PD layout of {arch.name}: the smallest "
            f"is 1 prefill + 1 decode engine of TP{fitting[0].tp} = {smallest} GPUs",
            hint=f"give --gpus {smallest}{one_engine}"
            + (f"; or {_elsewhere_hint(where)}" if where else ""),
            needs_gpus=smallest,
            fits_on=where,
            details=[
                f"TP{fitting[0].tp}: weights {fitting[0].memory.weights:.1f} GiB and a KV pool of "
                f"{fitting[0].memory.kv_pool:.1f} GiB per GPU"
            ],
        )
    best = search(pd_req, fitting)
    assert best is not None  # a layout of the smallest engines exists (checked above)
    agg = aggregated(req, fitting)
    max_len = _max_model_len(req, best)
    verdict, reasons = verdicts.verdict(req, best.decode, best.estimates)
    better, why = verdicts.compare(req, best.estimates, best.meets, agg)
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
        warnings=verdicts.warnings(req, best.prefill, best.decode, best.estimates),
        notes=notes,
        meets=best.meets,
        aggregated=agg,
        better=better,
        why=why,
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
