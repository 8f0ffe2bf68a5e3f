"""pd-stack's PD canary: one fresh prompt through the router, the prefill and decode engines'
/metrics read before and after, and one JSON line with the verdict (templates/cronjob-canary.yaml
runs it on a schedule). It judges with `pdctl verify`'s own code (pdctl/verify/judge.py), for a
pod that has no pdctl: standard library only, run by the engine image's Python.

Verdicts and exit codes: pass 0; fail 1 (no answer, an engine not found or not readable, prefill
or decode did not count the request, transfer failures, no evidence of a transfer); recomputed 2
(decode computed the prompt itself instead of loading prefill's KV); slow 3 (the KV moved below
minKvGbps by the connector's byte and time histograms).

Configuration: the JSON file $PD_CANARY_CONFIG (the chart renders it: router URL, model, the
pools' label selectors, and the metric names from files/connectors.yaml). Engines are found by
listing pods through the Kubernetes API with the pod's ServiceAccount token ($PD_CANARY_KUBE_API
and $PD_CANARY_SA_DIR point elsewhere, for tests).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pdctl.verify.judge import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    Connector,
    Evidence,
    ExpositionError,
    Moves,
    Scrape,
    Verdict,
    kv_bandwidth,
    moves,
    parse,
    proof,
    proven,
)
from pdctl.verify.probe import (
    Answer,
    probe_request,
    read_answer,
    settle,
    settle_seconds,
    streamed_counts,
    tokenize_request,
)

EXIT = {"pass": 0, "fail": 1, "recomputed": 2, "slow": 3}
MAX_BODY = 16 * 1024 * 1024  # the largest answer read (a /metrics page, a pod list)

Targets = list[tuple[str, str, str]]  # (pod, role, base URL) of each engine


class Problem(Exception):
    """Something the canary could not do: the verdict is fail."""


def http(
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
    context: ssl.SSLContext | None = None,
) -> str:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return _read(response, url, deadline, timeout).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        detail = error.read(300).decode(errors="replace")
        raise Problem(f"{url}: HTTP {error.code} {detail}") from None
    except (OSError, ValueError) as error:
        raise Problem(f"{url}: {error}") from None


def _read(response: Any, url: str, deadline: float, timeout: float) -> bytes:
    """The body, by the deadline (`timeout` from sending to the last byte, however slowly the
    bytes drip) and up to MAX_BODY bytes."""
    chunks, size = [], 0
    while chunk := response.read1(65536):
        size += len(chunk)
        if size > MAX_BODY:
            raise Problem(f"{url}: the body is larger than {MAX_BODY} bytes")
        if time.monotonic() > deadline:
            raise Problem(f"{url}: no complete answer within {timeout:g} s")
        chunks.append(chunk)
    return b"".join(chunks)


def engines(config: dict[str, Any]) -> Targets:
    """(pod, role, base URL) of every ready engine pod of the prefill and decode pools, listed
    through the Kubernetes API (the pool Services would each answer for one pod only)."""
    sa_dir = os.environ.get("PD_CANARY_SA_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
    api = os.environ.get("PD_CANARY_KUBE_API") or "https://{}:{}".format(
        os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc"),
        os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
    )
    with open(os.path.join(sa_dir, "token")) as token:
        headers = {"Authorization": f"Bearer {token.read().strip()}"}
    ca = os.path.join(sa_dir, "ca.crt")
    context = ssl.create_default_context(cafile=ca) if api.startswith("https:") else None
    found = []
    for pool in config["pools"]:
        query = urllib.parse.urlencode({"labelSelector": pool["selector"]})
        url = f"{api}/api/v1/namespaces/{config['namespace']}/pods?{query}"
        pods = json.loads(http(url, headers=headers, context=context))["items"]
        ready = [p for p in pods if _ready(p)]
        if not ready:
            raise Problem(f"no ready pod of pool {pool['name']} ({pool['selector']})")
        for pod in ready:
            ports = {
                p.get("name"): p["containerPort"]
                for c in pod["spec"]["containers"]
                for p in c.get("ports", [])
            }
            port = next((ports[n] for n in config["portNames"] if n in ports), None)
            if port is None:
                raise Problem(f"pod {pod['metadata']['name']} has no port {config['portNames']}")
            url = f"http://{pod['status']['podIP']}:{port}"
            found.append((pod["metadata"]["name"], pool["role"], url))
    return found


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    deleting = pod["metadata"].get("deletionTimestamp")
    return bool(status.get("podIP")) and conditions.get("Ready") == "True" and not deleting


def scrape(targets: Targets) -> dict[str, Scrape]:
    pages = {}
    for name, _, url in targets:
        try:
            pages[name] = parse(http(f"{url}/metrics", timeout=10))
        except ExpositionError as error:
            raise Problem(f"{name} /metrics: {error}") from None
    return pages


def judged(
    config: dict[str, Any],
    targets: Targets,
    before: dict[str, Scrape],
    after: dict[str, Scrape],
    usage: dict[str, int],
) -> tuple[list[Verdict], list[Moves]]:
    """pd-prefill, pd-decode, pd-kv-transfer and pd-kv-bandwidth, as `pdctl verify` judges them,
    with the metric names of the config; and how each engine's counters moved."""
    rule, table = config["evidence"], config["connector"]
    evidence = Evidence(rule["metric"], rule["label"], rule["value"], rule["role"])
    connector = Connector(
        table["name"] or None,
        transfer=tuple(table["transfer"]),
        bandwidth=tuple(table["bandwidth"]),
        failures=tuple(table["failures"]),
        loaded=tuple(table.get("loaded", ())),
    )
    moved = [
        moves(name, role, before[name], after[name], config["model"], evidence, connector)
        for name, role, _ in targets
    ]
    verdicts = proof(moved, usage["prompt_tokens"], usage["completion_tokens"], evidence, connector)
    return [*verdicts, kv_bandwidth(moved, connector, config["minKvGbps"])], moved


def outcome(verdicts: list[Verdict]) -> tuple[str, str]:
    """The canary's verdict (a key of EXIT) and its reason: the first check that failed (the
    KV recomputed, or fail), else the bandwidth below the floor (slow), else pass."""
    for verdict in verdicts:
        if verdict.status == FAIL:
            return ("recomputed" if verdict.facts.get("recomputed") else "fail"), verdict.summary
    bandwidth = verdicts[-1]
    if bandwidth.status == WARN:
        floor = bandwidth.facts["min_kv_gbps"]
        why = f"{bandwidth.summary}, below minKvGbps {floor:g}"
        return "slow", why + ": check the pods' RDMA device and UCX_TLS"
    return "pass", "; ".join(v.summary for v in verdicts if v.status == PASS)


def facts(verdicts: list[Verdict], moved: list[Moves]) -> dict[str, Any]:
    """What the verdict line shows besides the verdict: each check, each engine's moves, the
    prompt tokens by source, the transfer failures, and the KV bandwidth."""
    kv = next(v for v in verdicts if v.id == "pd-kv-transfer")
    bandwidth = verdicts[-1]
    return {
        "checks": {v.id: {"status": v.status, "summary": v.summary} for v in verdicts},
        "engines": {m.engine: m.as_dict() for m in moved},
        "by_source": kv.facts.get("by_source", {}),
        "failures": kv.facts["connector_failures"],
        "kv": None if bandwidth.status == SKIP else bandwidth.facts,
    }


def _counts(
    answer: Answer | None, targets: Targets, body: dict[str, Any], headers: dict[str, str], url: str
) -> dict[str, int]:
    """The probe's prompt and completion tokens: its JSON answer's usage, or for an answer the
    router streamed unasked (LMCache's PD proxy), a prefill engine's /tokenize and the stream's
    finish_reason (pdctl/verify/probe.py says why)."""
    if answer is None:
        raise Problem(f"{url}: the answer is neither JSON nor server-sent events of JSON")
    if not answer.streamed:
        counts = {k: answer.usage(k) for k in ("prompt_tokens", "completion_tokens")}
        if not all(isinstance(v, int) for v in counts.values()):
            raise Problem(f"{url}: the answer has no usage")
        return counts
    engine = next(base for _, role, base in targets if role == "prefill")
    asked = tokenize_request(body["model"], body["prompt"])
    tokenized = json.loads(http(f"{engine}/tokenize", asked, headers))
    prompt, output, missing = streamed_counts(answer, tokenized, body["max_tokens"])
    if prompt is None or output is None:
        raise Problem(f"{url}: the answer came streamed, unasked; {missing}")
    return {"prompt_tokens": prompt, "completion_tokens": output, "streamed_events": answer.events}


def probe(config: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    targets = engines(config)
    before = scrape(targets)
    body = probe_request(config["model"], config["promptWords"], config["maxTokens"])
    key = os.environ.get("PD_CANARY_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = config["router"].rstrip("/") + "/v1/completions"
    answer = read_answer(http(url, body, headers, timeout=config["timeoutSeconds"]))
    usage = _counts(answer, targets, body, headers, url)
    verdicts, moved = settle(
        lambda: judged(config, targets, before, scrape(targets), usage),
        lambda found: proven(found[0]),
        settle_seconds(config["settleSeconds"], config["connector"].get("metricsEvery", 0)),
    )
    verdict, reason = outcome(verdicts)
    return verdict, reason, {"usage": usage, **facts(verdicts, moved)}


def main() -> int:
    config: dict[str, Any] = {}
    started = time.time()
    try:
        with open(os.environ.get("PD_CANARY_CONFIG", "/etc/pd-canary/config.json")) as file:
            config = json.load(file)
        verdict, reason, found = probe(config)
    except (Problem, OSError, ValueError, KeyError) as error:
        verdict, reason, found = "fail", f"{type(error).__name__}: {error}", {}
    line = {
        "canary": "pd-stack",
        "release": config.get("release"),
        "verdict": verdict,
        "reason": reason,
        "seconds": round(time.time() - started, 3),
        **found,
    }
    print(json.dumps(line, sort_keys=True), flush=True)
    return EXIT[verdict]


if __name__ == "__main__":
    sys.exit(main())
