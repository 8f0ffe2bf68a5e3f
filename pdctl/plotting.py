"""matplotlib for the PNGs pdctl draws (bench's report folder, `bench compare --report`,
`plan --pareto --plot`). It is an optional extra (pdctl.hints.install_extra), imported only
when a plot is drawn, with the Agg backend: files, never a window, no display needed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl import files, hints
from pdctl.errors import EnvironmentProblem

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# What bench says when it writes its CSVs without the PNGs.
NEED = "plots need matplotlib (the CSV has every number): " + hints.install_extra("plot")
# One colour per run (matplotlib's default cycle, named so that a run keeps its colour across
# every chart of a folder).
COLOURS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def figure(width: float = 7.0, height: float = 4.5) -> Figure:
    """A new figure, detached from pyplot's global state (nothing to close); EnvironmentProblem
    (exit 3) without matplotlib."""
    if not available():
        raise EnvironmentProblem("plots need matplotlib", hint=hints.install_extra("plot"))
    import matplotlib  # lazy: an optional extra, and slow to import

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # lazy: as above

    return Figure(figsize=(width, height), layout="constrained")


def save(drawn: Figure, path: Path) -> Path:
    """The figure as a PNG at `path`, written whole and never through a link there (files)."""
    with files.replacing(path) as out:
        drawn.savefig(out, dpi=120, format="png")
    return path
