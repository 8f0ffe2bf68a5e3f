"""A long flag in every form the engines' parsers accept, so that `pdctl up` finds a flag however a
render spells it.

vLLM's and the simulator's parsers are argparse, which takes any unambiguous prefix of a long flag
(`--hos` for `--host`: neither parser turns `allow_abbrev` off) and `--flag=value`; vLLM's
FlexibleArgumentParser also reads `_` as `-` in a flag's name before the first `.`, and
`--json-flag.key value` as one key of a JSON flag (vllm/utils/argparse_utils.py). vllm-router
(clap) takes `--flag value` and `--flag=value`, a subset. A word is read here as setting a flag
when its name, so normalised, is the flag or a prefix of it: a prefix that two flags share is an
error in argparse anyway, so this finds every form that sets the flag and nothing that runs.
"""

from __future__ import annotations

from collections.abc import Iterable


def name(word: str) -> tuple[str, str]:
    """The flag a word names, normalised (`--prometheus_host=x` -> `--prometheus-host`), and the
    JSON key after its first `.` ("" when none)."""
    if not word.startswith("--") or len(word) < 3:
        return "", ""
    head, _, key = word.partition("=")[0].partition(".")
    return "--" + head[2:].replace("_", "-"), key


def sets(word: str, flag: str) -> bool:
    """Whether `word` sets `flag` in a form argparse accepts (its name or a prefix of it)."""
    found, _ = name(word)
    return bool(found) and flag.startswith(found)


def _takes_next(word: str) -> bool:
    return "=" not in word


def occurrences(args: list[str], flags: Iterable[str]) -> list[tuple[str, str, str | None]]:
    """Each (flag, word, value) in args that sets one of `flags`, the value from `=` or the next
    word (None when there is none)."""
    wanted = tuple(flags)
    found: list[tuple[str, str, str | None]] = []
    for i, word in enumerate(args):
        for flag in wanted:
            if sets(word, flag):
                value = args[i + 1] if _takes_next(word) and i + 1 < len(args) else None
                found.append((flag, word, word.partition("=")[2] if "=" in word else value))
    return found


def drop(args: list[str], flags: Iterable[str]) -> tuple[list[str], list[str]]:
    """args without the words (and their values) that set one of `flags`; and those words."""
    wanted = tuple(flags)
    kept: list[str] = []
    dropped: list[str] = []
    skip = False
    for word in args:
        if skip:
            dropped.append(word)
            skip = False
        elif any(sets(word, flag) for flag in wanted):
            dropped.append(word)
            skip = _takes_next(word)
        else:
            kept.append(word)
    return kept, dropped


def replace(args: list[str], flag: str, value: str) -> list[str]:
    """args with every form of `flag` removed, then `flag value` appended (the last word wins in
    argparse and clap alike)."""
    kept, _ = drop(args, [flag])
    return [*kept, flag, value]
