"""What each role's engines counted during a step, from their /metrics read before and after
it (pdctl.verify.judge): prompt tokens in all and by source (the connector table's
transferEvidence metric: computed locally, hit in the local prefix cache, or loaded from another
engine's KV), generation tokens, and the KV moved with the time it took and its bandwidth (the
connector table's `metrics.bandwidth` byte and seconds histograms, as verify's pd-kv-bandwidth),
and the mean seconds a request spent queued, in prefill and in decode on that role's engines
(vLLM's request phase histograms: what `pdctl plan --calibrate` fits the planner to). Other
traffic on the engines during a step adds to these counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pdctl import connectors
from pdctl.verify import judge
from pdctl.verify.judge import Connector
from pdctl.verify.report import Endpoint

Pages = dict[str, judge.Scrape]  # engine name -> its /metrics page
# vLLM's per-request phase histograms (seconds; v1 engine, docs/design/metrics.md): waiting in
# the queue, the prefill phase (scheduled to first token) and the decode phase.
PHASE_SECONDS = {
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
}


def _histogram_moved(
    before: judge.Scrape, after: judge.Scrape, name: str, model: str
) -> tuple[float, float]:
    """(sum, count) a histogram gained between two scrapes; (0, 0) when it is not there."""
    family = after.family(name)
    if family is None or family.sum is None:
        return 0.0, 0.0
    labels = judge.model_labels(after, family.count, model)
    now, then = family.read(after, labels), family.read(before, labels)
    return now.get("sum", 0.0) - then.get("sum", 0.0), now["count"] - then["count"]


def _phases(role: dict[str, Any], then: judge.Scrape, now: judge.Scrape, model: str) -> None:
    """Add the engine's phase seconds and counts to the role's running sums."""
    for phase, name in PHASE_SECONDS.items():
        seconds, count = _histogram_moved(then, now, name, model)
        if count > 0:
            sums = role.setdefault("_phases", {}).setdefault(phase, [0.0, 0.0])
            sums[0] += seconds
            sums[1] += count


def by_role(
    engines: Sequence[Endpoint],
    before: Pages,
    after: Pages,
    model: str,
    connector: Connector,
) -> dict[str, dict[str, Any]]:
    """Per role (prefill, decode, both): the counters' moves summed over its engines."""
    evidence = str(connectors.load().transfer_evidence["metric"])
    roles: dict[str, dict[str, Any]] = {}
    for engine in engines:
        then, now = before.get(engine.name), after.get(engine.name)
        if then is None or now is None:
            continue
        role = roles.setdefault(
            engine.role,
            {"engines": 0, "prompt_tokens": 0.0, "generation_tokens": 0.0},
        )
        role["engines"] += 1
        for key, name in (
            ("prompt_tokens", judge.PROMPT_TOKENS),
            ("generation_tokens", judge.GENERATION_TOKENS),
        ):
            role[key] += judge.delta(then, now, name, judge.model_labels(now, name, model))
        if now.has(evidence):
            sources = role.setdefault("prompt_tokens_by_source", {})
            for source in sorted(now.label_values(evidence, judge.SOURCE_LABEL)):
                selection = {
                    **judge.model_labels(now, evidence, model),
                    judge.SOURCE_LABEL: source,
                }
                moved = judge.delta(then, now, evidence, selection)
                sources[source] = sources.get(source, 0.0) + moved
        if len(connector.bandwidth) == 2:
            size, seconds = connector.bandwidth
            moved_bytes = _histogram_moved(then, now, size, model)[0]
            took = _histogram_moved(then, now, seconds, model)[0]
            if moved_bytes > 0 and took > 0:
                role["kv_bytes"] = role.get("kv_bytes", 0.0) + moved_bytes
                role["kv_transfer_s"] = role.get("kv_transfer_s", 0.0) + took
        _phases(role, then, now, model)
    for role in roles.values():
        phases = role.pop("_phases", {})
        if phases:
            role["phase_mean_s"] = {k: round(s / n, 6) for k, (s, n) in phases.items()}
            role["phase_requests"] = {k: n for k, (_, n) in phases.items()}
        if role.get("kv_transfer_s"):
            role["kv_gbps"] = round(role["kv_bytes"] / role["kv_transfer_s"] / 1e9, 3)
            role["kv_transfer_s"] = round(role["kv_transfer_s"], 6)
    return roles
