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
  move, its `metrics.loaded` (where exported: counters of a load into vLLM's cache, for a
  connector that reports tokens to vLLM before it loads them) must move on the receiving pool,
  and its `metrics.failures` must not. Without the by-source counter (vLLM before PR
  #33290) the connector's metrics alone pass, and the evidence says that recomputation was not
  ruled out.

The verdicts come from pdctl/verify/judge.py, the code the chart's canary runs too; this module
sends the probe, reads the pages, and reports (curl commands, the link the KV speed matches).

vLLM updates counters as its engine steps, possibly just after a response ends, so the second
read is repeated for up to `Settings.settle` seconds until the verdicts hold (at least one period
of a connector that updates its metrics on a timer, and a margin: LMCache's every 10 s). Other
traffic on the engines during the probe adds to the counters: verify a quiet deployment.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pdctl import connectors, ucx
from pdctl.errors import UsageError
from pdctl.models import links
from pdctl.verify import judge, probe
from pdctl.verify.client import Http, Reply, curl
from pdctl.verify.judge import Connector, Evidence, Moves, Verdict
from pdctl.verify.report import AGGREGATED, Check, Endpoint, Settings, Status, Targets, join

PROBE_TOKENS = 16  # output tokens of the PD probe


def _from_table(entry: connectors.Connector, source: str) -> Connector:
    return Connector(
        entry.name,
        source,
        transfer=entry.metrics.get("transfer", ()),
        bandwidth=entry.metrics.get("bandwidth", ()),
        failures=entry.metrics.get("failures", ()),
        every=entry.metrics_every,
        loaded=entry.metrics.get("loaded", ()),
    )


def known_connectors() -> list[str]:
    """The connector names --connector accepts: the keys of the connector table."""

    return sorted(connectors.load().connectors)


def resolve_connector(name: str | None, scrapes: list[judge.Scrape]) -> Connector:
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


def _metrics_curl(engine: Endpoint, names: list[str]) -> str:
    assert engine.url
    stems = [name.removesuffix("_total") for name in names]
    stems = [s for s in dict.fromkeys(stems) if not any(s != o and s.startswith(o) for o in stems)]
    tail = "grep -F " + " ".join(f"-e {shlex.quote(stem)}" for stem in stems)
    return curl(join(engine.url, "/metrics"), tail=tail)


def _probe_curl(url: str, body: dict[str, Any], words: int) -> list[str]:
    """The probe as shell commands: a fresh nonce and the same filler in $PROMPT (a repeated
    prompt would come from the prefix cache), then the request."""
    sentence = " ".join(probe.FILLER)
    repeat = max(words // len(probe.FILLER), 1)
    prompt = (
        f'PROMPT="{probe.PROBE_TAG} $(date +%s%N) $(for i in $(seq {repeat}); do '
        f"printf '%s ' {shlex.quote(sentence)}; done)\""
    )
    return [prompt, _prompt_curl(url, body)]


def _prompt_curl(url: str, body: dict[str, Any]) -> str:
    """curl POSTing `body` with its prompt taken from $PROMPT."""
    data = json.dumps({**body, "prompt": "@PROMPT@"})
    left, right = data.split('"@PROMPT@"')
    quoted = shlex.quote(left + '"') + '"$PROMPT"' + shlex.quote('"' + right)
    return curl(url, shell_data=quoted)


def _transfer_evidence() -> Evidence:
    """The connector table's transferEvidence."""
    rule = connectors.load().transfer_evidence
    labels = dict(rule.get("labels") or {})
    external = str(labels[judge.SOURCE_LABEL])
    return Evidence(str(rule["metric"]), judge.SOURCE_LABEL, external, str(rule["poolRole"]))


def scrape_all(
    http: Http, engines: Sequence[Endpoint]
) -> tuple[dict[str, judge.Scrape], list[str]]:
    """Each engine's /metrics page by engine name, and what could not be read (all engines
    read at once: hung ones cost one timeout in all)."""
    pages: dict[str, judge.Scrape] = {}
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
            pages[engine.name] = judge.parse(reply.text)
        except judge.ExpositionError as error:
            problems.append(f"{engine.role} {engine.name}: /metrics: {error}")
    return pages, problems


def _all(status: Status, why: str, untimed: str = "no KV transfer was timed") -> list[Check]:
    """The proof's checks, all with one verdict; pd-kv-bandwidth skipped (nothing to time)."""
    return [Check(i, status, why) for i in judge.PROOF] + [
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
    body = probe.probe_request(model, settings.prompt_words, PROBE_TOKENS)
    names = [judge.PROMPT_TOKENS, judge.GENERATION_TOKENS, evidence.metric]
    names += [*connector.transfer, *connector.failures]
    commands = [_metrics_curl(e, names) for e in engines]
    commands += _probe_curl(url, body, settings.prompt_words)
    commands += [_metrics_curl(e, names) for e in engines]
    reply = http.post(url, body)
    counted = _probe_counts(http, reply, prefill[0], body)
    prompt_len, output_len = counted.prompt, counted.output
    if counted.tokenize is not None:
        commands.append(_prompt_curl(counted.tokenize, probe.tokenize_request(model, "")))

    def judge_now() -> tuple[list[Check], list[Moves] | None]:
        after, problems = scrape_all(http, engines)
        if problems:
            why = "cannot read the engines' metrics after the probe: " + "; ".join(problems)
            return _all(Status.failed, why), None
        moves = [
            judge.moves(e.name, e.role, before[e.name], after[e.name], model, evidence, connector)
            for e in engines
        ]
        return _pd_verdicts(moves, counted, evidence, connector), moves

    seconds = probe.settle_seconds(settings.settle, connector.every)
    verdicts, moves = probe.settle(judge_now, _passed, seconds)
    if moves is None:
        return verdicts, connector
    # Judged once the counters settled: a slow transfer is a finding, not a reason to wait.
    verdicts.append(_bandwidth_verdict(moves, connector, settings.min_kv_gbps, targets))
    shared = {
        "probe": {
            "url": url,
            "status": reply.status,
            "prompt_words": settings.prompt_words,
            "prompt_tokens": prompt_len,
            "completion_tokens": output_len,
            "counted_by": counted.counted_by,
            "streamed_events": counted.events,
            "error": None if reply.ok else reply.problem(),
        },
        "engines": [m.as_dict() for m in moves],
    }
    for check in verdicts:
        check.evidence = {**shared, **check.evidence}
        check.curl = commands
        if counted.events and check.id in judge.PROOF:
            check.details.append(f"the probe's tokens counted from its {counted.counted_by}")
    return verdicts, connector


def _passed(judged: tuple[list[Check], list[Moves] | None]) -> bool:
    return all(c.status is Status.passed for c in judged[0])


def _check(verdict: Verdict) -> Check:
    return Check(
        verdict.id, Status(verdict.status), verdict.summary, verdict.facts, verdict.details
    )


@dataclass(frozen=True)
class Counted:
    """The probe's prompt and output tokens, how they were counted, or what went wrong."""

    prompt: int | None = None
    output: int | None = None
    problem: str | None = None
    counted_by: str | None = None
    events: int = 0  # server-sent events of a streamed answer (0: a JSON answer)
    tokenize: str | None = None  # the /tokenize URL asked for a streamed answer's prompt


def _probe_counts(http: Http, reply: Reply, engine: Endpoint, body: dict[str, Any]) -> Counted:
    """The probe's token counts: its JSON answer's usage; for an answer streamed although the
    probe asked for none (LMCache's PD proxy), the prefill engine's /tokenize and the stream's
    finish_reason (pdctl/verify/probe.py says why not the stream's usage)."""
    if not reply.ok:
        return Counted(problem=reply.problem())
    answer = probe.read_answer(reply.text)
    if answer is None:
        return Counted(problem="the probe's answer is neither JSON nor server-sent events of JSON")
    if not answer.streamed:
        prompt, output = answer.usage("prompt_tokens"), answer.usage("completion_tokens")
        if isinstance(prompt, int) and isinstance(output, int):
            return Counted(prompt, output, counted_by="the answer's usage")
        return Counted(problem="the probe's answer has no usage")
    url = join(engine.url or "", "/tokenize")
    tokenized = http.post(url, probe.tokenize_request(str(body["model"]), str(body["prompt"])))
    found = tokenized.json() if tokenized.ok else None
    prompt, output, missing = probe.streamed_counts(answer, found, int(body["max_tokens"]))
    if not tokenized.ok:
        missing = f"POST {url}: {tokenized.problem()}"
    how = f"streamed answer: prompt by POST /tokenize on {engine.name}, output by finish_reason"
    problem = None if missing is None else f"the answer came streamed, unasked; {missing}"
    return Counted(prompt, output, problem, how, answer.events, url)


def _pd_verdicts(
    moves: list[Moves], counted: Counted, evidence: Evidence, connector: Connector
) -> list[Check]:
    if counted.prompt is None or counted.output is None or counted.problem is not None:
        return _all(Status.failed, f"the PD probe failed: {counted.problem}")
    checks = judge.proof(moves, counted.prompt, counted.output, evidence, connector)
    return [_check(v) for v in checks]


RDMA_ADVICE = (
    "Check that the pods have an RDMA device (network.rdmaResource), UCX_TLS and UCX_NET_DEVICES "
    "(network.ucxTls, ucxNetDevices), and the NIXL/UCX logs for the transport chosen"
)


def tcp_advice(targets: Targets) -> str:
    """What to do about KV at TCP speed: where every prefill and decode URL names one host (a
    local release of `pdctl up`, or URLs given so), the same-host fix of pdctl/ucx.py; in a
    cluster (port-forwarded pods, whose nodes are not known here), the RDMA checks and that fix
    as a conditional; else the RDMA checks."""
    engines = targets.role("prefill") + targets.role("decode")
    if any(e.forward for e in engines):
        return f"{RDMA_ADVICE}; {ucx.cluster_hint()}"
    if len({urlsplit(e.url).hostname for e in engines if e.url}) == 1:
        hint = ucx.same_host_hint()
        return hint[0].upper() + hint[1:]
    return RDMA_ADVICE


def _bandwidth_verdict(
    moves: list[Moves], connector: Connector, min_kv_gbps: float | None, targets: Targets
) -> Check:
    """pd-kv-bandwidth (judge.kv_bandwidth) against min_kv_gbps (default: the link table's
    floor), named by the link it matches (helm/files/links.yaml), with what to do below it."""
    table = links.load()
    floor = min_kv_gbps if min_kv_gbps is not None else table.minimum_gbps
    verdict = judge.kv_bandwidth(moves, connector, floor)
    if verdict.status == judge.SKIP:
        return _check(verdict)
    link = table.matching(verdict.facts["bytes"] / verdict.facts["seconds"] / 1e9)
    verdict.facts.update(link=link.name, link_gbps=link.gbps)
    verdict.summary += f", as fast as {link.name}"
    if verdict.status == judge.PASS:
        return _check(verdict)
    tcp = "" if link.rdma else ": TCP speed, no RDMA transport was used"
    advice = RDMA_ADVICE if link.rdma else tcp_advice(targets)
    verdict.summary += f"{tcp}; below --min-kv-gbps {floor:g}. {advice}"
    return _check(verdict)
