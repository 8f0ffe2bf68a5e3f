"""pd-stack's PD canary: one fresh prompt through the router, the prefill and decode engines'
/metrics read before and after, and one JSON line with the verdict (templates/cronjob-canary.yaml
runs it on a schedule). The same proof as `pdctl verify` (pdctl/verify/proof.py), for a pod that
has no pdctl: standard library only, run by the engine image's Python.

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
import math
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

# vLLM's own engine counters (vllm/v1/metrics/loggers.py), whatever the connector; tested equal to
# pdctl.verify.metrics'. The connector's metrics and the transfer evidence come from the config.
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"
ALLOWANCE = 1  # prompt tokens decode may compute itself (vLLM before 0.21 recomputes the last one)
EXIT = {"pass": 0, "fail": 1, "recomputed": 2, "slow": 3}
# The probe's prompt after its nonce (any words will do).
FILLER = (
    "the canary asks prefill for the prompt and decode for the tokens every few minutes".split()
)
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
ESCAPE = re.compile(r"\\(.)")
COUNTS = ("_total", "_count", "_bucket", "_sum")  # the samples that count: finite, not negative
MAX_BODY = 16 * 1024 * 1024  # the largest answer read (a /metrics page, a pod list)

Samples = list[tuple[str, dict[str, str], float]]


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


def engines(config: dict[str, Any]) -> list[tuple[str, str, str]]:
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


def parse(text: str, where: str = "/metrics") -> Samples:
    """The samples of a Prometheus text page (comments, timestamps and escaped label values
    understood); a count (_total, _count, _bucket, _sum) that is +Inf, NaN or negative is a
    Problem: its differences would prove nothing."""
    samples = []
    for number, line in enumerate(text.split("\n"), 1):
        match = SAMPLE.match(line.strip())
        if not match or line.lstrip().startswith("#"):
            continue
        name, labels, text_value = match.groups()
        try:
            value = float(text_value)
        except ValueError:
            raise Problem(f"{where}: line {number}: {text_value[:40]!r} is not a number") from None
        if name.endswith(COUNTS) and not (math.isfinite(value) and value >= 0):
            if not name.endswith("_sum") or not math.isfinite(value):
                raise Problem(f"{where}: line {number}: {name} is {text_value}: not a count")
        pairs = LABEL.findall(labels or "")
        samples.append((name, {k: ESCAPE.sub(_unescape, v) for k, v in pairs}, value))
    return samples


def _unescape(match: re.Match[str]) -> str:
    return "\n" if match.group(1) == "n" else match.group(1)


def total(samples: Samples, name: str, **labels: str) -> float | None:
    values = [v for n, ls, v in samples if n == name and labels.items() <= ls.items()]
    return sum(values) if values else None


def moved(before: Samples, after: Samples, metric: str) -> dict[str, float]:
    """How a table metric moved: a counter (name, name_total) as count, a histogram as its
    _count and _sum; {} when the engine does not export it."""
    base = metric.removesuffix("_total")
    out = {}
    where = {"count": (f"{base}_count", f"{base}_total", base), "sum": (f"{base}_sum",)}
    for key, names in where.items():
        for name in names:
            now = total(after, name)
            if now is not None:
                out[key] = now - (total(before, name) or 0.0)
                break
    return out


def scrape(targets: list[tuple[str, str, str]]) -> dict[str, Samples]:
    return {
        name: parse(http(f"{url}/metrics", timeout=10), f"{name} /metrics")
        for name, _, url in targets
    }


def judge(
    config: dict[str, Any],
    targets: list[tuple[str, str, str]],
    before: dict[str, Samples],
    after: dict[str, Samples],
    usage: dict[str, int],
) -> tuple[str, str, dict[str, Any]]:
    """The verdict, its reason, and the evidence (per engine and overall)."""
    evidence, connector = config["evidence"], config["connector"]
    engines: dict[str, Any] = {}
    for name, role, _ in targets:
        b, a = before[name], after[name]
        engines[name] = engine = {
            "role": role,
            "prompt_tokens": moved(b, a, PROMPT_TOKENS).get("count", 0.0),
            "generation_tokens": moved(b, a, GENERATION_TOKENS).get("count", 0.0),
            "connector": {m: moved(b, a, m) for m in connector["transfer"] if moved(b, a, m)},
            "failures": {m: moved(b, a, m).get("count", 0.0) for m in connector["failures"]},
        }
        metric, label = evidence["metric"], evidence["label"]
        if role == evidence["role"] and total(a, metric) is not None:
            engine["by_source"] = {
                source: (total(a, metric, **{label: source}) or 0.0)
                - (total(b, metric, **{label: source}) or 0.0)
                for source in sorted({ls.get(label, "") for n, ls, _ in a if n == metric})
            }

    def summed(role: str, key: str) -> float:
        return float(sum(e[key] for e in engines.values() if e["role"] == role))

    prompt, output = usage["prompt_tokens"], usage["completion_tokens"]
    facts: dict[str, Any] = {"engines": engines}
    if summed("prefill", "prompt_tokens") < prompt:
        counted = summed("prefill", "prompt_tokens")
        why = f"prefill counted {counted:.0f} of the {prompt} prompt tokens"
        return "fail", why + ": the router did not send the request through prefill", facts
    if summed("decode", "generation_tokens") < output:
        counted = summed("decode", "generation_tokens")
        return "fail", f"decode counted {counted:.0f} of the {output} output tokens", facts
    sources: dict[str, float] = {}
    for engine in engines.values():
        for source, tokens in engine.get("by_source", {}).items():
            sources[source] = sources.get(source, 0.0) + tokens
    failures = {
        f"{metric} on {name}": count
        for name, engine in engines.items()
        for metric, count in engine["failures"].items()
        if count > 0
    }
    facts.update(by_source=sources, failures=failures)
    if any("by_source" in engine for engine in engines.values()):
        external = sources.get(evidence["value"], 0.0)
        local = sources.get(LOCAL_COMPUTE, 0.0)
        cached = sources.get(LOCAL_CACHE_HIT, 0.0)
        if external <= 0 or local > ALLOWANCE or external + ALLOWANCE + cached < prompt:
            why = (
                f"{evidence['role']} computed {local:.0f} of the {prompt} prompt tokens itself "
                f"and loaded {external:.0f} from prefill's KV ({evidence['value']})"
            )
            return "recomputed", why, facts
    elif not any(c.get("count", 0) > 0 for e in engines.values() for c in e["connector"].values()):
        why = (
            f"no evidence of a KV transfer: {evidence['role']} exports no {evidence['metric']} "
            "and no connector transfer metric moved"
        )
        return "fail", why, facts
    if failures:
        listed = ", ".join(f"{where} +{count:.0f}" for where, count in failures.items())
        return "fail", f"transfer failures: {listed}", facts
    if len(connector["bandwidth"]) == 2:
        size, took = (
            sum(e["connector"].get(metric, {}).get("sum", 0.0) for e in engines.values())
            for metric in connector["bandwidth"]
        )
        if size > 0 and took > 0:
            gbps, floor = size / took / 1e9, config["minKvGbps"]
            facts["kv"] = {"bytes": size, "seconds": took, "gbps": round(gbps, 3), "min": floor}
            if gbps < floor:
                why = f"KV moved at {gbps:.2f} GB/s, below minKvGbps {floor:g}"
                return "slow", why + ": check the pods' RDMA device and UCX_TLS", facts
    why = f"prefill computed the {prompt} prompt tokens, decode loaded them and generated {output}"
    return "pass", why, facts


def probe(config: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    targets = engines(config)
    before = scrape(targets)
    words = ["canary", uuid.uuid4().hex]  # a nonce: no engine has this prompt in its prefix cache
    words += [FILLER[i % len(FILLER)] for i in range(max(config["promptWords"] - 2, 1))]
    body = {
        "model": config["model"],
        "prompt": " ".join(words),
        "max_tokens": config["maxTokens"],
        "temperature": 0,
        "ignore_eos": True,
    }
    key = os.environ.get("PD_CANARY_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = config["router"].rstrip("/") + "/v1/completions"
    answer = json.loads(http(url, body, headers, timeout=config["timeoutSeconds"]))
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        raise Problem(f"{url}: the answer has no usage")
    deadline = time.monotonic() + config["settleSeconds"]
    while True:  # vLLM updates its counters as the engine steps, maybe just after the answer
        verdict, reason, facts = judge(config, targets, before, scrape(targets), usage)
        if verdict == "pass" or time.monotonic() >= deadline:
            return verdict, reason, {"usage": usage, **facts}
        time.sleep(0.5)


def main() -> int:
    config: dict[str, Any] = {}
    started = time.time()
    try:
        with open(os.environ.get("PD_CANARY_CONFIG", "/etc/pd-canary/config.json")) as file:
            config = json.load(file)
        verdict, reason, facts = probe(config)
    except (Problem, OSError, ValueError, KeyError) as error:
        verdict, reason, facts = "fail", f"{type(error).__name__}: {error}", {}
    line = {
        "canary": "pd-stack",
        "release": config.get("release"),
        "verdict": verdict,
        "reason": reason,
        "seconds": round(time.time() - started, 3),
        **facts,
    }
    print(json.dumps(line, sort_keys=True), flush=True)
    return EXIT[verdict]


if __name__ == "__main__":
    sys.exit(main())
