"""What `pdctl validate` says about every corpus file and a seeded run of single mutations.

One line per file: accepted, or refused with its errors as `RULE:line` (the file's line, or
`set` for an error a --set assignment caused), first error first (by line, then rule id); for a
corpus file also what `helm template` of the chart answers (the ids it refused with); then its
warnings, the same way (`| warnings: RULE:line ...`; records before 2026-12-04 have none). Run
it on two commits and diff the outputs: a file whose answer changed is on a line that differs.

    python benchmarks/validate_record.py                 # corpus + 3000 mutations, seed 0
    python benchmarks/validate_record.py -n 300 --seed 7
    python benchmarks/validate_record.py --compare BASE.txt NEW.txt   # each change, explained

`--compare` names why each line differs (`explain`): a file that now lists more defects; a
document with one cause (a single mutation of a shipped file, or a corpus file of one schema
defect) whose schema error is now its only error, since the chart's refusals are asked for once
the schema accepts (one error per cause); a mutation that sets a key to null, which helm deletes,
so the chart's own answer replaces pdctl's old reading of it; a file new to the corpus; a
refused file that lost PD007 or warnings and gained nothing (`unrendered`: the rules read the
facts the chart derives from its render, pdctl/rules/summary.py, and where the chart refuses it
renders nothing, so they are silent). Anything else, and any file that moves between accepted
and refused, is `unexplained` (exit 1). Warnings are compared where both records have them.

The mutations are benchmarks/mutations.py's (same seed, same draws), so a line here and a line
there name the same document.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pdctl import pipeline  # noqa: E402
from pdctl.helm import Helm, find_helm  # noqa: E402
from pdctl.validation.report import FileReport  # noqa: E402
from tests.helpers import helm_template_result  # noqa: E402
from tests.mutations import DELETE, REPLACEMENTS, SHIPPED, key_paths, mutated  # noqa: E402
from tests.test_corpus import BAD, read_case  # noqa: E402


def _options(args: list[str]) -> pipeline.ValidateOptions:
    """The corpus headers' arguments: --release NAME and --set KEY=VALUE."""
    release, sets = "pd", []
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag == "--release":
            release = value
        elif flag == "--set":
            sets.append(value)
        else:
            raise SystemExit(f"unknown corpus argument {flag}")
    return pipeline.ValidateOptions(set_values=tuple(sets), release=release)


def verdict(report: FileReport) -> str:
    """`accepted`, or `refused` and each error as RULE:line, in line order."""
    if report.passed():
        return "accepted"
    found = sorted(
        {(f.line or 0, f.rule, "set" if f.assignment else str(f.line)) for f in report.errors}
    )
    return "refused " + " ".join(f"{rule}:{where}" for _, rule, where in found)


def warned(report: FileReport) -> str:
    """`| warnings:` and each warning as RULE:line (`set` for one a --set assignment caused)."""
    found = sorted(
        {(f.line or 0, f.rule, "set" if f.assignment else str(f.line)) for f in report.warnings}
    )
    return "| warnings: " + " ".join(f"{rule}:{where}" for _, rule, where in found)


def chart_verdict(helm: Helm, path: Path, release: str) -> str:
    """What `helm template` of the chart says: accepted, or the rule ids it refused with."""
    result = helm_template_result(helm, path, release=release)
    if result.returncode == 0:
        return "accepted"
    return "refused " + " ".join(dict.fromkeys(re.findall(r"\[(PD\d{3})\]", result.stderr)))


def corpus(helm: Helm) -> Iterator[str]:
    """Each corpus file: validate's verdict, then the chart's (helm template, default values)."""
    for path in BAD:
        case = read_case(path)
        options = _options(case.args)
        report = pipeline.validate([str(path)], options)
        chart = chart_verdict(helm, path, options.release)
        yield f"corpus/{path.name}  {verdict(report)}  | chart: {chart}  {warned(report)}"


def mutations(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    names = sorted(SHIPPED)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "values.yaml"
        for number in range(count):
            name = rng.choice(names)
            path = rng.choice(key_paths(SHIPPED[name]))
            replacement = rng.choice(REPLACEMENTS)
            values, _ = mutated(SHIPPED[name], path, replacement)
            file.write_text(yaml.safe_dump(values))
            report = pipeline.validate([str(file)], pipeline.ValidateOptions())
            shown = "DELETE" if replacement is DELETE else repr(replacement)
            where = ".".join(map(str, path))
            yield f"mutation {number} {name} {where}={shown}  {verdict(report)}  {warned(report)}"


# A record's answer for one file: (refused, its errors, its warnings or None where the record
# has none).
Answer = tuple[bool, list[str], list[str] | None]


def _answers(lines: list[str]) -> dict[str, Answer]:
    """name -> (refused, its errors as RULE:line, its warnings as RULE:line) for each line."""
    found = {}
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        name, answer = line.split("  ")[:2]
        verdict_word, *errors = answer.split()
        _, marker, warnings = line.partition("| warnings:")
        found[name] = (verdict_word == "refused", errors, warnings.split() if marker else None)
    return found


def _same(base: Answer | None, new: Answer) -> bool:
    """Whether two answers agree (warnings only where both records have them)."""
    if base is None or base[:2] != new[:2]:
        return False
    return base[2] is None or new[2] is None or Counter(base[2]) == Counter(new[2])


def _unrendered(base: Answer, new: Answer) -> bool:
    """A refused file that lost only PD007 and warnings: the rules that read the chart's summary
    of the pools are silent where the chart refuses (it renders nothing)."""
    before, after = Counter(base[1]), Counter(new[1])
    pd007 = Counter(e for e in base[1] if e.startswith("PD007:"))
    warned = base[2] is None or new[2] is None or Counter(new[2]) <= Counter(base[2])
    return new[0] and after == before - pd007 and warned


def explain(name: str, base: Answer | None, new: Answer) -> str:
    """Why one file's answer differs between two records (module docstring)."""
    if base is None:
        return "added"
    if base[0] != new[0]:
        return "unexplained"
    if _unrendered(base, new):
        return "unrendered"
    before, after = Counter(base[1]), Counter(new[1])
    if before == after:
        return "unexplained"  # the warnings differ on a file the chart renders
    if before <= after:
        return "more"
    schema = Counter(e for e in base[1] if e.startswith("SCHEMA:"))
    one_cause = name.startswith(("mutation ", "corpus/schema-"))
    if one_cause and schema and after == schema:
        return "one cause"
    if name.startswith("mutation ") and name.endswith("=None") and not schema:
        return "null"
    return "unexplained"


def _shown(answer: Answer | None) -> str:
    if answer is None:
        return "-"
    warnings = "" if answer[2] is None else " | warnings: " + " ".join(answer[2])
    return " ".join(answer[1]) + warnings


def compare(base: Path, new: Path) -> int:
    """Each line that differs, with its class; a count of each class."""
    old = _answers(base.read_text().splitlines())
    counts: Counter[str] = Counter()
    for name, answer in _answers(new.read_text().splitlines()).items():
        if _same(old.get(name), answer):
            continue
        why = explain(name, old.get(name), answer)
        counts[why] += 1
        print(f"{why:12} {name}: {_shown(old.get(name))} -> {_shown(answer)}")
    print("# " + ", ".join(f"{why} {count}" for why, count in sorted(counts.items())))
    return 1 if counts["unexplained"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--mutations", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--helm", help="the helm binary (default: PDCTL_HELM, .tools, PATH)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BASE", "NEW"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    helm = find_helm(args.helm)
    print(f"# helm {helm.version}; corpus: validate's verdict | the chart's; then mutations")
    for line in itertools.chain(corpus(helm), mutations(args.mutations, args.seed)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
