"""The PD proof's judging core, one for `pdctl verify` (pdctl/verify/proof.py) and the chart's
canary (helm/files/canary/pd_canary.py, generated from this module and scripts/canary_driver.py
by scripts/build_canary.py): /metrics pages parsed into samples, how each engine's counters moved
between a read before the probe and one after, and the verdicts pd-prefill, pd-decode,
pd-kv-transfer and pd-kv-bandwidth from those moves. Standard library only, so that the canary
runs it with an engine image's Python; the pages are parsed by pdctl/verify/exposition.py (whose
names this module exports too).

The names of vLLM's own engine counters live here (they are vLLM's, whatever the connector); the
metrics that show a connector's transfers come from the connector table (pdctl.connectors,
helm/files/connectors.yaml).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The parser's names, exported from here too (callers and tests read pages as judge.parse).
from pdctl.verify.exposition import ExpositionError as ExpositionError
from pdctl.verify.exposition import Family as Family
from pdctl.verify.exposition import Sample as Sample
from pdctl.verify.exposition import Scrape as Scrape
from pdctl.verify.exposition import delta as delta
from pdctl.verify.exposition import parse as parse

# vLLM engine metrics (vllm/v1/metrics/loggers.py), label model_name (and engine per DP rank).
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
# Where prompt tokens came from (vLLM PR #33290, PromptTokenStats): the values of the `source`
# label of the connector table's transferEvidence metric, besides the one the table names.
SOURCE_LABEL = "source"
LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"
MODEL_LABEL = "model_name"
LOCAL_COMPUTE_ALLOWANCE = 1  # prompt tokens a decode may compute per transferred request
PROOF = ("pd-prefill", "pd-decode", "pd-kv-transfer")
# Verdict statuses (pdctl.verify.report.Status has the same values).
PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"


def model_labels(scrape: Scrape, name: str, model: str) -> dict[str, str]:
    """Select the model's samples when the engine labels them with it (vLLM: model_name)."""
    if model in scrape.label_values(name, MODEL_LABEL):
        return {MODEL_LABEL: model}
    return {}


# ---- the verdicts --------------------------------------------------------------------------


@dataclass(frozen=True)
class Connector:
    """The connector whose metrics the proof reads (the connector table's `metrics`), how it was
    found ("option", "detected"; None when not known) and, when not known, the table's
    connectors whose transfer metrics the engines export."""

    name: str | None
    source: str | None = None
    transfer: tuple[str, ...] = ()
    bandwidth: tuple[str, ...] = ()  # [bytes, seconds] histograms (the table's metrics.bandwidth)
    failures: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    every: float = 0.0  # seconds between its metrics' updates (the table's metricsEvery; 0: live)
    loaded: tuple[str, ...] = ()  # counters of a real load into vLLM's cache (metrics.loaded)

    @property
    def called(self) -> str:
        """Its name in a message ("the connector" when not known)."""
        return self.name or "the connector"


@dataclass(frozen=True)
class Evidence:
    """The connector table's transferEvidence: a counter, the label and its value selecting the
    tokens that arrived from another engine, and the pool role whose engines show it."""

    metric: str
    label: str
    external: str
    role: str


@dataclass
class Moves:
    """How one engine's counters moved during the probe."""

    engine: str
    role: str
    prompt: float
    generation: float
    sources: dict[str, float] | None  # by the evidence label; None when not exported
    connector: dict[str, dict[str, float]]  # metric -> {"count": d[, "sum": d]}, exported only
    failures: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "role": self.role,
            "prompt_tokens": self.prompt,
            "generation_tokens": self.generation,
            "prompt_tokens_by_source": self.sources,
            "connector_metrics": self.connector,
            "connector_failures": self.failures,
        }


@dataclass
class Verdict:
    """One check's verdict: an id of PROOF or pd-kv-bandwidth, a status (PASS, FAIL, WARN, SKIP),
    a line for people, the facts it rests on and more lines for people."""

    id: str
    status: str
    summary: str
    facts: dict[str, Any] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)


def moves(
    engine: str,
    role: str,
    before: Scrape,
    after: Scrape,
    model: str,
    evidence: Evidence,
    connector: Connector,
) -> Moves:
    """How the engine's counters of the model moved from `before` to `after`."""

    def moved(name: str) -> float:
        return delta(before, after, name, model_labels(after, name, model))

    sources: dict[str, float] | None = None
    if after.has(evidence.metric):
        labels = model_labels(after, evidence.metric, model)
        sources = {}
        for source in sorted(after.label_values(evidence.metric, evidence.label)):
            selection = {**labels, evidence.label: source}
            sources[source] = delta(before, after, evidence.metric, selection)
    transfer: dict[str, dict[str, float]] = {}
    for name in (*connector.transfer, *connector.loaded):
        family = after.family(name)
        if family is not None:
            labels = model_labels(after, family.count, model)
            now, then = family.read(after, labels), family.read(before, labels)
            transfer[name] = {k: now[k] - then.get(k, 0.0) for k in now}
    failures: dict[str, float] = {}
    for name in connector.failures:
        family = after.family(name)
        if family is not None:
            labels = model_labels(after, family.count, model)
            failures[name] = (
                family.read(after, labels)["count"] - family.read(before, labels)["count"]
            )
    prompt, generation = moved(PROMPT_TOKENS), moved(GENERATION_TOKENS)
    return Moves(engine, role, prompt, generation, sources, transfer, failures)


def _signed(value: float) -> str:
    """A counter's change with its sign: "+598", "+0.25", "+inf"."""
    if not math.isfinite(value):
        return f"{value:+}"
    return f"{value:+.0f}" if value == int(value) else f"{value:+.2f}"


def _count(value: float) -> str:
    """A counter's change as a count ("counted 598 of the 600", not "+598")."""
    return _signed(value).lstrip("+")


def proof(
    moves: list[Moves], prompt_len: int, output_len: int, evidence: Evidence, connector: Connector
) -> list[Verdict]:
    """pd-prefill, pd-decode and pd-kv-transfer for a probe of `prompt_len` prompt tokens and
    `output_len` output tokens (its answer's usage)."""
    check = ("pd-prefill", "prefill", PROMPT_TOKENS)
    prefill = _counted(moves, check, lambda m: m.prompt, prompt_len, "prompt tokens")
    if prefill.status == FAIL:
        prefill.summary += ": the router did not send the request through prefill"
    decode = _decoded(moves, output_len)
    return [prefill, decode, kv_transfer(moves, prompt_len, evidence, connector)]


def _decoded(moves: list[Moves], output_len: int) -> Verdict:
    """pd-decode: the decode pool generated the output, or all of it but the first token when
    prefill generated that one (LMCache's PD proxy answers with the prefill's token)."""
    check = ("pd-decode", "decode", GENERATION_TOKENS)
    decode = _counted(moves, check, lambda m: m.generation, output_len, "output tokens")
    first = sum(m.generation for m in moves if m.role == "prefill")
    rest = _counted(moves, check, lambda m: m.generation, output_len - 1, "output tokens")
    if decode.status == FAIL and first >= 1 and rest.status == PASS:
        rest.summary = (
            f"decode counted {output_len - 1} of the {output_len} output tokens, prefill the first"
            f" ({GENERATION_TOKENS} {_signed(first)} on prefill): the router answered with it"
        )
        rest.facts.update(expected=output_len, first_token_by="prefill")
        return rest
    if decode.status == FAIL:
        decode.summary += ": the output was not generated by the decode pool"
    return decode


def proven(verdicts: list[Verdict]) -> bool:
    """Whether every check of PROOF passed (the counters settled; no need to read them again)."""
    return all(v.status == PASS for v in verdicts if v.id in PROOF)


def _counted(
    moves: list[Moves],
    check: tuple[str, str, str],
    pick: Callable[[Moves], float],
    expected: int,
    what: str,
) -> Verdict:
    """That the engines of a role counted at least `expected` tokens in a metric (`check`: the
    check's id, the role, the metric; `pick` reads the change from an engine's moves)."""
    check_id, role, metric = check
    counted = sum(pick(m) for m in moves if m.role == role)
    line = f"{metric} on {role}: " + ", ".join(
        f"{m.engine} {_signed(pick(m))}" for m in moves if m.role == role
    )
    facts = {"role": role, "metric": metric, "counted": counted, "expected": expected}
    if expected > 0 and counted >= expected:
        summary = f"{role} counted the {expected} {what} ({metric} {_signed(counted)})"
        return Verdict(check_id, PASS, summary, facts, [line])
    summary = f"{role} counted {_count(counted)} of the {expected} {what} ({metric})"
    return Verdict(check_id, FAIL, summary, facts, [line])


def kv_transfer(
    moves: list[Moves], prompt_len: int, evidence: Evidence, connector: Connector
) -> Verdict:
    """pd-kv-transfer: the evidence role loaded the prompt from another engine's KV (by the
    transferEvidence counter, or the connector's transfer metrics where that is not exported),
    and no transfer failed. Its facts' `recomputed` says the by-source counter showed the prompt
    computed instead of loaded."""
    facts: dict[str, Any] = {
        "evidence_role": evidence.role,
        "metric": evidence.metric,
        "prompt_tokens": prompt_len,
        "allowed_local_compute": LOCAL_COMPUTE_ALLOWANCE,
        "connector": connector.name,
        "recomputed": False,
    }
    details, problems, moved_by = _connector_moves(moves, connector, facts)
    with_sources = [m for m in moves if m.role == evidence.role and m.sources is not None]
    if with_sources:
        totals: dict[str, float] = {}
        for m in with_sources:
            for source, tokens in (m.sources or {}).items():
                totals[source] = totals.get(source, 0.0) + tokens
        external = totals.get(evidence.external, 0.0)
        local = totals.get(LOCAL_COMPUTE, 0.0)
        cached = totals.get(LOCAL_CACHE_HIT, 0.0)
        facts.update(by_source=totals, external=external, local_compute=local)
        facts.update(local_cache_hit=cached, proof="prompt_tokens_by_source")
        for m in with_sources:
            parts = ", ".join(f"{s} {_signed(v)}" for s, v in (m.sources or {}).items())
            details.insert(0, f"{evidence.metric} on {evidence.role} {m.engine}: {parts}")
        loaded = external > 0 and local <= LOCAL_COMPUTE_ALLOWANCE
        loaded = loaded and external + LOCAL_COMPUTE_ALLOWANCE + cached >= prompt_len
        if not loaded:
            facts["recomputed"] = True
            problems.insert(
                0,
                f"{evidence.role} computed {_count(local)} of the {prompt_len} prompt "
                f"tokens itself and loaded {_count(external)} from another engine "
                f"({evidence.external}): the KV did not reach {evidence.role} through the "
                "connector, it was recomputed",
            )
        summary = (
            f"{evidence.role} loaded {external:.0f} of the {prompt_len} prompt tokens from "
            f"prefill's KV ({evidence.external}), computed {local:.0f} itself"
            + (f", {cached:.0f} from its prefix cache" if cached else "")
        )
    elif moved_by:
        facts["proof"] = "connector metrics only"
        details.insert(
            0,
            f"{evidence.role} does not export {evidence.metric} (vLLM before PR #33290): "
            "a transfer is shown, recomputation is not ruled out",
        )
        shown = "; ".join(f"{name}: {', '.join(where)}" for name, where in moved_by.items())
        summary = f"{connector.called} transferred KV ({shown})"
    else:
        facts["proof"] = None
        problems.insert(
            0,
            f"no evidence of a KV transfer: {evidence.role} exports no {evidence.metric} and no "
            "connector transfer metric moved",
        )
        summary = ""
    if facts["proof"] and not facts["recomputed"]:
        problems += _not_loaded([m for m in moves if m.role == evidence.role], connector, evidence)
    if problems:
        return Verdict("pd-kv-transfer", FAIL, "; ".join(problems), facts, details)
    return Verdict("pd-kv-transfer", PASS, summary, facts, details)


def _not_loaded(receivers: list[Moves], connector: Connector, evidence: Evidence) -> list[str]:
    """A problem when the receiving engines export the connector's load counters (the table's
    metrics.loaded) and none moved: the connector told vLLM it would load the prompt (vLLM then
    counts it as transferred) but wrote none of it into vLLM's cache."""
    changes = [m.connector[n] for m in receivers for n in connector.loaded if n in m.connector]
    if not changes or any(change.get("count", 0) > 0 for change in changes):
        return []
    names = ", ".join(n for n in connector.loaded if any(n in m.connector for m in receivers))
    return [
        f"{connector.called} reported the prompt to vLLM as loaded but {evidence.role} loaded "
        f"none of it into its KV cache ({names} +0): the KV arrived nowhere vLLM reads"
    ]


def _change(name: str, change: dict[str, float]) -> str:
    """A counter's "+N"; a histogram's transfers (vLLM's NIXL ones observe each once) and sum."""
    count, total = change.get("count", 0.0), change.get("sum")
    if total is None:
        return _signed(count)
    unit = f", {total:,.0f} bytes" if "bytes" in name else f", {total:.3g} s in all"
    return f"{_count(count)} transfer{'' if count == 1 else 's'}{unit}"


def _connector_moves(
    moves: list[Moves], connector: Connector, facts: dict[str, Any]
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The connector's own counters, wherever they moved: lines for people, problems (transfer
    counters exported that did not move, failures), and the engines each transfer metric moved
    on; `facts` gets connector_transfer_moved and connector_failures."""
    details: list[str] = []
    problems: list[str] = []
    exported = {
        name: change
        for m in moves
        for name, change in m.connector.items()
        if name in connector.transfer
    }
    moved_by: dict[str, list[str]] = {}
    for m in moves:
        for name, change in m.connector.items():
            if name in connector.transfer and change.get("count", 0) > 0:
                moved_by.setdefault(name, []).append(f"{m.engine} {_change(name, change)}")
    failures = {
        f"{name} on {m.engine}": change
        for m in moves
        for name, change in m.failures.items()
        if change > 0
    }
    facts.update(connector_transfer_moved=dict(moved_by), connector_failures=failures)
    if not connector.transfer and connector.name is None:
        note = "connector not known (no --connector, and no connector table metrics detected"
        note += f": candidates {', '.join(connector.candidates)})" if connector.candidates else ")"
        details.append(note)
    elif not connector.transfer:
        details.append(f"the connector table lists no transfer metrics for {connector.name}")
    elif not exported:
        details.append(
            f"the engines export none of {connector.called}'s metrics "
            f"({', '.join(connector.transfer)})"
        )
    else:
        for name, change in sorted(exported.items()):  # unmoved: the change of 0 it exported
            details.append(f"{name}: {', '.join(moved_by.get(name, [])) or _change(name, change)}")
        if not moved_by:
            problems.append(
                f"{connector.called}'s transfer counters did not move "
                f"({', '.join(sorted(exported))} +0)"
            )
    if failures:
        problems.append(
            "transfer failures: " + ", ".join(f"{k} {_signed(v)}" for k, v in failures.items())
        )
    return details, problems, moved_by


def kv_bandwidth(moves: list[Moves], connector: Connector, floor: float) -> Verdict:
    """pd-kv-bandwidth: the KV bandwidth of the probe's transfer from the connector's byte and
    time histograms (the table's `metrics.bandwidth`), per engine and overall; WARN below
    `floor` GB/s, SKIP when nothing was timed."""
    if len(connector.bandwidth) != 2:
        why = f"the connector table lists no bandwidth metrics for {connector.called}"
        return Verdict("pd-kv-bandwidth", SKIP, why)
    size, seconds = connector.bandwidth
    per_engine: dict[str, dict[str, float]] = {}
    for m in moves:
        moved, took = m.connector.get(size, {}), m.connector.get(seconds, {})
        if moved.get("sum", 0) > 0 and took.get("sum", 0) > 0:
            per_engine[m.engine] = {"bytes": moved["sum"], "seconds": took["sum"]}
    if not per_engine:
        return Verdict("pd-kv-bandwidth", SKIP, f"no engine's {size} moved")
    total_bytes = sum(e["bytes"] for e in per_engine.values())
    total_seconds = sum(e["seconds"] for e in per_engine.values())
    gbps = total_bytes / total_seconds / 1e9
    facts: dict[str, Any] = {
        "gbps": round(gbps, 3),
        "bytes": total_bytes,
        "seconds": total_seconds,
        "per_engine": {
            name: {**e, "gbps": round(e["bytes"] / e["seconds"] / 1e9, 3)}
            for name, e in per_engine.items()
        },
        "min_kv_gbps": floor,
    }
    details = [
        f"{name}: {e['bytes'] / 1e6:.1f} MB in {e['seconds'] * 1000:.2f} ms"
        for name, e in per_engine.items()
    ]
    summary = f"KV moved at {gbps:.2f} GB/s ({total_bytes / 1e6:.1f} MB)"
    return Verdict("pd-kv-bandwidth", PASS if gbps >= floor else WARN, summary, facts, details)
