"""A prefill series' steady rate, apart from a one-off delay at its start (kernels compiled inside
the timed window, say), from the figures the harness records for it.

The series (measure.Load, one output token each): `requests` prompts with `concurrency` in flight,
a closed loop. vLLM serves first come first served and one step takes `per_step` whole prompts
(its token budget over the prompt length). With a one-off delay D before the first step and a
steady step time s:

- the first `concurrency` requests get their token after D + k*s, k = 1..m, `per_step` of them
  at each k, where m = concurrency / per_step (the steps one full queue takes);
- each later request arrives as one finishes, finds m steps of work ahead of it and waits m*s;
- the series ends after D + (requests / per_step) * s.

The wall time and the mean TTFT give D and s (two linear equations); p50 and p90 of TTFT are then
predicted and compared with the recorded ones: the check that the model describes the run.

    python -m benchmarks.real_engines.steady RECORD.json [--write]

prints every prefill series of a record (the one-GPU record's `alone.prefill`, models.py's
`models.*.prefill` and `full_depth.*.prefill`) and, with --write, keeps the result beside each as
`steady_prefill`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.real_engines import measure
from pdctl.errors import UsageError
from pdctl.models import catalog
from pdctl.plan import roofline

FITS_WITHIN = 0.10  # predicted p50 and p90 within this share of the recorded ones


def ttfts(delay: float, step: float, load: measure.Load, per_step: int) -> list[float]:
    """Every request's TTFT in seconds under the model above."""
    waves = load.concurrency // per_step
    first = [delay + k * step for k in range(1, waves + 1) for _ in range(per_step)]
    return first + [waves * step] * (load.requests - load.concurrency)


def solve(summary: dict[str, Any], per_step: int) -> dict[str, Any]:
    """D and s from a summary of measure.summarize; the predicted and recorded percentiles."""
    load = measure.Load(**summary["load"])
    c, n = load.concurrency, load.requests
    if load.output_len != 1 or c % per_step or n % per_step or n < c:
        raise ValueError(f"not a prefill series of whole steps: {load}, {per_step} per step")
    if summary["served"] != n:
        raise ValueError(f"{n - summary['served']} of {n} requests failed: no steady rate")
    waves, steps = c // per_step, n // per_step
    wall, mean = summary["wall_s"], summary["ttft"]["mean_ms"] / 1e3
    # wall = D + steps*s;  n*mean = c*D + s*(per_step*waves*(waves+1)/2 + (n-c)*waves)
    step = (c * wall - n * mean) / (
        c * steps - per_step * waves * (waves + 1) / 2 - (n - c) * waves
    )
    delay = wall - steps * step
    predicted = measure.percentiles(ttfts(delay, step, load, per_step))
    errors = [predicted[k] / summary["ttft"][k] - 1 for k in ("p50_ms", "p90_ms")]
    return {
        "method": "benchmarks/real_engines/steady.py: closed loop, first come first served, "
        f"{per_step} prompts a step; step and delay from wall_s and mean TTFT",
        "step_ms": round(step * 1e3, 2),
        "delay_s": round(delay, 3),
        "prompt_tokens_per_s": round(per_step * load.prompt_len / step, 1),
        "predicted_ttft": {k: round(predicted[k], 2) for k in ("p50_ms", "p90_ms")},
        "fits": all(abs(e) <= FITS_WITHIN for e in errors),
    }


def prompts_per_step(gpu: str, prompt_len: int) -> int:
    """vLLM's default token budget on the GPU (run.gpu()'s text; the planner's rule) over the
    prompt."""
    name = gpu.split(",")[0].removeprefix("NVIDIA ").strip()
    return roofline.default_max_num_batched_tokens(catalog.gpu(name)) // prompt_len


def attach(part: dict[str, Any], gpu: str) -> dict[str, Any]:
    """Solve the part's `prefill` series and keep the result beside it as `steady_prefill` (the
    reason instead, where the series cannot be solved or the GPU is not in the catalog): a run
    on the GPU host goes on either way."""
    prefill = part["prefill"]
    try:
        steady = solve(prefill, prompts_per_step(gpu, prefill["load"]["prompt_len"]))
    except (ValueError, UsageError) as error:
        steady = {"error": str(error)}
    part["steady_prefill"] = steady
    return steady


def series(record: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, the part holding `prefill`) for every prefill series of a record."""
    if "prefill" in record.get("alone", {}):
        yield "alone", record["alone"]
    for group in ("models", "full_depth"):
        for name, part in record.get(group, {}).items():
            if "prefill" in part:
                yield f"{group}.{name}", part


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--write", action="store_true", help="keep each result in the record")
    args = parser.parse_args(argv)
    record = json.loads(args.record.read_text())
    for where, part in series(record):
        prefill, steady = part["prefill"], attach(part, record["gpu"])
        if "error" in steady:
            print(f"{where}: {steady['error']}")
            continue
        print(
            f"{where}: recorded {prefill['prompt_tokens_per_s']:,.0f} tokens/s, steady "
            f"{steady['prompt_tokens_per_s']:,.0f} (step {steady['step_ms']} ms after a "
            f"{steady['delay_s']} s delay); TTFT p50/p90 recorded {prefill['ttft']['p50_ms']:.0f}/"
            f"{prefill['ttft']['p90_ms']:.0f} ms, predicted "
            f"{steady['predicted_ttft']['p50_ms']:.0f}/{steady['predicted_ttft']['p90_ms']:.0f}"
            f"{'' if steady['fits'] else ' (the model does not fit this run)'}"
        )
    if args.write:
        args.record.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
