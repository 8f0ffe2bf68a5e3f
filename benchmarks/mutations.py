"""The long run of tests/test_agreement_property.py's single mutations: ten times as many.

Each run deletes or replaces one key of a shipped values file (tests/mutations.py) and holds
validate and the chart to their promises: no traceback, every error about the mutated key, no
PD rule reasoning from a key the schema refused, and chart and validate in agreement. It prints
how the mutations ended and every broken promise with the mutation that broke it; the exit code
is 1 when there was one.

    python benchmarks/mutations.py                  # 3000 mutations, seed 0
    python benchmarks/mutations.py -n 500 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _pytest.outcomes import Failed  # noqa: E402 (what tests.helpers fails with)

from pdctl.helm import find_helm  # noqa: E402
from tests.mutations import REPLACEMENTS, SHIPPED, judge, key_paths, mutated  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--mutations", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--helm", help="the helm binary (default: PDCTL_HELM, .tools, PATH)")
    args = parser.parse_args()

    helm = find_helm(args.helm)
    rng = random.Random(args.seed)
    outcomes: Counter[str] = Counter()
    broken: list[str] = []
    names = sorted(SHIPPED)
    for _ in range(args.mutations):
        name = rng.choice(names)
        path = rng.choice(key_paths(SHIPPED[name]))
        replacement = rng.choice(REPLACEMENTS)
        try:
            outcomes[judge(*mutated(SHIPPED[name], path, replacement), helm)] += 1
        except (Exception, Failed) as error:  # a broken promise, or a traceback out of validate
            outcomes["broken"] += 1
            last = traceback.format_exception_only(type(error), error)[-1].strip()
            broken.append(f"{name} {list(path)} = {replacement!r}: {last}")
    for outcome, count in sorted(outcomes.items()):
        print(f"{count:6d}  {outcome}")
    for line in broken:
        print(line)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
