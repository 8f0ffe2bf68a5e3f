"""What verify reports: the targets it checks, its settings, each check's verdict with evidence,
and the whole report (its `-o json` shape is `Report.as_dict`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pdctl import defaults

ORDER = (
    "router-health",
    "models",
    "engines-health",
    "completion",
    "chat-stream",
    "pd-prefill",
    "pd-decode",
    "pd-kv-transfer",
    "pd-kv-bandwidth",
    "pd-ttft",
)
# The checks that prove PD (pd-kv-bandwidth and pd-ttft judge how fast the proven transfer was).
PROOF = ("pd-prefill", "pd-decode", "pd-kv-transfer")
AGGREGATED = "aggregated release: no KV transfer to prove"  # why the PD checks skip there
TITLES = {
    "router-health": "the router answers /health",
    "models": "/v1/models lists the served model",
    "engines-health": "every engine answers /health",
    "completion": "a non-streaming completion through the router",
    "chat-stream": "a streaming chat completion through the router",
    "pd-prefill": "prefill computed the prompt",
    "pd-decode": "decode produced the output",
    "pd-kv-transfer": "KV reached decode through the connector",
    "pd-kv-bandwidth": "KV moved at the speed of a fast link",
    "pd-ttft": "PD adds little to the prefill engine's own TTFT",
}


def adds_or_saves(ms: float) -> str:
    """A signed time in words: "adds 12 ms", "saves 2 ms" (never "adds -2 ms")."""
    rounded = round(ms)
    return f"saves {-rounded} ms" if rounded < 0 else f"adds {rounded} ms"


class Status(str, Enum):
    passed = "pass"
    failed = "fail"
    skipped = "skip"
    warned = "warn"  # passes, with something to fix


@dataclass(frozen=True)
class Endpoint:
    """The router or one engine: a base URL, or why there is none (a port-forward failed)."""

    name: str  # the pod's name, or the URL given
    role: str  # router, prefill, decode or both
    url: str | None
    error: str | None = None
    forward: str | None = None  # the kubectl port-forward this URL stands for (cluster mode)


@dataclass(frozen=True)
class Targets:
    router: Endpoint
    engines: tuple[Endpoint, ...] = ()

    def role(self, role: str) -> list[Endpoint]:
        return [e for e in self.engines if e.role == role]

    @property
    def aggregated(self) -> bool:
        """Engines of role both only (pools that prefill and decode their own requests)."""
        return bool(self.engines) and all(e.role == "both" for e in self.engines)


@dataclass(frozen=True)
class Settings:
    model: str | None = None
    connector: str | None = None  # a key of the connector table; None: detect from metrics
    requests: int = defaults.VERIFY_REQUESTS
    max_tokens: int = defaults.VERIFY_MAX_TOKENS
    prompt_words: int = defaults.VERIFY_PROMPT_WORDS
    timeout: float = defaults.VERIFY_TIMEOUT_S
    settle: float = defaults.VERIFY_SETTLE_S
    min_kv_gbps: float | None = None  # below it pd-kv-bandwidth warns; None: the link table's
    api_key: str | None = field(default=None, repr=False)  # sent as Authorization: Bearer


@dataclass
class Check:
    id: str
    status: Status
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)  # more lines for people
    curl: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return TITLES[self.id]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": self.evidence,
            "curl": self.curl,
        }


@dataclass
class Report:
    router: Endpoint
    model: str | None
    connector: str | None
    connector_source: str | None  # "option", "detected" or None
    checks: list[Check]
    latency: dict[str, Any] | None
    targets: Targets

    @property
    def passed(self) -> bool:
        return all(c.status is not Status.failed for c in self.checks)

    @property
    def aggregated(self) -> bool:
        return self.targets.aggregated

    @property
    def pd_proven(self) -> bool:
        pd = [c for c in self.checks if c.id in PROOF]
        return bool(pd) and all(c.status is Status.passed for c in pd)

    def counts(self) -> dict[str, int]:
        return {s.value: sum(c.status is s for c in self.checks) for s in Status}

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "pd_proven": self.pd_proven,
            "aggregated": self.aggregated,
            "router": self.router.url or self.router.name,
            "router_name": self.router.name,  # a pod, the URL given, or what plays a local router
            "model": self.model,
            "connector": self.connector,
            "connector_source": self.connector_source,
            "engines": [
                {"name": e.name, "role": e.role, "url": e.url, "error": e.error}
                for e in self.targets.engines
            ],
            "counts": self.counts(),
            "checks": [c.as_dict() for c in self.checks],
            "latency": self.latency,
        }


# ---- statistics -------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), interpolating linearly between the nearest values."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def stats(values: list[float]) -> dict[str, float | int] | None:
    """mean, p50, p90, p99, min, max and n of values in ms (rounded to 0.01), or None."""
    if not values:
        return None
    summary: dict[str, float | int] = {
        "mean": round(sum(values) / len(values), 2),
        "p50": round(percentile(values, 50), 2),
        "p90": round(percentile(values, 90), 2),
        "p99": round(percentile(values, 99), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }
    summary["n"] = len(values)
    return summary


# ---- helpers -------------------------------------------------------------------------------


def join(base: str, path: str) -> str:
    return base.rstrip("/") + path


def skip(check_id: str, why: str) -> Check:
    return Check(check_id, Status.skipped, why)
