"""How close do `pdctl bench`'s percentiles come to the delays a PD pair really has?

The real vllm-router routes to two vLLM engine doubles (tests/doubles/router_stack.py) that sleep
a known time: prefill before it answers, decode before its first token and between tokens. bench's
client-side p50/p90 TTFT and ITL are printed beside those delays, per concurrency step; the
difference is what measuring (and this machine's scheduling under concurrency) adds. The doubles
run in a child process (`--same-process` to run them beside bench's threads, as the tests do),
so that bench's client threads do not wait on the servers' GIL. Not a test: tests/test_bench.py
only asserts lower bounds.

    python benchmarks/bench_latency.py                        # 30 ms ITL, 60 ms prefill, 1,4,16
    python benchmarks/bench_latency.py --itl-ms 10 --concurrency 1,8 --requests 64
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pdctl.bench.run import run  # noqa: E402
from pdctl.bench.workload import BenchSettings, parse_concurrency  # noqa: E402
from pdctl.verify.targets import from_urls  # noqa: E402
from tests.doubles.router_stack import Stack, pd_stack  # noqa: E402


def _inject(stack: Stack, delays: tuple[float, float, float]) -> None:
    prefill, decode_first, itl = delays
    stack.prefill.behaviour.first_token_delay = prefill
    stack.decode.behaviour.first_token_delay = decode_first
    stack.decode.behaviour.inter_token_delay = itl


def _serve(pipe: Connection, delays: tuple[float, float, float]) -> None:
    """The child process: the router and the doubles, until the parent says stop."""
    with tempfile.TemporaryDirectory() as tmp, pd_stack(Path(tmp)) as stack:
        _inject(stack, delays)
        pipe.send((stack.router, stack.prefill.url, stack.decode.url))
        pipe.recv()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--itl-ms", type=float, default=30.0, help="decode's delay between tokens")
    parser.add_argument("--prefill-ms", type=float, default=60.0, help="prefill's delay")
    parser.add_argument("--decode-first-ms", type=float, default=10.0, help="decode's first token")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--same-process", action="store_true", help="doubles beside bench")
    args = parser.parse_args()
    workload = BenchSettings(
        input_len=64,
        output_len=args.output_len,
        concurrency=parse_concurrency(args.concurrency),
        requests=args.requests,
    )
    delays = (args.prefill_ms / 1000, args.decode_first_ms / 1000, args.itl_ms / 1000)
    if args.same_process:
        with tempfile.TemporaryDirectory() as tmp, pd_stack(Path(tmp)) as stack:
            _inject(stack, delays)
            result = run(stack.targets(), workload)
    else:
        parent, child = multiprocessing.Pipe()
        server = multiprocessing.Process(target=_serve, args=(child, delays), daemon=True)
        server.start()
        router, prefill, decode = parent.recv()
        try:
            result = run(from_urls(router, [prefill], [decode]), workload)
        finally:
            parent.send("stop")
            server.join(timeout=30)
    ttft_injected = args.prefill_ms + args.decode_first_ms
    print(f"injected: TTFT {ttft_injected:.1f} ms, ITL {args.itl_ms:.1f} ms")
    print("conc  errors  TTFT p50 (+over)  TTFT p90 (+over)  ITL p50 (+over)  ITL p90 (+over)")
    for step in result.steps:
        ttft, itl = step["ttft_ms"] or {}, step["itl_ms"] or {}
        cells = []
        for stat, injected in ((ttft, ttft_injected), (itl, args.itl_ms)):
            for p in ("p50", "p90"):
                value = stat.get(p, float("nan"))
                cells.append(f"{value:8.1f} ({value - injected:+6.1f})")
        print(f"{step['concurrency']:>4}  {step['errors']:>6}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
