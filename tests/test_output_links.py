"""Output folders never write through a symbolic link already in them (issue 40): bench's report
folder (`bench --report DIR`) and `bench compare --report DIR` write each file whole beside its
name and rename it over the name (pdctl.files.replacing), so a link there is replaced by pdctl's
file and whatever it pointed at, outside the folder, is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pdctl.bench import compare as comparing
from pdctl.bench import plots, report
from pdctl.bench.run import Result
from pdctl.bench.workload import BenchSettings
from pdctl.cli.app import app
from tests.test_bench_plots import result, step

runner = CliRunner()
KEPT = "a file outside the report folder, not pdctl's to write\n"


def _links(folder: Path, outside: Path, names: list[str]) -> dict[str, Path]:
    """In `folder`, a link per name to a file of its own in `outside`."""
    folder.mkdir()
    outside.mkdir()
    targets = {}
    for name in names:
        target = outside / f"target-{name}"
        target.write_text(KEPT, encoding="utf-8")
        (folder / name).symlink_to(target)
        targets[name] = target
    return targets


def _replaced(folder: Path, targets: dict[str, Path]) -> None:
    for name, target in targets.items():
        assert target.read_text(encoding="utf-8") == KEPT, f"{name} was written through"
        assert not (folder / name).is_symlink(), f"{name} is still a link"


def test_bench_report_replaces_links_never_writes_through_them(tmp_path: Path) -> None:
    folder, outside = tmp_path / "report", tmp_path / "outside"
    # plot-goodput.png: the chart this run does not draw, removed (the link, not its target)
    names = [plots.DATA, "plot-ttft.png", "plot-throughput.png", "plot-goodput.png"]
    targets = _links(folder, outside, names)
    workload = BenchSettings(concurrency=(1, 4))
    done = Result("http://r", "m", "NixlConnector", workload, [step(1, 10.0), step(4, 30.0)])
    written = report.write(done, folder)
    assert {p.name for p in written} >= set(names[:3])
    _replaced(folder, targets)
    assert not (folder / "plot-goodput.png").exists()
    assert (folder / plots.DATA).read_text(encoding="utf-8").startswith("run,concurrency,")


def test_bench_compare_report_replaces_links_never_writes_through_them(tmp_path: Path) -> None:
    folder, outside = tmp_path / "report", tmp_path / "outside"
    targets = _links(folder, outside, [comparing.CSV, plots.DATA, "plot-ttft.png"])
    runs = []
    for name, ttft in (("a.json", 10.0), ("b.json", 20.0)):
        path = tmp_path / name
        path.write_text(json.dumps(result([step(1, ttft), step(4, 3 * ttft)])), encoding="utf-8")
        runs.append(str(path))
    done = runner.invoke(app, ["bench", "compare", *runs, "--report", str(folder)])
    assert done.exit_code == 0, done.output
    _replaced(folder, targets)
    assert (folder / comparing.CSV).read_text(encoding="utf-8").count("\n") >= 3


def test_a_folder_up_empties_removes_a_link_in_its_place_not_its_target(tmp_path: Path) -> None:
    """pdctl up's logs folder and each engine's PROMETHEUS_MULTIPROC_DIR (state.emptied): what
    was there goes, a link is removed and never followed."""
    from pdctl.local import state

    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "kept.db").write_text("x")
    folder = tmp_path / "state" / "prometheus" / "engine"
    folder.parent.mkdir(parents=True)
    folder.symlink_to(target)
    state.emptied(folder)
    assert folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())
    assert (target / "kept.db").read_text() == "x"
    (folder / "old.db").write_text("y")
    state.emptied(folder)
    assert not any(folder.iterdir())
