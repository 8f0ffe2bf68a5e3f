from __future__ import annotations

from pdctl import __version__
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import HelmOpt, OutputOpt
from pdctl.cli._output import OutputFormat


@handle_errors
def version(helm: HelmOpt = None, output: OutputOpt = OutputFormat.text) -> None:
    """Print the versions of pdctl, the bundled chart and helm (helm may be missing: exit 0)."""
    from pdctl.chart import bundled_chart_dir, chart_version  # lazy: start-up
    from pdctl.errors import EnvironmentProblem  # lazy: start-up
    from pdctl.helm import find_helm  # lazy: start-up

    versions: dict[str, str | None] = {
        "pdctl": __version__,
        "chart": chart_version(bundled_chart_dir()),
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
    _output.data(f"pdctl {versions['pdctl']}\nchart pd-stack {versions['chart']}\n{helm_line}")
