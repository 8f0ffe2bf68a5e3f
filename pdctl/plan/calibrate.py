"""Closing the loop: fit the planner's time estimates to one load step of a `pdctl bench` run on
the user's own hardware (`pdctl plan --calibrate BENCH.json`), and check the fitted planner
against the run's other steps (docs/sizing.md, "Calibrating with a bench run").

Three figures are fitted, each from what the step measured (bench's JSON field names):

- prefill time: the prefill engines' mean `phase_mean_s.prefill` (vLLM's request prefill phase,
  scheduled to first token) over the roofline's prefill of one prompt of the step's mean prompt
  length: `prefill_scale`. Fit at one request in flight, where no prompt shares a step;
- decode step: the step's `itl_ms.p50` over the roofline's step at the decode engines' share of
  the step's concurrency: `decode_scale`;
- KV link: the decode engines' `kv_gbps` (the connector's transfer histograms) replaces the
  link table's figure, as `--network-gbps` would. Under concurrency transfers share the link, so
  the per-transfer figure falls: fit at one request in flight too.

The scales are what the run's model measured over that model's own roofline on the GPU planned.
A run of another catalog model is fitted on that model's roofline and its scales applied to the
planned model's, with a warning (`mismatch`): they carry over only as far as the two models use
the GPU alike. A run under a name the catalog does not know (vLLM's --served-model-name) is taken
for the planned model, with a warning too. The bench file does not say which GPU ran it: the
planned --gpu-type must be that GPU, which nothing here can check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pdctl.errors import InputError
from pdctl.models import catalog
from pdctl.models.config import ModelArch
from pdctl.plan.layout import Estimates, Request, Workload
from pdctl.plan.sizing import engines, evaluate_layout


@dataclass(frozen=True)
class Calibration:
    source: str  # the bench file
    concurrency: int  # the step fitted on
    prefill_scale: float = 1.0
    decode_scale: float = 1.0
    link_gbps: float | None = None  # None: not measured, the link table's figure stays
    notes: tuple[str, ...] = ()  # what changed, in words

    def apply(self, req: Request) -> Request:
        return replace(
            req,
            prefill_scale=self.prefill_scale,
            decode_scale=self.decode_scale,
            network_gbps=self.link_gbps or req.network_gbps,
            calibration=self.notes,
            calibrated_to=self.source,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "concurrency": self.concurrency,
            "prefill_scale": round(self.prefill_scale, 4),
            "decode_scale": round(self.decode_scale, 4),
            "link_gbps": self.link_gbps,
            "notes": list(self.notes),
        }


def _benched(run: dict[str, Any], planned: ModelArch, source: str) -> tuple[ModelArch, str | None]:
    """The model the run measured (the planned one unless the catalog knows the run's as another),
    and the warning when the run's model is not the planned one."""
    benched = str(run.get("model") or planned.name)
    found, other = catalog.find_model(benched), catalog.find_model(planned.name)
    if benched.casefold() == planned.name.casefold() or (found and found == other):
        return planned, None
    where = f"--calibrate {source} measured {benched}, not {planned.name}"
    if found is None:
        return planned, (
            f"{where}? The model catalog does not know {benched}: fitted as if it were "
            f"{planned.name} (vLLM's --served-model-name renames a model); if another model ran, "
            "the calibrated figures are wrong"
        )
    return found.arch, (
        f"{where}: the prefill and decode scales fitted on {benched}'s roofline are applied to "
        f"{planned.name}'s, which holds only as far as the two models use the GPU alike (the KV "
        f"link is taken as measured); bench {planned.name} to calibrate on its own figures"
    )


def mismatch(run: dict[str, Any], planned: ModelArch, source: str) -> str | None:
    """The warning when the bench run measured another model than the one planned, else None."""
    return _benched(run, planned, source)[1]


def workload(step: dict[str, Any]) -> Workload:
    """The workload a closed-loop step sent: its mean prompt and output tokens, its concurrency."""
    done = max(step["succeeded"], 1)
    return Workload(
        input_len=max(1, round(step["prompt_tokens"] / done)),
        output_len=max(1, round(step["completion_tokens"] / done)),
        concurrency=step["concurrency"],
    )


def _step(run: dict[str, Any], source: str, concurrency: int | None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        s for s in run["steps"] if s.get("concurrency") and s["succeeded"]
    ]
    if not steps:
        raise InputError(
            f"{source}: no closed-loop step with answered requests to calibrate from",
            hint="bench with --concurrency (not --rate), e.g. --concurrency 1,4,16",
        )
    if concurrency is None:
        return min(steps, key=lambda s: s["concurrency"])
    for step in steps:
        if step["concurrency"] == concurrency:
            return step
    have = ", ".join(str(s["concurrency"]) for s in steps)
    raise InputError(f"{source}: no step at concurrency {concurrency} (it has {have})")


def _role(step: dict[str, Any], role: str) -> dict[str, Any]:
    found: dict[str, Any] = step.get("engines", {}).get(role, {})
    return found


def _decode_batch(step: dict[str, Any]) -> int:
    decoders = int(_role(step, "decode").get("engines") or 1)
    return max(1, math.ceil(int(step["concurrency"]) / decoders))


def fit(
    run: dict[str, Any], req: Request, tp: int, source: str, concurrency: int | None = None
) -> Calibration:
    """The calibration from the step at `concurrency` (default: the lowest) of a bench result
    measured on engines of `tp` GPUs; `req` gives the GPU and the model planned (the run's own,
    when the catalog knows it as another, is fitted on; `req`'s scales are ignored)."""
    step = _step(run, source, concurrency)
    w = workload(step)
    base = replace(
        req, arch=_benched(run, req.arch, source)[0], prefill_scale=1.0, decode_scale=1.0
    )
    layout = next(e.layout for e in engines(base, tp) if e.tp == tp)
    notes = []
    prefill_scale = decode_scale = 1.0
    measured_prefill = _role(step, "prefill").get("phase_mean_s", {}).get("prefill")
    if measured_prefill:
        estimate = base.prefill_s(tp, w.input_len)
        prefill_scale = measured_prefill / estimate
        notes.append(
            f"prefill x{prefill_scale:.2f}: {measured_prefill * 1e3:.1f} ms measured per "
            f"{w.input_len}-token prompt, {estimate * 1e3:.1f} ms estimated"
        )
    else:
        notes.append("prefill: not measured (bench needs --prefill-url or cluster mode): unchanged")
    itl = (step.get("itl_ms") or {}).get("p50")
    if itl:
        batch = _decode_batch(step)
        estimate = base.decode_step_s(tp, batch, w.mean_context, layout)
        decode_scale = itl / 1e3 / estimate
        notes.append(
            f"decode step x{decode_scale:.2f}: ITL p50 {itl:.2f} ms measured at {batch} "
            f"sequences, {estimate * 1e3:.2f} ms estimated"
        )
    gbps = _role(step, "decode").get("kv_gbps")
    if gbps:
        notes.append(f"KV link {gbps:g} GB/s measured, was {req.link_description}")
    where = f"{source} at concurrency {step['concurrency']}"
    return Calibration(
        where, step["concurrency"], prefill_scale, decode_scale, gbps or None, tuple(notes)
    )


def estimate_step(
    req: Request, step: dict[str, Any], tp: int, prefill_engines: int, decode_engines: int
) -> Estimates:
    """What the planner says for a step's workload on the deployed layout (engines of `tp`)."""
    at = replace(req, workload=workload(step))
    engine = next(e for e in engines(at, tp) if e.tp == tp)
    return evaluate_layout(at, engine, prefill_engines, engine, decode_engines)


def errors(
    run: dict[str, Any], req: Request, tp: int, prefill_engines: int = 1, decode_engines: int = 1
) -> list[dict[str, Any]]:
    """Per closed-loop step: TTFT p50 and ITL p50 measured and estimated, and the relative error
    (estimate / measured - 1)."""
    rows = []
    for step in run["steps"]:
        if not step.get("concurrency") or not step["succeeded"]:
            continue
        e = estimate_step(req, step, tp, prefill_engines, decode_engines)
        row: dict[str, Any] = {"concurrency": step["concurrency"]}
        for name, measured, estimated in (
            ("ttft_ms", step["ttft_ms"]["p50"], e.ttft_ms),
            ("itl_ms", step["itl_ms"]["p50"], e.itl_ms),
        ):
            row[name] = {
                "measured": measured,
                "estimated": round(estimated, 2),
                "error": round(estimated / measured - 1, 4),
            }
        rows.append(row)
    return rows
