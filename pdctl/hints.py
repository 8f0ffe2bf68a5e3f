"""Hints that name a next step: the close matches of a misspelt name, and how to install what an
optional extra brings (pdctl is on no package index: it installs from a pd-stack checkout or its
wheel, so `pip install 'pdctl[...]'` would find nothing)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CHECKOUT = "in a pd-stack checkout"


def closest(given: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to `n` of `choices` like `given` (difflib's ratio, ignoring case, at least `cutoff`),
    the closest first; equally close ones in the order given."""
    matcher = difflib.SequenceMatcher(b=given.lower())
    scored = []
    for index, choice in enumerate(dict.fromkeys(choices)):
        matcher.set_seq1(choice.lower())
        score = matcher.ratio()
        if score >= cutoff:
            scored.append((-score, index, choice))
    return [choice for _, _, choice in sorted(scored)[:n]]


def did_you_mean(close: list[str]) -> str:
    """'did you mean A or B? ' (with its trailing space, to lead a hint), or '' without any."""
    return f"did you mean {' or '.join(close)}? " if close else ""


def install_extra(extra: str) -> str:
    """How to install the optional `extra`: the project with it in a checkout, else what the extra
    lists (read from the installed pdctl's metadata, so it says what pyproject.toml says)."""
    from importlib import metadata  # lazy: only when a hint is shown

    from packaging.requirements import Requirement  # lazy: as above

    try:
        declared = metadata.requires("pdctl") or []
    except metadata.PackageNotFoundError:
        declared = []
    needs = []
    for line in declared:
        requirement = Requirement(line)
        if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
            requirement.marker = None
            needs.append(str(requirement))
    route = f"pip install '.[{extra}]' {CHECKOUT}"
    if not needs:
        return route
    return route + ", or pip install " + " ".join(f"'{need}'" for need in needs) + " beside pdctl"


def reinstall() -> str:
    """How to reinstall pdctl with its dependencies."""
    return f"reinstall pdctl with its dependencies: pip install --force-reinstall . {CHECKOUT}"
