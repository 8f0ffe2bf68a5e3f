"""One bench run: find the model, resolve the connector from the engines' metrics, then per
concurrency step send the load through the router, time every request and read what each role's
engines counted. Network problems become errors in a step, never a crash."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.bench import engines, summary
from pdctl.bench.gauges import Sampler
from pdctl.bench.load import run_open_step, run_step
from pdctl.bench.workload import BenchSettings, DatasetRequests, Prompts, Source
from pdctl.errors import EnvironmentProblem, InputError
from pdctl.plan.queueing import output_lengths
from pdctl.verify.checks import listed_model, served_by
from pdctl.verify.client import Http
from pdctl.verify.proof import resolve_connector, scrape_all
from pdctl.verify.report import Targets, join

AGGREGATED = "aggregated serving"


@dataclass
class Result:
    router: str
    model: str
    connector: str | None
    workload: BenchSettings
    steps: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # engines whose /metrics could not be read
    layout: str = ""  # the engines per role: "1 prefill + 1 decode"
    aggregated: bool = False  # every engine prefills and decodes: no connector to name
    engines: str = ""  # what serves them: "vLLM", "the pd-stack simulator (not vLLM)"

    def none_succeeded(self) -> str | None:
        """Why no request of any step succeeded (counts and the first errors); None when one
        did."""
        if any(s["succeeded"] for s in self.steps):
            return None
        sent = sum(s["succeeded"] + s["errors"] for s in self.steps)
        first = next((s["error_samples"][0] for s in self.steps if s["error_samples"]), None)
        why = f"no request succeeded: {sent} sent over {len(self.steps)} step(s), all failed"
        return why + (f"; most common error: {first}" if first else "")

    @property
    def slo_missed_everywhere(self) -> bool:
        """An SLO was given and no step attained it."""
        return self.workload.slo and not any(s["slo_met"] for s in self.steps)

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "router": self.router,
            "model": self.model,
            "connector": self.connector,
            "layout": self.layout,
            "aggregated": self.aggregated,
            "served_by": self.engines,
            "workload": w.as_dict(),
            "slo": {
                "ttft_ms": w.slo_ttft_ms,
                "itl_ms": w.slo_itl_ms,
                "attainment": w.slo_attainment,
                "met_at_any_step": None if not w.slo else not self.slo_missed_everywhere,
            },
            "steps": self.steps,
            "problems": self.problems,
        }


def layout(targets: Targets) -> str:
    """The engines per role, as bench found them: "1 prefill + 1 decode", "2 engines (aggregated
    serving)"."""
    roles: dict[str, int] = {}
    for engine in targets.engines:
        roles[engine.role] = roles.get(engine.role, 0) + 1
    named = {"both": "engine"}
    return (
        " + ".join(
            f"{n} {named.get(role, role)}{'s' if n > 1 and role == 'both' else ''}"
            for role, n in roles.items()
        )
        or "no engines found"
    ) + (f" ({AGGREGATED})" if targets.aggregated else "")


def _model(http: Http, targets: Targets) -> str:
    found = listed_model(http, (targets.router, *targets.engines))
    if found is None:
        raise InputError(  # the deployment (or the URL) is bad: exit 1
            f"no model listed at {targets.router.url}/v1/models (nor by an engine): no answer, "
            "not JSON, larger than pdctl reads, or no model in it",
            hint="give --model, and check that the router answers (pdctl verify)",
        )
    return found


def _seed(workload: BenchSettings, load: float) -> int | None:
    """Per step: a fixed --seed gives each step its own prompts (and arrival times), the same on
    every run."""
    if workload.seed is None:
        return None
    return zlib.crc32(f"{workload.seed}:{load:g}".encode())


def _body(workload: BenchSettings, model: str, source: Source) -> dict[str, Any]:
    return workload.body(model, *source.next())


def _step(
    url: str,
    workload: BenchSettings,
    model: str,
    concurrency: int | None,
    rate: float | None,
    dataset: DatasetRequests | None,
    api_key: str | None,
) -> dict[str, Any]:
    """Send one load step; its numbers, less the engines' counters."""
    seed = _seed(workload, rate if rate is not None else concurrency or 0)
    shared = round(workload.prefix_share * workload.input_len)
    outputs = output_lengths(workload.output_len, workload.output_spread, seed)
    source = dataset or Prompts(workload.input_len, seed, shared, outputs)
    body = functools.partial(_body, workload, model, source)
    held = None
    if rate is not None:
        timed, wall, held = run_open_step(
            url,
            body,
            rate,
            workload.requests,
            workload.duration,
            workload.timeout,
            workload.max_in_flight,
            seed,
            api_key,
        )
    else:
        assert concurrency is not None
        timed, wall = run_step(
            url, body, concurrency, workload.requests, workload.duration, workload.timeout, api_key
        )
    step = summary.summarize(concurrency, timed, wall, workload)
    step["rate"] = rate
    step["held_arrivals"] = held
    step["dataset_wrapped"] = None if dataset is None else dataset.wrapped
    return step


Progress = Callable[[int, int, "dict[str, Any] | None", "int | None", "float | None"], None]


def run(
    targets: Targets,
    workload: BenchSettings,
    progress: Progress | None = None,
    api_key: str | None = None,
) -> Result:
    """Every step of the workload through the router, with the API key if one is given.
    `progress(i, n, step, concurrency, rate)` is called as step i of n starts (step None) and
    when it ended (its numbers)."""
    router = targets.router.url
    if router is None:
        raise EnvironmentProblem(f"the router cannot be reached: {targets.router.error}")
    url = join(router, "/v1/completions")
    with Http(workload.timeout, api_key) as http:
        model = workload.model or _model(http, targets)
        pages, problems = scrape_all(http, targets.engines)
        connector = resolve_connector(workload.connector, list(pages.values()))
        result = Result(router, model, connector.name, workload, problems=problems)
        result.layout = layout(targets)
        result.aggregated = targets.aggregated
        result.engines = served_by(http, targets.engines)
        dataset = None if workload.dataset is None else DatasetRequests(workload.dataset)
        for index, (concurrency, rate) in enumerate(workload.steps, start=1):
            if progress:
                progress(index, len(workload.steps), None, concurrency, rate)
            before, _ = scrape_all(http, targets.engines)
            with Sampler(targets.engines, model, api_key=api_key) as sampler:
                step = _step(url, workload, model, concurrency, rate, dataset, api_key)
            after, _ = scrape_all(http, targets.engines)
            step["engines"] = engines.by_role(targets.engines, before, after, model, connector)
            for role, gauges in sampler.by_role().items():
                if role in step["engines"]:
                    step["engines"][role]["gauges"] = gauges
            result.steps.append(step)
            if progress:
                progress(index, len(workload.steps), step, concurrency, rate)
    return result
