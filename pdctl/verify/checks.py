"""The verdicts of `pdctl verify`: each check sends real requests to the router (and reads the
engines' /metrics), and reports PASS, FAIL or SKIP with its evidence and the curl commands that
repeat it.

Checks, in the order they are reported:

- router-health: the router answers GET /health with 200 (skipped when it has no such route:
  LMCache's PD proxy serves only POST /v1/completions and /v1/chat/completions).
- models: GET /v1/models through the router lists the model (--model, else the first listed;
  skipped without that route, the model then comes from an engine).
- engines-health: every engine (prefill, decode, both) answers GET /health with 200.
- completion: a non-streaming POST /v1/completions through the router returns text and usage;
  it warns when the router streams the answer although none was asked for (LMCache's PD proxy
  streams every completion), with the text read from the stream.
- chat-stream: a streaming POST /v1/chat/completions with stream_options.include_usage,
  timed on the client (repeated --requests times): TTFT, ITL, TPOT, end-to-end.
- pd-prefill, pd-decode, pd-kv-transfer: the PD proof (pdctl/verify/proof.py). Against an
  aggregated release (every engine of role both) they, pd-kv-bandwidth and pd-ttft are skipped:
  there is no KV transfer to prove; the checks above still run.

Latency definitions (client-side; the names as vLLM's `vllm bench serve` uses them,
vllm/benchmarks/serve.py): TTFT is the time from sending the request to the first chunk carrying
generated text; ITL the gaps between chunks carrying text, per token when the server's token
count equals the chunk count, else per chunk (then `itl_basis` is "chunk" and TPOT is the
per-token figure); the first gap is each request's first (where the router answers with
prefill's token before the KV transfer, as LMCache's PD proxy does, the transfer is in it); TPOT is
(last text chunk - first text chunk) / (completion_tokens - 1) with completion_tokens from the
server's usage; e2e from sending to the end of the stream. Percentiles interpolate linearly
between the two nearest values (as numpy's default).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pdctl import connectors
from pdctl.naming import ROLES
from pdctl.verify import timing, ttft
from pdctl.verify.client import Http, authorize, curl, parallel
from pdctl.verify.judge import Connector
from pdctl.verify.probe import read_answer
from pdctl.verify.proof import pd_proof, resolve_connector
from pdctl.verify.report import (
    AGGREGATED,
    ORDER,
    PROOF,
    Check,
    Endpoint,
    Report,
    Settings,
    Status,
    Targets,
    join,
    skip,
    stats,
)

__all__ = ["ROLES", "Endpoint", "Report", "Settings", "Targets", "run"]


# A router that answers but has no such GET route (LMCache 0.3.7's disagg_proxy_server.py has
# only its two POST routes): the completion checks and the PD proof still test it.
NO_ROUTE = (404, 405)
NO_ROUTE_WHY = (
    "the router has no such route (LMCache's PD proxy serves only POST); later checks test it"
)


def _router_health(http: Http, router: Endpoint) -> Check:
    if router.url is None:
        return Check("router-health", Status.failed, f"{router.name}: {router.error}")
    url = join(router.url, "/health")
    reply = http.get(url)
    evidence = {"url": url, "status": reply.status, "elapsed_ms": round(reply.elapsed_ms, 1)}
    command = [curl(url)]
    if reply.ok:
        summary = f"GET /health -> 200 in {reply.elapsed_ms:.0f} ms"
        return Check("router-health", Status.passed, summary, evidence, curl=command)
    if reply.status in NO_ROUTE:
        summary = f"GET /health -> {reply.status}: {NO_ROUTE_WHY}"
        return Check("router-health", Status.skipped, summary, evidence, curl=command)
    evidence["error"] = reply.problem()
    return Check(
        "router-health", Status.failed, f"GET {url}: {reply.problem()}", evidence, curl=command
    )


def _models(http: Http, router: str, wanted: str | None) -> tuple[Check, str | None]:
    url = join(router, "/v1/models")
    reply = http.get(url)
    command = [curl(url)]
    if reply.status in NO_ROUTE:
        summary = f"GET /v1/models -> {reply.status}: {NO_ROUTE_WHY}"
        return Check("models", Status.skipped, summary, {"url": url}, curl=command), wanted
    body = reply.json()
    data = body.get("data") if isinstance(body, dict) else None
    if not reply.ok or not isinstance(data, list):
        why = reply.problem() if not reply.ok else "the answer has no `data` list"
        return Check(
            "models", Status.failed, f"GET {url}: {why}", {"url": url}, curl=command
        ), wanted
    listed = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    evidence: dict[str, Any] = {"url": url, "listed": listed, "wanted": wanted}
    if wanted is not None:
        if wanted in listed:
            return Check("models", Status.passed, f"lists {wanted}", evidence, curl=command), wanted
        summary = f"{wanted} is not listed (listed: {', '.join(listed) or 'none'})"
        return Check("models", Status.failed, summary, evidence, curl=command), wanted
    if not listed:
        return Check("models", Status.failed, "lists no model", evidence, curl=command), None
    summary = f"lists {listed[0]}"
    if len(listed) > 1:
        summary += f" and {len(listed) - 1} more; verifying {listed[0]} (--model to choose)"
    return Check("models", Status.passed, summary, evidence, curl=command), listed[0]


# /v1/models' owned_by: what serves a model. vLLM writes "vllm"; the pd-stack simulator its own.
SIMULATOR_OWNER = "pd-stack-simulator"
_SERVED_BY = {"vllm": "vLLM", SIMULATOR_OWNER: "the pd-stack simulator (not vLLM)"}


def served_by(http: Http, endpoints: Sequence[Endpoint]) -> str:
    """What serves the engines, from the owned_by of their /v1/models cards: "vLLM", "the
    pd-stack simulator (not vLLM)", both joined, or "engines not known"."""
    urls = [join(e.url, "/v1/models") for e in endpoints if e.url is not None]
    found = []
    for reply in http.get_all(urls):
        body = reply.json() if reply.ok else None
        data = body.get("data") if isinstance(body, dict) else None
        for card in data if isinstance(data, list) else []:
            owner = card.get("owned_by") if isinstance(card, dict) else None
            found.append(_SERVED_BY.get(str(owner), f"{owner}" if owner else "not known"))
    return " + ".join(dict.fromkeys(found)) or "engines not known"


def listed_model(http: Http, endpoints: Sequence[Endpoint]) -> str | None:
    """The first model one of the endpoints lists on /v1/models (verify asks the engines when
    the router cannot say; the later checks then still show where requests fail)."""
    urls = [join(e.url, "/v1/models") for e in endpoints if e.url is not None]
    for reply in http.get_all(urls):
        body = reply.json() if reply.ok else None
        data = body.get("data") if isinstance(body, dict) else None
        for card in data if isinstance(data, list) else []:
            if isinstance(card, dict) and card.get("id"):
                return str(card["id"])
    return None


def _engines_health(http: Http, engines: tuple[Endpoint, ...]) -> Check:
    if not engines:
        why = (
            "no engine URLs (give --prefill-url and --decode-url, or --engine-url for an "
            "aggregated release, or use cluster mode)"
        )
        return skip("engines-health", why)
    results, down, commands = [], [], []
    urls = [join(e.url, "/health") for e in engines if e.url is not None]
    replies = iter(http.get_all(urls))  # at once: hung engines cost one timeout in all
    for engine in engines:
        if engine.url is None:
            results.append({"engine": engine.name, "role": engine.role, "error": engine.error})
            down.append(f"{engine.role} {engine.name}: {engine.error}")
            continue
        url = join(engine.url, "/health")
        commands.append(curl(url))
        reply = next(replies)
        entry: dict[str, Any] = {"engine": engine.name, "role": engine.role, "url": url}
        entry["status"] = reply.status
        if not reply.ok:
            entry["error"] = reply.problem()
            down.append(f"{engine.role} {engine.name}: {reply.problem()}")
        results.append(entry)
    evidence = {"engines": results}
    if down:
        summary = f"{len(down)} of {len(engines)} engine(s) not healthy: " + "; ".join(down)
        return Check("engines-health", Status.failed, summary, evidence, curl=commands)
    roles = ", ".join(
        f"{sum(e.role == r for e in engines)} {r}"
        for r in ROLES
        if any(e.role == r for e in engines)
    )
    return Check("engines-health", Status.passed, f"{roles}: all 200", evidence, curl=commands)


def _completion(http: Http, router: Endpoint, model: str, settings: Settings) -> Check:
    url = join(router.url or "", "/v1/completions")
    body = {
        "model": model,
        "prompt": "The capital of France is",
        "max_tokens": settings.max_tokens,
        "temperature": 0,
    }
    command = [curl(url, body)]
    reply = http.post(url, body)
    evidence: dict[str, Any] = {
        "url": url,
        "status": reply.status,
        "elapsed_ms": round(reply.elapsed_ms, 1),
    }
    answer = read_answer(reply.text) if reply.ok else None
    if answer is None:
        evidence["error"] = reply.problem()
        return Check(
            "completion", Status.failed, f"POST {url}: {reply.problem()}", evidence, curl=command
        )
    text = answer.choice.get("text")
    tokens = answer.usage("completion_tokens")
    evidence.update(
        prompt_tokens=answer.usage("prompt_tokens"),
        completion_tokens=tokens,
        finish_reason=answer.choice.get("finish_reason"),
        text=text[:200] if isinstance(text, str) else None,
        streamed_events=answer.events,
    )
    if not isinstance(text, str) or not (text or tokens):
        return Check(
            "completion", Status.failed, "the answer has no generated text", evidence, curl=command
        )
    said = f"{tokens} tokens" if tokens is not None else "no usage"
    summary = f"{said} in {reply.elapsed_ms:.0f} ms: {text.strip()[:60]!r}"
    if not answer.streamed:
        return Check("completion", Status.passed, summary, evidence, curl=command)
    summary = (
        f"the router {router.name} answered a non-streaming request with a stream "
        f"({answer.events} data: events, as LMCache's PD proxy answers every completion): a "
        f"client that wants one JSON answer cannot parse it; read from the stream: {summary}"
    )
    return Check("completion", Status.warned, summary, evidence, curl=command)


def _chat_stream(
    http: Http, router: str, model: str, settings: Settings
) -> tuple[Check, dict[str, Any]]:
    url = join(router, "/v1/chat/completions")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count from 1 to 200, separated by spaces."}],
        "max_tokens": settings.max_tokens,
        "temperature": 0,
        "ignore_eos": True,  # vLLM: generate max_tokens, so every run has the same length
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    command = [curl(url, body, stream=True)]
    runs = [timing.measure(http.stream(url, body)) for _ in range(settings.requests)]
    good = [r for r in runs if r.problem is None]
    per_token = all(r.completion_tokens == r.chunks for r in good)
    latency: dict[str, Any] = {
        "requests": len(runs),
        "succeeded": len(good),
        "ttft_ms": stats([r.ttft_ms for r in good if r.ttft_ms is not None]),
        "itl_ms": stats([g for r in good for g in r.gaps_ms]),
        "itl_basis": "token" if per_token else "chunk",
        "first_gap_ms": stats([r.gaps_ms[0] for r in good if r.gaps_ms]),
        "tpot_ms": stats([r.tpot_ms for r in good if r.tpot_ms is not None]),
        "e2e_ms": stats([r.e2e_ms for r in good]),
        "completion_tokens": stats([float(r.completion_tokens or 0) for r in good]),
        "max_tokens": settings.max_tokens,
    }
    evidence: dict[str, Any] = {
        "url": url,
        "requests": [
            {
                "ttft_ms": None if r.ttft_ms is None else round(r.ttft_ms, 2),
                "e2e_ms": round(r.e2e_ms, 2),
                "chunks": r.chunks,
                "completion_tokens": r.completion_tokens,
                "prompt_tokens": r.prompt_tokens,
                "problem": r.problem,
            }
            for r in runs
        ],
        "latency": latency,
    }
    failed = [(i, r.problem) for i, r in enumerate(runs, 1) if r.problem]
    if failed:
        summary = f"{len(failed)} of {len(runs)} streaming request(s) failed: " + "; ".join(
            f"#{i}: {p}" for i, p in failed[:3]
        )
        return Check("chat-stream", Status.failed, summary, evidence, curl=command), latency
    ttft, itl = latency["ttft_ms"], latency["itl_ms"]
    summary = f"{len(runs)} request(s), {good[0].completion_tokens} tokens each"
    summary += f": TTFT p50 {ttft['p50']:.1f} ms"
    if itl:
        summary += f", ITL p50 {itl['p50']:.1f} ms (per {latency['itl_basis']})"
    return Check("chat-stream", Status.passed, summary, evidence, curl=command), latency


def _pd_ttft(
    http: Http,
    router: str,
    targets: Targets,
    model: str,
    settings: Settings,
    checks: dict[str, Check],
    connector: Connector | None,
) -> Check:
    """Timed only where PD was proven: otherwise there is no transfer to compare; and never
    on a prefill engine that a request from elsewhere than the router harms (the connector
    table's senderNeedsRouter)."""
    if targets.aggregated:
        return skip("pd-ttft", AGGREGATED)
    if any(checks[i].status is not Status.passed for i in PROOF):
        return skip("pd-ttft", "PD was not proven (pd-prefill, pd-decode, pd-kv-transfer)")
    entry = connectors.load().connectors.get(connector.name or "") if connector else None
    if entry is not None and entry.sender_needs_router:
        why = f"no prompt is timed on a prefill engine alone: {entry.sender_needs_router}"
        return skip("pd-ttft", why)
    return ttft.compare(http, router, targets.role("prefill"), model, settings)


# ---- all of it --------------------------------------------------------------------------


def run(targets: Targets, settings: Settings, http: Http | None = None) -> Report:
    """Run every check against the targets. Network problems become failed checks; the PD
    probe runs before the completion and streaming checks so its counters are not mixed with
    theirs (vLLM may update counters just after a response ends)."""
    own = http is None
    client = http or Http(settings.timeout, settings.api_key)
    try:
        report = _run(client, targets, settings)
    finally:
        if own:
            client.close()
    if client.authorized:
        for check in report.checks:
            check.curl = [authorize(command) for command in check.curl]
    return report


def _run(http: Http, targets: Targets, settings: Settings) -> Report:
    if settings.connector is not None:
        resolve_connector(settings.connector, [])  # refuses an unknown name before any request
    checks: dict[str, Check] = {}
    latency: dict[str, Any] | None = None
    connector: Connector | None = None
    checks["router-health"], checks["engines-health"] = parallel(
        [
            functools.partial(_router_health, http, targets.router),
            functools.partial(_engines_health, http, targets.engines),
        ]
    )
    router = targets.router.url
    model = settings.model
    later = ("models", "completion", "chat-stream", *PROOF, "pd-kv-bandwidth", "pd-ttft")
    reachable = router is not None and checks["router-health"].evidence.get("status") is not None
    if not reachable or router is None:
        for check_id in later:
            checks[check_id] = skip(check_id, "the router cannot be reached (router-health)")
    else:
        checks["models"], model = _models(http, router, settings.model)
        if model is None:
            model = listed_model(http, targets.engines)
            if model is not None:
                checks["models"].evidence["engine_model"] = model
                checks["models"].details.append(
                    f"the later checks ask for {model}, the model an engine lists"
                )
        if model is None:
            for check_id in later[1:]:
                checks[check_id] = skip(check_id, "no model to ask for (models)")
        else:
            pd_checks, connector = pd_proof(http, router, targets, model, settings)
            for check in pd_checks:
                checks[check.id] = check
            checks["completion"] = _completion(http, targets.router, model, settings)
            checks["chat-stream"], latency = _chat_stream(http, router, model, settings)
            checks["pd-ttft"] = _pd_ttft(http, router, targets, model, settings, checks, connector)
    return Report(
        router=targets.router,
        model=model,
        connector=connector.name if connector else settings.connector,
        connector_source=connector.source if connector else None,
        checks=[checks[i] for i in ORDER],
        latency=latency,
        targets=targets,
    )
