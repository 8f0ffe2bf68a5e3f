"""One bench run: find the model, resolve the connector from the engines' metrics, then per
concurrency step send the load through the router, time every request and read what each role's
engines counted. Network problems become errors in a step, never a crash."""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass, field
from typing import Any

from pdctl.bench import engines, summary
from pdctl.bench.load import run_step
from pdctl.bench.workload import Prompts, Workload
from pdctl.errors import EnvironmentProblem
from pdctl.verify.checks import listed_model
from pdctl.verify.client import Http
from pdctl.verify.proof import resolve_connector, scrape_all
from pdctl.verify.report import Targets, join


@dataclass
class Result:
    router: str
    model: str
    connector: str | None
    workload: Workload
    steps: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # engines whose /metrics could not be read

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


def _model(http: Http, targets: Targets) -> str:
    found = listed_model(http, (targets.router, *targets.engines))
    if found is None:
        raise EnvironmentProblem(
            f"no model listed at {targets.router.url}/v1/models (nor by an engine)",
            hint="give --model, and check that the router answers (pdctl verify)",
        )
    return found


def _seed(workload: Workload, concurrency: int) -> int | None:
    """Per step: a fixed --seed gives each step its own prompts, the same on every run."""
    if workload.seed is None:
        return None
    return zlib.crc32(f"{workload.seed}:{concurrency}".encode())


def _body(workload: Workload, model: str, prompts: Prompts) -> dict[str, Any]:
    return workload.body(model, prompts.next())


def run(targets: Targets, workload: Workload) -> Result:
    router = targets.router.url
    if router is None:
        raise EnvironmentProblem(f"the router cannot be reached: {targets.router.error}")
    url = join(router, "/v1/completions")
    with Http(workload.timeout) as http:
        model = workload.model or _model(http, targets)
        pages, problems = scrape_all(http, targets.engines)
        connector = resolve_connector(workload.connector, list(pages.values()))
        result = Result(router, model, connector.name, workload, problems=problems)
        for concurrency in workload.concurrency:
            prompts = Prompts(workload.input_len, _seed(workload, concurrency))
            before, _ = scrape_all(http, targets.engines)
            timed, wall = run_step(
                url,
                functools.partial(_body, workload, model, prompts),
                concurrency,
                workload.requests,
                workload.duration,
                workload.timeout,
            )
            after, _ = scrape_all(http, targets.engines)
            step = summary.summarize(concurrency, timed, wall, workload)
            step["engines"] = engines.by_role(targets.engines, before, after, model, connector)
            result.steps.append(step)
    return result
