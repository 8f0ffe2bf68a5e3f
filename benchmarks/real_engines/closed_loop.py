"""A PD release's TTFT under a closed loop, wave by wave: what decides between the simulator's
queueing and the planner's (docs/simulator.md "How close it comes to the planner").

    # where a release runs (pdctl up, real vLLM or the simulator): measure, keep every request
    python -m benchmarks.real_engines.closed_loop run --release pd --record record.json
    # anywhere: the record's TTFT by window, beside the planner's and the simulator's
    python -m benchmarks.real_engines.closed_loop compare record.json

`run` sends the workload of tests/test_plan_simulator.py (1,024-token prompts of the generated
tokenizer's words, no shared prefix, 128 output tokens, or with `--output-spread S` each
request's output drawn within S of 128, as the test draws them) through the release's router: a
closed loop at each concurrency of 11 x concurrency requests, and at the largest one a long loop
of 42 waves. Every request's send, first-token and end times are kept, so the record can be cut
into windows of waves afterwards: requests in the order they ended, the first wave (`concurrency`
requests) dropped, then waves 2-11, 12-21 and 22-41.

`compare` prints, per window, the record's TTFT p50 beside the simulator's (pdctl.simulator.
closed_loop, virtual time) and `pdctl plan`'s estimate for the record's model and GPU. On a host
where prefill and decode share one GPU, absolute times differ from a plan of one GPU each; the
shape across windows (a transient that dies out, or a flat steady loop) is what the record shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.real_engines import measure  # noqa: E402

INPUT, OUTPUT = 1024, 128
CONCURRENCY = (1, 8, 32)
WAVES = 11  # the first one dropped: 10 x concurrency kept, as the test compares
LONG_WAVES = 42  # at the largest concurrency: windows up to wave 41
WINDOWS = ((2, 11), (12, 21), (22, 41))  # waves, first one 1


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 2)


def loop_record(
    timings: list[measure.Timing], load: measure.Load, output_spread: float = 0.0
) -> dict[str, Any]:
    """A load's requests, as [sent, ttft, ended] milliseconds from the first send, in the order
    they were sent; errors apart."""
    start = min(t.sent for t in timings if t.error is None)
    return {
        "load": {**load.__dict__, "output_spread": output_spread},
        "errors": [t.error for t in timings if t.error is not None][:5],
        "requests_ms": [
            [_ms(t.sent - start), _ms(t.ttft), _ms(t.ended - start)]
            for t in timings
            if t.error is None
        ],
    }


def windows(requests_ms: list[list[float]], concurrency: int) -> dict[str, float]:
    """TTFT p50 (ms) of each window of waves: requests in the order they ended, wave k the k-th
    `concurrency` of them."""
    ended = sorted(requests_ms, key=lambda r: r[2])
    found: dict[str, float] = {}
    for first, last in WINDOWS:
        kept = ended[(first - 1) * concurrency : last * concurrency]
        if len(kept) == (last - first + 1) * concurrency:
            found[f"waves {first}-{last}"] = round(statistics.median(r[1] for r in kept), 1)
    return found


def run_command(args: argparse.Namespace) -> int:
    from pdctl.local import lifecycle

    found = lifecycle.endpoints(args.release)
    if found is None:
        raise SystemExit(f"no live local release {args.release!r} (pdctl up)")
    model = _get(f"{found.router}/v1/models")["data"][0]["id"]
    vocab = int(args.vocab_size)
    record: dict[str, Any] = {"release": found.describe(), "model": model, "loops": []}
    loads = [measure.Load(INPUT, OUTPUT, c, WAVES * c) for c in CONCURRENCY]
    loads.append(measure.Load(INPUT, OUTPUT, CONCURRENCY[-1], LONG_WAVES * CONCURRENCY[-1]))
    spread = args.output_spread
    for load in loads:
        seed = measure.seed("closed-loop", load)
        timings = asyncio.run(measure.timed(found.router, model, load, vocab, seed, spread))
        part = loop_record(timings, load, spread)
        print(load, windows(part["requests_ms"], load.concurrency), part["errors"], flush=True)
        record["loops"].append(part)
    args.record.write_text(json.dumps(record, indent=1))
    return 0


def simulated(
    model: str, gpu: str, concurrency: int, waves: int, output_spread: float = 0.0
) -> tuple[dict[str, float], float]:
    """The simulator's windows in virtual time, and the plan's TTFT, for 1P1D of `model` on
    `gpu`."""
    from pdctl.models import catalog
    from pdctl.plan.layout import Workload
    from pdctl.simulator import closed_loop

    entry = catalog.find_model(model)
    if entry is None:
        raise SystemExit(f"{model}: not in the catalog")
    workload = Workload(input_len=INPUT, output_len=OUTPUT, concurrency=concurrency)
    planned, pd = closed_loop.planned_pair(entry.arch, catalog.gpu(gpu), workload)
    served = closed_loop.run(pd, workload, waves * concurrency, spread=output_spread)
    rows = [[s.sent * 1e3, s.ttft_s * 1e3, s.token_times[-1] * 1e3] for s in served]
    return windows(rows, concurrency), planned.ttft_ms


def compare_command(args: argparse.Namespace) -> int:
    record = json.loads(args.record.read_text())
    record = record.get("closed_loop", record)  # a kept record holds run's output there
    model = args.model or record["model"]
    print(f"{args.record.name}: {record['release']}")
    print(f"simulator and plan: {model} 1P1D on {args.gpu}, one GPU each")
    for loop in record["loops"]:
        load = loop["load"]
        waves = len(loop["requests_ms"]) // load["concurrency"]
        spread = load.get("output_spread", 0.0)
        sim, plan = simulated(model, args.gpu, load["concurrency"], waves, spread)
        real = windows(loop["requests_ms"], load["concurrency"])
        print(
            f"\n{load['concurrency']} in flight, {waves} waves, output spread {spread:g}; "
            f"plan TTFT {plan:.1f} ms"
        )
        for window, ms in real.items():
            simulator = sim.get(window, float("nan"))
            print(f"  {window:12} record {ms:8.1f} ms   simulator {simulator:8.1f} ms")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="measure a live local release (pdctl up)")
    run.add_argument("--release", default="pd")
    run.add_argument("--vocab-size", default=128256, help="the generated tokenizer's vocabulary")
    run.add_argument("--record", type=Path, default=Path("closed-loop-record.json"))
    run.add_argument(
        "--output-spread", type=float, default=0.0, help="output lengths within this share of 128"
    )
    run.set_defaults(go=run_command)
    compare = commands.add_parser("compare", help="a record beside the simulator and the plan")
    compare.add_argument("record", type=Path)
    compare.add_argument("--model", help="the catalog model (default: the record's)")
    compare.add_argument("--gpu", default="H200", help="the catalog GPU to plan and simulate on")
    compare.set_defaults(go=compare_command)
    args = parser.parse_args()
    return int(args.go(args))


if __name__ == "__main__":
    sys.exit(main())
