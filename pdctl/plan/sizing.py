"""The layout search: which TP and how many prefill and decode engines serve a workload best on
the GPUs given, with the estimates, the verdict on whether PD pays, and the refusals with their
numbers. Prefill and decode engines are balanced by rate matching (aiconfigurator's picking.py).
The memory arithmetic is pdctl.models.memory's, the time estimates pdctl.plan.roofline's."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

from pdctl.models.catalog import Gpu
from pdctl.models.memory import GiB, kv_layout, memory, params, valid_tps, weight_bytes
from pdctl.plan import aggregated as aggregated_
from pdctl.plan import decode, efficiency, queueing
from pdctl.plan import verdict as verdicts
from pdctl.plan.layout import (
    AggregatedEstimates,
    Choice,
    DoesNotFit,
    Engine,
    Estimates,
    Plan,
    PlannedPool,
    Request,
    RolePlan,
)
from pdctl.plan.objective import (
    TIE,
    Score,
    best,
    context_floor,
    engine_counts,
    meets,
    miss,
    need_tokens,
    prompt_floor,
)
from pdctl.plan.roofline import (
    DECODE_MATCH,
    PREFILL_MATCH,
    alone_ttft_seconds,
    default_max_num_batched_tokens,
    default_max_num_seqs,
)


def engines(req: Request, limit: int | None = None) -> list[Engine]:
    """Every valid TP size up to `limit` (default: a node) with its memory and KV layout."""
    return [
        Engine(
            tp,
            memory(req.arch, req.gpu, tp, req.utilization),
            kv_layout(
                req.arch,
                tp,
                1,
                req.kv_cache_dtype,
                req.hybrid_kv,
                budget=default_max_num_batched_tokens(req.gpu),
            ),
        )
        for tp in valid_tps(req.arch, limit or req.gpus_per_node)
    ]


def transfer_seconds(req: Request, decode: Engine) -> tuple[float, float]:
    """(seconds, bytes per decode GPU) to move one prompt's KV: every decode rank pulls its share
    (the whole latent under MLA; a sliding-window group's window only) over its own NIC."""
    per_rank = decode.layout.read_bytes(req.workload.input_len)
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
    batch, full_step_s = decode.batch(req, d, y)
    held = d.layout.sequences(d.pool_bytes, w.total_len)  # as the table's "requests of" row
    alone = max(1, min(w.concurrency, default_max_num_seqs(req.gpu), held))
    concurrency_step = req.decode_step_s(d.tp, alone, w.mean_context, d.layout)
    transfer_s, transfer_bytes = transfer_seconds(req, d)
    # A prefill engine whose KV holds one prompt at a time waits for decode to read it before it
    # starts the next one.
    serial = p.layout.sequences(p.pool_bytes, w.input_len) < 2
    service_s = prefill_s + (transfer_s if serial else 0.0)
    prefill_rps = 1 / service_s
    decode_rps = batch / (w.output_len * full_step_s)
    prefill_side, decode_side = x * prefill_rps * PREFILL_MATCH, y * decode_rps * DECODE_MATCH
    # Each decode engine reads one prompt's KV after another over its NIC: the link is a stage too
    # (it binds at TCP speed: 16 requests in flight waited 8.7 s for KV on the H200 bench record).
    link_rps = y / transfer_s
    rps = min(prefill_side, decode_side, link_rps)
    capacity = min(x * prefill_rps, y * decode_rps, link_rps)  # raw rates, not derated
    load_at = functools.partial(
        queueing.under_load,
        servers=x,
        service_s=service_s,
        capacity=capacity,
        rate=w.rate,
        concurrency=w.concurrency,
    )
    alone_s = alone_ttft_seconds(req.arch, req.gpu, w.input_len, prefill_s)
    before_s = alone_s + transfer_s
    decoding, load, step_s = decode.at_load(req, d, y, batch, load_at, before_s)
    unqueued_s = before_s + step_s
    ttft_s = unqueued_s + load.queue_s
    estimates = Estimates(
        prefill_ms=prefill_s * 1000,
        prefill_tokens_per_s=w.input_len / prefill_s,
        decode_step_ms=concurrency_step * 1000,
        decode_step_sequences=alone,
        decode_tokens_per_s=alone / concurrency_step,
        decode_batch=decoding,
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


def score(req: Request, c: _Candidate) -> Score:
    """What the objective reads of a PD layout (pdctl.plan.objective.best)."""
    e = c.estimates
    return Score(
        miss=miss(req.workload, e.ttft_ms, e.itl_ms, e.requests_per_s),
        keeps_context=c.keeps_context(req),
        tokens_per_gpu=e.output_tokens_per_s / req.gpus,
        ttft_ms=e.ttft_ms,
        itl_ms=e.itl_ms,
        order=(1, -(c.prefill.gpus + c.decode.gpus), c.prefill.engine.tp, -c.decode.engine.tp),
    )


def layouts(req: Request, fitting: list[Engine]) -> list[_Candidate]:
    """The PD layouts of `fitting` engines on req.gpus GPUs the objective can pick: every prefill
    and decode TP and prefill engine count, with the decode engine counts of engine_counts, most
    first. Fewer decode engines never give more throughput, so on one line the search stops once
    throughput falls out of the tie band of a layout there that meets the targets (it cannot be
    picked: that layout, or a better one, sets the band)."""
    found: list[_Candidate] = []
    for p in fitting:
        for d in fitting:
            if not req.hetero_tp and p.tp != d.tp:
                continue
            max_x = 1 if req.one_pair else (req.gpus - d.tp) // p.tp
            for x in range(1, max_x + 1):
                most = (req.gpus - x * p.tp) // d.tp
                if req.one_pair:
                    most = min(most, 1)
                met = (
                    0.0  # the most throughput per GPU of a layout on this line meeting the targets
                )
                for y in engine_counts(req, most):
                    candidate = _evaluate(req, p, x, d, y)
                    scored = score(req, candidate)
                    if scored.key[0] < met * (1 - TIE):
                        break
                    found.append(candidate)
                    if scored.met:
                        met = max(met, scored.key[0])
    return found


def search(req: Request, fitting: list[Engine]) -> _Candidate | None:
    """The objective's pick among the PD layouts of `fitting` engines on req.gpus GPUs."""
    return best((score(req, c), c) for c in layouts(req, fitting))


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
        kv_need = engine.layout.request_bytes(need) / GiB
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
    pd_scored = [(score(pd_req, c), c) for c in layouts(pd_req, fitting)]
    agg_scored = [
        (aggregated_.score(req, a), a) for a in aggregated_.every_aggregated(req, fitting)
    ]
    pd, agg = best(pd_scored), best(agg_scored)
    assert pd is not None  # a layout of the smallest engines exists (checked above)
    auto = best([*agg_scored, *(pd_scored if pd_req is req else [])])
    auto_mode = "aggregated" if isinstance(auto, AggregatedEstimates) else "pd"
    mode = auto_mode if req.mode == "auto" else req.mode
    # The layout of auto's mode is auto's pick; a forced mode takes the best of its own layouts.
    if isinstance(auto, AggregatedEstimates) and req.mode != "aggregated":
        agg = auto
    elif isinstance(auto, _Candidate) and req.mode != "pd":
        pd = auto
    pd_score = score(pd_req, pd)
    agg_score = None if agg is None else aggregated_.score(req, agg)
    why, cost = verdicts.explain(req, mode, auto_mode, pd_score, agg_score, pd_req.gpus)
    chosen: Estimates | AggregatedEstimates = pd.estimates if agg is None or mode == "pd" else agg
    chosen_meets = pd.meets if chosen is pd.estimates else agg.meets  # type: ignore[union-attr]
    missed = verdicts.missed(
        req, mode, chosen_meets, chosen.ttft_ms, chosen.itl_ms, chosen.requests_per_s
    )
    choice = Choice(mode, req.mode, _pools(req, pd, agg, mode), chosen_meets, tuple(why), cost)
    max_len = _max_model_len(req, pd)
    verdict, reasons = verdicts.verdict(req, pd.decode, pd.estimates)
    nodes = nodes_per_engine(req, pd.decode.engine)
    notes = []
    if nodes_per_engine(req, pd.prefill.engine) > 1 or nodes > 1:
        tp = pd.decode.engine.tp
        notes.append(
            f"{arch.name} needs {tp} GPUs per engine, more than a node has (--gpus-per-node "
            f"{req.gpus_per_node}): each engine spans {nodes} nodes as one LeaderWorkerSet group, "
            f"TP{req.gpus_per_node} x PP{nodes} (tensor parallel within a node, pipeline "
            f"parallel across nodes); the estimates are those of tensor parallel over all {tp} "
            "GPUs, and the KV pool of the pipelined engine is larger (each stage holds only its "
            "layers' KV)"
        )
    pd_warned = verdicts.pd_warnings(req, pd.prefill, pd.decode, pd.estimates)
    w = req.workload  # where the estimates are known to be off (docs/sizing.md): said, not warned
    notes += efficiency.wider_error(
        bool(arch.moe), params(arch).total / 1e9, w.concurrency, arch.weight_dtype == "fp8"
    )
    return Plan(
        request=req,
        prefill=pd.prefill,
        decode=pd.decode,
        max_model_len=max_len,
        estimates=pd.estimates,
        verdict=verdict,
        reasons=reasons,
        warnings=(pd_warned if mode == "pd" else []) + verdicts.kv_warnings(req) + missed,
        pd_warnings=[] if mode == "pd" else pd_warned,
        notes=notes,
        meets=pd.meets,
        aggregated=agg,
        better=mode,
        why=why,
        choice=choice,
    )


def pool(req: Request, role: str, engine: Engine, replicas: int) -> PlannedPool:
    """`replicas` engines as the chart runs them (an engine over nodes: TP per node x PP nodes)."""
    nodes = nodes_per_engine(req, engine)
    return PlannedPool(role, engine.tp // nodes, nodes, replicas)


def _pools(
    req: Request, pd: _Candidate, agg: AggregatedEstimates | None, mode: str
) -> tuple[PlannedPool, ...]:
    """The chosen layout's pools."""
    if mode == "aggregated" and agg is not None:
        return (pool(req, "engine", agg.engine, agg.replicas),)
    return (
        pool(req, "prefill", pd.prefill.engine, pd.prefill.replicas),
        pool(req, "decode", pd.decode.engine, pd.decode.replicas),
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
