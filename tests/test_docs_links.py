"""Every relative link of the README, the docs, the tutorials and CONTRIBUTING names a file that
exists (docs moved by audience must not leave dangling links behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "helm" / "README.md"]
PAGES += sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "tutorials").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = [
        target
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"
