"""Which files a `validate` command line means.

Files, globs, directories (every *values*.yaml under them) and - for stdin. A directory scan is
bounded (MAX_DIRECTORIES, MAX_FILES), follows no link to a directory and reads no file linking out
of the directory; such files are reported, and every other file is still checked.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pdctl.errors import InputError, UsageError
from pdctl.findings import Severity
from pdctl.rules import load_rules

STDIN = "-"
DIR_PATTERNS = ("*values*.yaml", "*values*.yml")
# A repository's values files number in the tens; a scan past these bounds is a wrong argument
# (a home directory, /) or a hostile tree.
MAX_FILES = 1000
MAX_DIRECTORIES = 10_000


@dataclass(frozen=True)
class Input:
    """A file to check, or one found in a scanned directory that is not read, with why."""

    name: str
    problem: str | None = None
    severity: Severity = Severity.error


def _scanned(root: Path) -> list[Input]:
    """Every *values*.yaml under root, in order. Symbolic links to directories are not followed
    (no loops; a warning names each); a file linking out of root is not read (an error)."""
    top = root.resolve()
    found: list[Input] = []
    walked = 0
    for directory, subdirectories, names in os.walk(root):  # does not follow directory links
        walked += 1
        if walked > MAX_DIRECTORIES:
            raise InputError(f"{root}: more than {MAX_DIRECTORIES} directories to scan")
        subdirectories[:] = sorted(name for name in subdirectories if name != ".git")
        here = Path(directory)
        found += [
            Input(
                str(here / name), "a symbolic link to a directory; not followed", Severity.warning
            )
            for name in subdirectories
            if (here / name).is_symlink()
        ]
        for name in sorted(names):
            path = here / name
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in DIR_PATTERNS):
                outside = path.is_symlink() and not path.resolve().is_relative_to(top)
                found.append(
                    Input(
                        str(path), f"a symbolic link out of {root}; not read" if outside else None
                    )
                )
        if len(found) > MAX_FILES:
            raise InputError(f"{root}: more than {MAX_FILES} values files; name fewer")
    return found


def _arguments(argument: str) -> list[Input]:
    if argument == STDIN:
        return [Input(STDIN)]
    if Path(argument).is_dir():
        found = _scanned(Path(argument))
        if not any(i.problem is None for i in found):
            raise InputError(f"{argument}: no *values*.yaml files in this directory")
        return found
    if glob.has_magic(argument):
        names = sorted(itertools.islice(glob.iglob(argument, recursive=True), MAX_FILES + 1))
        if not names:
            raise InputError(f"{argument}: the pattern matches no files")
        if len(names) > MAX_FILES:
            raise InputError(f"{argument}: the pattern matches more than {MAX_FILES} files")
        return [Input(name) for name in names]
    return [Input(argument)]


def expand(arguments: Sequence[str]) -> list[Input]:
    """Each argument becomes one or more files (or "-"), in order, without repeats."""
    found: dict[str, Input] = {}
    for argument in arguments:
        for item in _arguments(argument):
            found.setdefault(item.name, item)
    return list(found.values())


def warning_ids(arguments: Sequence[str]) -> frozenset[str]:
    """The rule ids of --ignore arguments (comma lists allowed); only warnings may be ignored."""

    ids = frozenset(part.strip() for argument in arguments for part in argument.split(",") if part)
    if not ids:  # the rule modules load later, while helm renders (schema_and_rules)
        return ids
    rules = load_rules()
    for rule_id in sorted(ids):
        if rule_id not in rules:
            raise UsageError(f"--ignore {rule_id}: no such rule ({', '.join(rules)})")
        if rules[rule_id].severity is not Severity.warning:
            raise UsageError(
                f"--ignore {rule_id}: an error cannot be ignored (the chart refuses it too); "
                "only warnings can"
            )
    return ids
