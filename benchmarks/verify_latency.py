"""How close does `pdctl verify`'s latency come to the delays a PD pair really has?

The real vllm-router routes to two vLLM engine doubles (tests/doubles/router_stack.py) that sleep
a known time: prefill before it answers, decode between tokens. verify's client-side TTFT, ITL
and TPOT are printed beside those delays; the difference is what measuring adds on this machine
(sleep overshoot, the router's forwarding, scheduling on a busy machine). The test suite only
asserts that the delays are measured (tests/test_verify_pd.py), never how fast a machine is.

    python benchmarks/verify_latency.py                     # 30 ms ITL, 60 ms prefill, 10 requests
    python benchmarks/verify_latency.py --itl-ms 10 --prefill-ms 200 --requests 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pdctl.verify.checks import Settings, run  # noqa: E402
from tests.doubles.router_stack import pd_stack  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--itl-ms", type=float, default=30.0, help="decode's delay between tokens")
    parser.add_argument("--prefill-ms", type=float, default=60.0, help="prefill's delay")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, pd_stack(Path(tmp)) as stack:
        stack.decode.behaviour.inter_token_delay = args.itl_ms / 1000
        stack.prefill.behaviour.first_token_delay = args.prefill_ms / 1000
        settings = Settings(
            requests=args.requests, max_tokens=args.max_tokens, prompt_words=64, settle=0.0
        )
        report = run(stack.targets(), settings)
    latency = report.latency or {}
    rows = {
        "ttft_ms p50": (latency.get("ttft_ms", {}).get("p50"), args.prefill_ms),
        "itl_ms p50": (latency.get("itl_ms", {}).get("p50"), args.itl_ms),
        "itl_ms mean": (latency.get("itl_ms", {}).get("mean"), args.itl_ms),
        "tpot_ms mean": (latency.get("tpot_ms", {}).get("mean"), args.itl_ms),
    }
    print(f"{'figure':14} {'measured':>9} {'injected':>9} {'added':>8}")
    for name, (measured, injected) in rows.items():
        added = f"{measured - injected:8.2f}" if measured is not None else "       -"
        print(f"{name:14} {measured if measured is not None else '-':>9} {injected:9.1f} {added}")
    print(json.dumps({"passed": report.passed, "latency": latency}, indent=1))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
