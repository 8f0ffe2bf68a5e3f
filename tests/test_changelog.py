"""CHANGELOG.md's [Unreleased] section keeps the form CONTRIBUTING.md states: the groups Added,
Changed, Fixed and Upgrading, in that order, each a list of one-line entries (at most 40), the
details in the docs it names, which exist."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from tests.helpers import ROOT

GROUPS = ("Added", "Changed", "Fixed", "Upgrading")
MAX_ENTRIES = 40
MAX_CHARS = 170
# A repository path an entry points to, and the doc headings it quotes after a doc's name.
PATH = re.compile(r"\b(?:docs|benchmarks|helm|tutorials|pdctl|tests|scripts|schemas)/[\w.*/-]*\w/?")
DOC_HEADINGS = re.compile(r"(docs/[\w-]+\.md)((?:,? \"[^\"]+\")+)")


@dataclass
class Unreleased:
    groups: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def unreleased(text: str) -> Unreleased:
    """The [Unreleased] section's groups and entries, and every line that breaks the form."""
    lines = text.splitlines()
    start = lines.index("## [Unreleased]") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## [")), len(lines))
    found = Unreleased()
    group: list[str] | None = None
    gap = False
    for number, line in enumerate(lines[start:end], start + 1):
        where = f"CHANGELOG.md:{number}"
        if line.startswith("### "):
            name = line[4:].strip()
            if name not in GROUPS or name in found.groups:
                found.problems.append(f"{where}: group {name!r} (one each of {', '.join(GROUPS)})")
            group, gap = found.groups.setdefault(name, []), False
        elif not line.strip():
            gap = bool(group)
        elif group is None:
            found.problems.append(f"{where}: text outside a group")
        elif not line.startswith("- "):
            found.problems.append(f"{where}: not a one-line entry starting with '- '")
        else:
            if gap:
                found.problems.append(f"{where}: a blank line inside the group")
            if len(line) > MAX_CHARS:
                found.problems.append(f"{where}: {len(line)} characters (at most {MAX_CHARS})")
            group.append(line)
    return found


def missing_references(entries: list[str]) -> list[str]:
    """The paths and doc headings the entries name that the repository does not have."""
    missing = []
    for entry in entries:
        for path in PATH.findall(entry):
            if not any(ROOT.glob(path.rstrip("/"))):
                missing.append(path)
        for doc, quoted in DOC_HEADINGS.findall(entry):
            if not (ROOT / doc).is_file():
                continue
            lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
            headings = [line.lstrip("# ") for line in lines if line.startswith("#")]
            for title in re.findall(r"\"([^\"]+)\"", quoted):
                if not any(heading.startswith(title) for heading in headings):
                    missing.append(f'{doc} "{title}"')
    return missing


@pytest.fixture(scope="module")
def section() -> Unreleased:
    return unreleased((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))


def test_unreleased_is_one_line_entries_in_the_four_groups(section: Unreleased) -> None:
    assert not section.problems, "\n".join(section.problems)
    order = [name for name in GROUPS if name in section.groups]
    assert list(section.groups) == order, f"groups {list(section.groups)}, in the order {GROUPS}"


def test_each_group_fits_one_screen(section: Unreleased) -> None:
    sizes = {name: len(entries) for name, entries in section.groups.items()}
    assert all(size <= MAX_ENTRIES for size in sizes.values()), f"entries per group: {sizes}"


def test_the_docs_and_files_named_exist(section: Unreleased) -> None:
    entries = [entry for group in section.groups.values() for entry in group]
    assert not missing_references(entries)


def test_paragraph_bullets_are_refused() -> None:
    text = (
        "## [Unreleased]\n\nA note.\n\n### Added\n\n- one\n  continued\n\n- after a gap\n"
        "### Removed\n\n- gone\n\n## [0.1.0]\n\n- released, not checked\n  here\n"
    )
    problems = "\n".join(unreleased(text).problems)
    expected = (":3: text outside", ":8: not a one-line", ":10: a blank", ":11: group 'Removed'")
    assert all(problem in problems for problem in expected), problems


def test_a_missing_doc_or_heading_is_found() -> None:
    entries = ['- x (docs/sizing.md "TTFT under load", "No such heading", docs/none.md).']
    assert missing_references(entries) == ["docs/none.md", 'docs/sizing.md "No such heading"']
