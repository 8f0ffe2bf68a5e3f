"""The simulator's queueing beside the planner's, and both beside a real engine's record.

1. PD, in virtual time (pdctl/simulator/closed_loop.py, as tests/test_plan_simulator.py): one
   prefill and one decode engine of Llama-3.1-8B on H100-80GB, 1024-token prompts, 128 out (drawn
   within 20%, seed 0, as the test draws them), a steady closed loop of 10 x concurrency requests
   after a dropped first wave, against `pdctl plan`'s TTFT and ITL for the same workload; and the
   TTFT of the same loop with every output exactly 128 tokens (lockstep), over waves 2-11 and
   22-41.
2. Aggregated, against the real-engine record benchmarks/records/real-engines-h200-1gpu-bench.json
   (`pdctl bench` to one vLLM 0.26.0 engine of Llama-3.1-8B on an H200, 2,048-token prompts, 128
   out, 16 requests at each of 1, 4 and 16 in flight): the simulator runs that load as the bench
   did (16 requests, none dropped) and the planner estimates it (pdctl/plan/aggregated.py).

3. With `--sweep`: the PD loop of 1. over 1-64 in flight and 512-4,096-token prompts, each point's
   TTFT and ITL beside the plan's, the points off by more than 15% marked (docs/sizing.md "TTFT
   under load").

4. With `--http`: bench's default workload over HTTP (no --output-spread: outputs drawn within
   bench's default share) against `pdctl up --engine sim` of the init-written 1P1D of
   Llama-3.1-8B on 2 x H100-80GB through the real vllm-router, 4,096 words in, 512 tokens out, 1
   and 8 in flight, bench's default 32 requests a step, each load benched twice, beside `pdctl
   plan --concurrency 1|8` for the same layout and lengths (the virtual-time twin is
   tests/test_plan_simulator.py).

Not a test: it prints where the two models part and what the real engine did.

    python benchmarks/simulator_vs_plan.py [--sweep] [--http]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdctl.models import catalog  # noqa: E402
from pdctl.models.config import ModelArch  # noqa: E402
from pdctl.plan import aggregated, sizing  # noqa: E402
from pdctl.plan.layout import Engine, Request, Workload  # noqa: E402
from pdctl.plan.roofline import request_overhead_seconds  # noqa: E402
from pdctl.simulator import closed_loop, model  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
RECORD = ROOT / "benchmarks/records/real-engines-h200-1gpu-bench.json"


def _engine(req: Request) -> Engine:
    return next(e for e in sizing.engines(req) if e.tp == 1)


def _arch() -> ModelArch:
    entry = catalog.find_model(MODEL)
    assert entry is not None
    return entry.arch


def pd_rows() -> None:
    gpu = catalog.gpu("H100-80GB")
    print("PD, H100-80GB, 1024 in / 128 out (within 20%), steady closed loop (ms, p50)")
    print("in flight  TTFT plan  TTFT sim   ITL plan  ITL sim   lockstep: waves 2-11  22-41")
    for concurrency in (1, 8, 32):
        workload = Workload(input_len=1024, output_len=128, concurrency=concurrency)
        planned, sim = closed_loop.against_plan(_arch(), gpu, workload, spread=0.2)
        _, pd = closed_loop.planned_pair(_arch(), gpu, workload)
        equal = closed_loop.run(pd, workload, 42 * concurrency)
        early = closed_loop.steady(equal[: 11 * concurrency], concurrency)
        late = closed_loop.steady(equal, 21 * concurrency)
        print(
            f"{concurrency:9}  {planned.ttft_ms:9.1f}  {sim.ttft_p50_s * 1000:8.1f}  "
            f"{planned.itl_ms:8.2f}  {sim.itl_p50_s * 1000:7.2f}  "
            f"{early.ttft_p50_s * 1000:20.1f}  {late.ttft_p50_s * 1000:5.1f}"
        )


def sweep_rows() -> None:
    gpu = catalog.gpu("H100-80GB")
    print("\nPD sweep, H100-80GB, 128 out (within 20%), steady closed loop (ms, p50)")
    print("prompt  in flight  TTFT plan  TTFT sim   ITL plan  ITL sim")
    misses = 0
    for prompt in (512, 1024, 2048, 4096):
        for concurrency in (1, 8, 16, 32, 64):
            workload = Workload(input_len=prompt, output_len=128, concurrency=concurrency)
            planned, sim = closed_loop.against_plan(_arch(), gpu, workload, spread=0.2)
            ttft, itl = sim.ttft_p50_s * 1000, sim.itl_p50_s * 1000
            off = abs(ttft / planned.ttft_ms - 1) > 0.15 or abs(itl / planned.itl_ms - 1) > 0.15
            misses += off
            print(
                f"{prompt:6}  {concurrency:9}  {planned.ttft_ms:9.1f}  {ttft:8.1f}  "
                f"{planned.itl_ms:8.2f}  {itl:7.2f}{'  off by more than 15%' if off else ''}"
            )
    print(f"{misses} of 20 points off by more than 15%")


def aggregated_rows() -> None:
    record = json.loads(RECORD.read_text())
    steps = record["bench"]["alone"]["result"]["steps"]
    gpu = catalog.gpu("H200")
    print(f"\nAggregated, H200, beside {RECORD.relative_to(ROOT)} (ms, p50)")
    print("in flight  TTFT real  TTFT plan  TTFT sim   ITL real  ITL plan  ITL sim")
    for step in steps:
        concurrency, requests = step["concurrency"], step["requests"]
        prompt = round(step["prompt_tokens"] / requests)
        output = round(step["completion_tokens"] / requests)
        workload = Workload(input_len=prompt, output_len=output, concurrency=concurrency)
        req = Request(_arch(), gpu, gpus=1, workload=workload)
        planned = aggregated.aggregated(req, [_engine(req)])
        assert planned is not None and planned.replicas == 1
        timing = model.timing(req.arch, gpu, 1)
        pd = closed_loop.Pd(timing, timing, 0.0, request_overhead_seconds(gpu), x=1, y=0)
        served = closed_loop.run(pd, workload, requests)
        sim = closed_loop.steady(served, 0)  # as the bench ran: nothing dropped
        print(
            f"{concurrency:9}  {step['ttft_ms']['p50']:9.1f}  {planned.ttft_ms:9.1f}  "
            f"{sim.ttft_p50_s * 1000:8.1f}  {step['itl_ms']['p50']:8.2f}  "
            f"{planned.itl_ms:8.2f}  {sim.itl_p50_s * 1000:7.2f}"
        )


HTTP_LENGTHS = (4096, 512)
HTTP_LOADS = (1, 8)
HTTP_RUNS = 2  # each load benched twice: the same default bench should read the same
RELEASE = "simvsplan"


def _pdctl(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pdctl", *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def http_rows() -> None:
    prompt, output = HTTP_LENGTHS
    lengths = ["--input-len", str(prompt), "--output-len", str(output)]
    print(
        f"\nPD over HTTP, pdctl up --engine sim, 2 x H100-80GB (1P1D), {prompt} in / {output} out, "
        "bench's default workload (ms, p50)"
    )
    print("in flight  TTFT plan  TTFT HTTP   ITL plan  ITL HTTP  requests")
    with tempfile.TemporaryDirectory() as folder:
        values = str(Path(folder) / "values.yaml")
        model = ["--model", MODEL, "--gpus", "2", "--gpu-type", "H100-80GB", "--offline"]
        _pdctl("init", *model, "--mode", "pd", *lengths, "--out", values)
        _pdctl("up", values, "--engine", "sim", "--gpu-type", "H100-80GB", "--release", RELEASE)
        try:
            for concurrency in HTTP_LOADS:
                load = ["--concurrency", str(concurrency)]
                asked = [*model, "--mode", "pd", *lengths, *load, "-o", "json"]
                e = json.loads(_pdctl("plan", *asked))["estimates"]
                for _ in range(HTTP_RUNS):  # the two runs of one bench differed by 60%
                    bench = _pdctl("bench", "--release", RELEASE, *lengths, *load, "-o", "json")
                    (step,) = json.loads(bench)["steps"]
                    print(
                        f"{concurrency:9}  {e['ttft_ms']:9.1f}  {step['ttft_ms']['p50']:9.1f}  "
                        f"{e['itl_ms']:9.2f}  {step['itl_ms']['p50']:8.2f}  {step['succeeded']:8}"
                    )
        finally:
            _pdctl("down", "--release", RELEASE)


if __name__ == "__main__":
    pd_rows()
    aggregated_rows()
    if "--sweep" in sys.argv[1:]:
        sweep_rows()
    if "--http" in sys.argv[1:]:
        http_rows()
