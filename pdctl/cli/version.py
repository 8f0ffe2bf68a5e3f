from __future__ import annotations

from pdctl import __version__
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import HelmOpt, OutputOpt
from pdctl.cli._output import OutputFormat


@handle_errors
def version(helm: HelmOpt = None, output: OutputOpt = OutputFormat.text) -> None:
    """Print the versions of pdctl, the bundled chart (and where it is read from) and helm (helm may
    be missing: exit 0)."""
    from pdctl.chart import bundled_chart_dir, bundled_chart_origin, chart_version  # lazy: start-up
    from pdctl.errors import EnvironmentProblem  # lazy: start-up
    from pdctl.helm import find_helm  # lazy: start-up

    chart_dir = bundled_chart_dir()
    versions: dict[str, str | None] = {
        "pdctl": __version__,
        "chart": chart_version(chart_dir),
        "chart_path": str(chart_dir),
        "chart_origin": bundled_chart_origin(chart_dir),
    }
    try:
        found = find_helm(helm)
    except EnvironmentProblem as problem:
        versions |= {"helm": None, "helm_path": None, "helm_problem": problem.message}
        helm_line = f"helm: not found ({problem.message})"
    else:
        versions |= {"helm": found.version, "helm_path": str(found.path)}
        helm_line = f"helm {found.version} ({found.path})"
    if output is OutputFormat.json:
        _output.as_json(versions)
        return
    chart_line = f"chart pd-stack {versions['chart']} ({chart_dir}: {versions['chart_origin']})"
    _output.data(f"pdctl {versions['pdctl']}\n{chart_line}\n{helm_line}")
