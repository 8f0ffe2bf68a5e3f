"""How long does `pdctl plan` take as the GPU count grows?

The layout search evaluates every split of the GPUs into prefill and decode engines, and the plan's
sensitivity (`plan.flip`) searches again for each neighbouring workload, so the time grows with
the GPU count. Each count runs `python -m pdctl plan` once in a fresh process (the planner's
caches start empty, as for a user) and prints its wall time; `--tree` times another checkout's
`pdctl` with this interpreter (to compare a change with the commit before it).

    python benchmarks/plan_speed.py                      # 8, 32, 64, 128 and 256 GPUs
    python benchmarks/plan_speed.py --gpus 64,256 --tree /tmp/before
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def seconds(tree: Path, gpus: int, model: str, gpu_type: str) -> float:
    argv = [sys.executable, "-m", "pdctl", "plan", "-m", model, "--gpus", str(gpus)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    subprocess.run(
        [*argv, "--gpu-type", gpu_type], cwd=tree, env=env, check=True, capture_output=True
    )
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="8,32,64,128,256")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--gpu-type", default="H200")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose pdctl runs")
    args = parser.parse_args()
    print(f"pdctl plan -m {args.model} --gpu-type {args.gpu_type}, tree {args.tree}")
    for gpus in (int(n) for n in args.gpus.split(",")):
        print(f"  --gpus {gpus:4}: {seconds(args.tree, gpus, args.model, args.gpu_type):6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
