"""The PD proof (checks pd-prefill, pd-decode, pd-kv-transfer): one long prompt that starts with
a random nonce (so no engine has any of it cached) goes through the router while verify reads
every prefill and decode engine's /metrics before and after.

- pd-prefill: the prefill engines counted the prompt's tokens (vllm:prompt_tokens_total).
- pd-decode: the decode engines counted the output tokens (vllm:generation_tokens_total).
- pd-kv-transfer: the engines of the pool role that the connector table's `transferEvidence`
  names (decode) loaded the prompt from another engine's KV (its metric with its labels:
  `vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}`) instead of computing it
  (`source="local_compute"`: at most one token, since vLLM before 0.21 recomputes the last prompt
  token and 0.21 and later none; `local_cache_hit` tokens came from its own prefix cache). The
  connector's transfer metrics (the table's `metrics.transfer`, wherever they are exported) must
  move, and its `metrics.failures` must not. Without the by-source counter (vLLM before PR
  #33290) the connector's metrics alone pass, and the evidence says that recomputation was not
  ruled out.

vLLM updates counters as its engine steps, possibly just after a response ends, so the second
read is repeated for up to `Settings.settle` seconds until the verdicts hold. Other traffic on
the engines during the probe adds to the counters: verify a quiet deployment.
"""

from __future__ import annotations

import json
import math
import shlex
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pdctl import connectors
from pdctl.errors import UsageError
from pdctl.models import links
from pdctl.verify import metrics
from pdctl.verify.client import Http, Reply, curl
from pdctl.verify.report import AGGREGATED, Check, Endpoint, Settings, Status, Targets, join

PROBE_TOKENS = 16  # output tokens of the PD probe
LOCAL_COMPUTE_ALLOWANCE = 1  # prompt tokens a decode may compute per transferred request
SETTLE_POLL = 0.25  # seconds between /metrics reads while waiting for the counters
# Words of the PD probe's prompt after its nonce (any text will do; it is never cached).
_FILLER = (
    "prefill computes the prompt once and decode reads its key value cache over the network "
    "so that the decode pool only generates tokens verify reads the counters of both pools"
).split()


@dataclass
class Connector:
    name: str | None
    source: str | None  # "option" or "detected"
    transfer: tuple[str, ...] = ()
    bandwidth: tuple[str, ...] = ()  # [bytes, seconds] histograms (the table's metrics.bandwidth)
    failures: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()


def _from_table(entry: connectors.Connector, source: str) -> Connector:
    return Connector(
        entry.name,
        source,
        transfer=entry.metrics.get("transfer", ()),
        bandwidth=entry.metrics.get("bandwidth", ()),
        failures=entry.metrics.get("failures", ()),
    )


def known_connectors() -> list[str]:
    """The connector names --connector accepts: the keys of the connector table."""

    return sorted(connectors.load().connectors)


def resolve_connector(name: str | None, scrapes: list[metrics.Scrape]) -> Connector:
    """The connector whose transfer metrics verify checks: the one named, else the one whose
    metrics (from the connector table) the engines export, if exactly one does."""

    table = connectors.load()
    if name is not None:
        entry = table.connectors.get(name)
        if entry is None:
            known = ", ".join(known_connectors())
            raise UsageError(f"--connector {name}: not in the connector table (known: {known})")
        return _from_table(entry, "option")
    found = []
    for entry in table.connectors.values():
        transfer = entry.metrics.get("transfer", ())
        if transfer and any(s.family(m) for s in scrapes for m in transfer):
            found.append(entry)
    if len(found) == 1:
        return _from_table(found[0], "detected")
    return Connector(None, None, candidates=tuple(e.name for e in found))


@dataclass
class _Moves:
    """How one engine's counters moved during the probe."""

    engine: Endpoint
    prompt: float
    generation: float
    sources: dict[str, float] | None  # by the `source` label; None when not exported
    connector: dict[str, dict[str, float]]  # metric -> {"count": d[, "sum": d]}, exported only
    failures: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine.name,
            "role": self.engine.role,
            "prompt_tokens": self.prompt,
            "generation_tokens": self.generation,
            "prompt_tokens_by_source": self.sources,
            "connector_metrics": self.connector,
            "connector_failures": self.failures,
        }


def _moves(
    engine: Endpoint,
    before: metrics.Scrape,
    after: metrics.Scrape,
    model: str,
    evidence_metric: str,
    connector: Connector,
) -> _Moves:
    def moved(name: str) -> float:
        return metrics.delta(before, after, name, metrics.model_labels(after, name, model))

    sources: dict[str, float] | None = None
    if after.has(evidence_metric):
        labels = metrics.model_labels(after, evidence_metric, model)
        sources = {}
        for source in sorted(after.label_values(evidence_metric, metrics.SOURCE_LABEL)):
            selection = {**labels, metrics.SOURCE_LABEL: source}
            sources[source] = metrics.delta(before, after, evidence_metric, selection)
    transfer: dict[str, dict[str, float]] = {}
    for name in connector.transfer:
        family = after.family(name)
        if family is not None:
            labels = metrics.model_labels(after, family.count, model)
            now, then = family.read(after, labels), family.read(before, labels)
            transfer[name] = {k: now[k] - then.get(k, 0.0) for k in now}
    failures: dict[str, float] = {}
    for name in connector.failures:
        family = after.family(name)
        if family is not None:
            labels = metrics.model_labels(after, family.count, model)
            failures[name] = (
                family.read(after, labels)["count"] - family.read(before, labels)["count"]
            )
    return _Moves(
        engine,
        moved(metrics.PROMPT_TOKENS),
        moved(metrics.GENERATION_TOKENS),
        sources,
        transfer,
        failures,
    )


def _metrics_curl(engine: Endpoint, names: list[str]) -> str:
    assert engine.url
    stems = [name.removesuffix("_total") for name in names]
    stems = [s for s in dict.fromkeys(stems) if not any(s != o and s.startswith(o) for o in stems)]
    tail = "grep -F " + " ".join(f"-e {shlex.quote(stem)}" for stem in stems)
    return curl(join(engine.url, "/metrics"), tail=tail)


def _probe_curl(url: str, body: dict[str, Any], words: int) -> list[str]:
    """The probe as shell commands: a fresh nonce and the same filler in $PROMPT (a repeated
    prompt would come from the prefix cache), then the request."""
    sentence = " ".join(_FILLER)
    repeat = max(words // len(_FILLER), 1)
    prompt = (
        f'PROMPT="verify $(date +%s%N) $(for i in $(seq {repeat}); do '
        f"printf '%s ' {shlex.quote(sentence)}; done)\""
    )
    data = json.dumps({**body, "prompt": "@PROMPT@"})
    left, right = data.split('"@PROMPT@"')
    quoted = shlex.quote(left + '"') + '"$PROMPT"' + shlex.quote('"' + right)
    return [prompt, curl(url, shell_data=quoted)]


def probe_prompt(words: int) -> str:
    """A prompt no engine has seen: a random nonce, then filler words (`words` in all)."""
    filler = [_FILLER[i % len(_FILLER)] for i in range(max(words - 2, 1))]
    return " ".join(["verify", uuid.uuid4().hex, *filler])


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return f"{value:+}"
    return f"{value:+.0f}" if value == int(value) else f"{value:+.2f}"


def _count(value: float) -> str:
    """A counter's change as a count ("counted 598 of the 600", not "+598")."""
    return _fmt(value).lstrip("+")


@dataclass(frozen=True)
class _Evidence:
    """The connector table's transferEvidence: a counter, the label selecting the tokens that
    arrived from another engine, and the pool role whose engines show it."""

    metric: str
    external: str
    role: str


def _transfer_evidence() -> _Evidence:

    rule = connectors.load().transfer_evidence
    labels = dict(rule.get("labels") or {})
    return _Evidence(str(rule["metric"]), str(labels[metrics.SOURCE_LABEL]), str(rule["poolRole"]))


def scrape_all(
    http: Http, engines: Sequence[Endpoint]
) -> tuple[dict[str, metrics.Scrape], list[str]]:
    """Each engine's /metrics page by engine name, and what could not be read (all engines
    read at once: hung ones cost one timeout in all)."""
    pages: dict[str, metrics.Scrape] = {}
    problems: list[str] = []
    reachable = [e for e in engines if e.url is not None]
    replies = http.get_all([join(e.url or "", "/metrics") for e in reachable])
    answers = dict(zip((e.name for e in reachable), replies, strict=True))
    for engine in engines:
        reply = answers.get(engine.name)
        if reply is None:
            problems.append(f"{engine.role} {engine.name}: {engine.error}")
            continue
        if not reply.ok:
            problems.append(f"{engine.role} {engine.name}: GET /metrics: {reply.problem()}")
            continue
        try:
            pages[engine.name] = metrics.parse(reply.text)
        except metrics.ExpositionError as error:
            problems.append(f"{engine.role} {engine.name}: /metrics: {error}")
    return pages, problems


_IDS = ("pd-prefill", "pd-decode", "pd-kv-transfer")


def _all(status: Status, why: str, untimed: str = "no KV transfer was timed") -> list[Check]:
    """The proof's checks, all with one verdict; pd-kv-bandwidth skipped (nothing to time)."""
    return [Check(i, status, why) for i in _IDS] + [
        Check("pd-kv-bandwidth", Status.skipped, untimed)
    ]


def pd_proof(
    http: Http, router: str, targets: Targets, model: str, settings: Settings
) -> tuple[list[Check], Connector | None]:
    """The three PD checks, and the connector whose metrics they read."""
    prefill, decode = targets.role("prefill"), targets.role("decode")
    if targets.aggregated:
        return _all(Status.skipped, AGGREGATED, AGGREGATED), None
    if not prefill or not decode:
        if not targets.engines:
            why = (
                "no engine URLs: give --prefill-url and --decode-url, or --engine-url for an "
                "aggregated release (or use cluster mode)"
            )
        else:
            why = f"no {'decode' if prefill else 'prefill'} engine to read"
        return _all(Status.skipped, why), None
    engines = prefill + decode
    unreachable = [e for e in engines if e.url is None]
    if unreachable:
        why = "; ".join(f"{e.role} {e.name}: {e.error}" for e in unreachable)
        return _all(Status.failed, f"cannot read the engines' metrics: {why}"), None
    evidence = _transfer_evidence()
    before, problems = scrape_all(http, engines)
    if problems:
        return _all(Status.failed, "cannot read the engines' metrics: " + "; ".join(problems)), None
    connector = resolve_connector(settings.connector, list(before.values()))

    url = join(router, "/v1/completions")
    body = {
        "model": model,
        "prompt": probe_prompt(settings.prompt_words),
        "max_tokens": PROBE_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
    }
    names = [metrics.PROMPT_TOKENS, metrics.GENERATION_TOKENS, evidence.metric]
    names += [*connector.transfer, *connector.failures]
    commands = [_metrics_curl(e, names) for e in engines]
    commands += _probe_curl(url, body, settings.prompt_words)
    commands += [_metrics_curl(e, names) for e in engines]
    reply = http.post(url, body)
    answer = reply.json() if reply.ok else None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    prompt_len = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    output_len = usage.get("completion_tokens") if isinstance(usage, dict) else None

    deadline = time.monotonic() + settings.settle
    while True:
        after, problems = scrape_all(http, engines)
        if problems:
            why = "cannot read the engines' metrics after the probe: " + "; ".join(problems)
            return _all(Status.failed, why), connector
        moves = [
            _moves(e, before[e.name], after[e.name], model, evidence.metric, connector)
            for e in engines
        ]
        verdicts = _pd_verdicts(moves, reply, prompt_len, output_len, evidence, connector)
        if all(c.status is Status.passed for c in verdicts) or time.monotonic() >= deadline:
            break
        time.sleep(SETTLE_POLL)
    # Judged once the counters settled: a slow transfer is a finding, not a reason to wait.
    verdicts.append(_bandwidth_verdict(moves, connector, settings.min_kv_gbps))
    shared = {
        "probe": {
            "url": url,
            "status": reply.status,
            "prompt_words": settings.prompt_words,
            "prompt_tokens": prompt_len,
            "completion_tokens": output_len,
            "error": None if reply.ok else reply.problem(),
        },
        "engines": [m.as_dict() for m in moves],
    }
    for check in verdicts:
        check.evidence = {**shared, **check.evidence}
        check.curl = commands
    return verdicts, connector


def _counted(
    moves: list[_Moves],
    check_id: str,
    role: str,
    metric: str,
    pick: Callable[[_Moves], float],
    expected: int,
    what: str,
) -> Check:
    """A check that the engines of `role` counted at least `expected` tokens in `metric`
    (`pick` reads its change from an engine's moves)."""
    counted = sum(pick(m) for m in moves if m.engine.role == role)
    line = f"{metric} on {role}: " + ", ".join(
        f"{m.engine.name} {_fmt(pick(m))}" for m in moves if m.engine.role == role
    )
    facts = {"role": role, "metric": metric, "counted": counted, "expected": expected}
    if expected > 0 and counted >= expected:
        summary = f"{role} counted the {expected} {what} ({metric} {_fmt(counted)})"
        return Check(check_id, Status.passed, summary, facts, [line])
    summary = f"{role} counted {_count(counted)} of the {expected} {what} ({metric})"
    return Check(check_id, Status.failed, summary, facts, [line])


def _pd_verdicts(
    moves: list[_Moves],
    reply: Reply,
    prompt_len: Any,
    output_len: Any,
    evidence: _Evidence,
    connector: Connector,
) -> list[Check]:
    if not reply.ok or not isinstance(prompt_len, int) or not isinstance(output_len, int):
        why = reply.problem() if not reply.ok else "the probe's answer has no usage"
        return _all(Status.failed, f"the PD probe failed: {why}")
    prefill = _counted(
        moves,
        "pd-prefill",
        "prefill",
        metrics.PROMPT_TOKENS,
        lambda m: m.prompt,
        prompt_len,
        "prompt tokens",
    )
    if prefill.status is Status.failed:
        prefill.summary += ": the router did not send the request through prefill"
    decode = _counted(
        moves,
        "pd-decode",
        "decode",
        metrics.GENERATION_TOKENS,
        lambda m: m.generation,
        output_len,
        "output tokens",
    )
    if decode.status is Status.failed:
        decode.summary += ": the output was not generated by the decode pool"
    kv = _kv_verdict(
        moves, prompt_len, evidence.metric, evidence.external, evidence.role, connector
    )
    return [prefill, decode, kv]


def _bandwidth_verdict(
    moves: list[_Moves], connector: Connector, min_kv_gbps: float | None
) -> Check:
    """The KV bandwidth of the probe's transfer, from the connector's byte and time histograms
    (the table's `metrics.bandwidth`), per engine and overall, named by the link it matches
    (helm/files/links.yaml); a warning below min_kv_gbps (default: the link table's floor)."""
    if len(connector.bandwidth) != 2:
        why = f"the connector table lists no bandwidth metrics for {connector.name}"
        return Check("pd-kv-bandwidth", Status.skipped, why)
    size, seconds = connector.bandwidth
    per_engine: dict[str, dict[str, float]] = {}
    for m in moves:
        moved, took = m.connector.get(size, {}), m.connector.get(seconds, {})
        if moved.get("sum", 0) > 0 and took.get("sum", 0) > 0:
            per_engine[m.engine.name] = {"bytes": moved["sum"], "seconds": took["sum"]}
    if not per_engine:
        return Check("pd-kv-bandwidth", Status.skipped, f"no engine's {size} moved")
    total_bytes = sum(e["bytes"] for e in per_engine.values())
    gbps = total_bytes / sum(e["seconds"] for e in per_engine.values()) / 1e9
    table = links.load()
    floor = min_kv_gbps if min_kv_gbps is not None else table.minimum_gbps
    link = table.matching(gbps)
    evidence: dict[str, Any] = {
        "gbps": round(gbps, 3),
        "bytes": total_bytes,
        "per_engine": {
            name: {**e, "gbps": round(e["bytes"] / e["seconds"] / 1e9, 3)}
            for name, e in per_engine.items()
        },
        "min_kv_gbps": floor,
        "link": link.name,
        "link_gbps": link.gbps,
    }
    details = [
        f"{name}: {e['bytes'] / 1e6:.1f} MB in {e['seconds'] * 1000:.2f} ms"
        for name, e in per_engine.items()
    ]
    summary = f"KV moved at {gbps:.2f} GB/s ({total_bytes / 1e6:.1f} MB), as fast as {link.name}"
    if gbps >= floor:
        return Check("pd-kv-bandwidth", Status.passed, summary, evidence, details)
    tcp = "" if link.rdma else ": TCP speed, no RDMA transport was used"
    return Check(
        "pd-kv-bandwidth",
        Status.warned,
        f"{summary}{tcp}; below --min-kv-gbps {floor:g}. Check that the pods have an RDMA device "
        "(network.rdmaResource), UCX_TLS and UCX_NET_DEVICES (network.ucxTls, ucxNetDevices), "
        "and the NIXL/UCX logs for the transport chosen",
        evidence,
        details,
    )


def _kv_verdict(
    moves: list[_Moves],
    prompt_len: int,
    evidence_metric: str,
    external_source: str,
    evidence_role: str,
    connector: Connector,
) -> Check:
    side = [m for m in moves if m.engine.role == evidence_role]
    with_sources = [m for m in side if m.sources is not None]
    evidence: dict[str, Any] = {
        "evidence_role": evidence_role,
        "metric": evidence_metric,
        "prompt_tokens": prompt_len,
        "allowed_local_compute": LOCAL_COMPUTE_ALLOWANCE,
        "connector": connector.name,
    }
    details: list[str] = []
    problems: list[str] = []

    # The connector's own counters, wherever they moved.
    exported = {name for m in moves for name in m.connector}
    moved_by: dict[str, list[str]] = {}
    for m in moves:
        for name, change in m.connector.items():
            if change.get("count", 0) > 0:
                moved_by.setdefault(name, []).append(f"{m.engine.name} {_fmt(change['count'])}")
    failures = {
        f"{name} on {m.engine.name}": change
        for m in moves
        for name, change in m.failures.items()
        if change > 0
    }
    evidence["connector_transfer_moved"] = dict(moved_by)
    evidence["connector_failures"] = failures
    if connector.name is None:
        note = "connector not known (no --connector, and no connector table metrics detected"
        note += f": candidates {', '.join(connector.candidates)})" if connector.candidates else ")"
        details.append(note)
    elif not connector.transfer:
        details.append(f"the connector table lists no transfer metrics for {connector.name}")
    elif not exported:
        details.append(
            f"the engines export none of {connector.name}'s metrics "
            f"({', '.join(connector.transfer)})"
        )
    else:
        for name in sorted(exported):
            where = ", ".join(moved_by.get(name, [])) or "+0"
            details.append(f"{name}: {where}")
        if not moved_by:
            problems.append(
                f"{connector.name}'s transfer counters did not move "
                f"({', '.join(sorted(exported))} +0)"
            )
    if failures:
        problems.append(
            "transfer failures: " + ", ".join(f"{k} {_fmt(v)}" for k, v in failures.items())
        )

    if with_sources:
        totals: dict[str, float] = {}
        for m in with_sources:
            for source, tokens in (m.sources or {}).items():
                totals[source] = totals.get(source, 0.0) + tokens
        external = totals.get(external_source, 0.0)
        local = totals.get(metrics.LOCAL_COMPUTE, 0.0)
        cached = totals.get(metrics.LOCAL_CACHE_HIT, 0.0)
        evidence.update(
            {
                "by_source": totals,
                "external": external,
                "local_compute": local,
                "local_cache_hit": cached,
            }
        )
        for m in with_sources:
            parts = ", ".join(f"{s} {_fmt(v)}" for s, v in (m.sources or {}).items())
            details.insert(0, f"{evidence_metric} on {evidence_role} {m.engine.name}: {parts}")
        loaded = external > 0 and local <= LOCAL_COMPUTE_ALLOWANCE
        loaded = loaded and external + LOCAL_COMPUTE_ALLOWANCE + cached >= prompt_len
        evidence["proof"] = "prompt_tokens_by_source"
        if not loaded:
            problems.insert(
                0,
                f"{evidence_role} computed {_count(local)} of the {prompt_len} prompt "
                f"tokens itself and loaded {_count(external)} from another engine "
                f"({external_source}): the KV did not reach {evidence_role} through the "
                "connector, it was recomputed",
            )
        summary = (
            f"{evidence_role} loaded {external:.0f} of the {prompt_len} prompt tokens from "
            f"prefill's KV ({external_source}), computed {local:.0f} itself"
            + (f", {cached:.0f} from its prefix cache" if cached else "")
        )
    elif moved_by:
        evidence["proof"] = "connector metrics only"
        details.insert(
            0,
            f"{evidence_role} does not export {evidence_metric} (vLLM before PR #33290): "
            "a transfer is shown, recomputation is not ruled out",
        )
        shown = "; ".join(f"{name}: {', '.join(where)}" for name, where in moved_by.items())
        summary = f"{connector.name} transferred KV ({shown})"
    else:
        evidence["proof"] = None
        problems.insert(
            0,
            f"no evidence of a KV transfer: {evidence_role} exports no {evidence_metric} and no "
            "connector transfer metric moved",
        )
        summary = ""
    if problems:
        return Check("pd-kv-transfer", Status.failed, "; ".join(problems), evidence, details)
    return Check("pd-kv-transfer", Status.passed, summary, evidence, details)
