"""Which files a `validate` command line means.

Files, globs, directories (every *values*.yaml under them) and - for stdin.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from pdctl.errors import InputError, UsageError
from pdctl.findings import Severity
from pdctl.rules import load_rules

STDIN = "-"
DIR_PATTERNS = ("*values*.yaml", "*values*.yml")


def expand(arguments: Sequence[str]) -> list[str]:
    """Each argument becomes one or more file names (or "-"), in order, without repeats."""
    found: list[str] = []
    for argument in arguments:
        if argument == STDIN:
            names = [STDIN]
        elif Path(argument).is_dir():
            names = sorted(
                {
                    str(p)
                    for pattern in DIR_PATTERNS
                    for p in Path(argument).rglob(pattern)
                    if ".git" not in p.parts
                }
            )
            if not names:
                raise InputError(f"{argument}: no *values*.yaml files in this directory")
        elif glob.has_magic(argument):
            names = sorted(glob.glob(argument, recursive=True))
            if not names:
                raise InputError(f"{argument}: the pattern matches no files")
        else:
            names = [argument]
        found += [name for name in names if name not in found]
    return found


def warning_ids(arguments: Sequence[str]) -> frozenset[str]:
    """The rule ids of --ignore arguments (comma lists allowed); only warnings may be ignored."""

    rules = load_rules()
    ids = frozenset(part.strip() for argument in arguments for part in argument.split(",") if part)
    for rule_id in sorted(ids):
        if rule_id not in rules:
            raise UsageError(f"--ignore {rule_id}: no such rule ({', '.join(rules)})")
        if rules[rule_id].severity is not Severity.warning:
            raise UsageError(
                f"--ignore {rule_id}: an error cannot be ignored (the chart refuses it too); "
                "only warnings can"
            )
    return ids
