from __future__ import annotations

from pdctl import __version__
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import HelmOpt, OutputOpt
from pdctl.cli._output import OutputFormat


@handle_errors
def version(helm: HelmOpt = None, output: OutputOpt = OutputFormat.text) -> None:
    """Print the versions of pdctl, the bundled chart and helm."""
    from pdctl.chart import bundled_chart_dir, chart_version
    from pdctl.helm import find_helm

    found = find_helm(helm)
    versions = {
        "pdctl": __version__,
        "chart": chart_version(bundled_chart_dir()),
        "helm": found.version,
        "helm_path": str(found.path),
    }
    if output is OutputFormat.json:
        _output.as_json(versions)
        return
    _output.data(
        f"pdctl {versions['pdctl']}\nchart pd-stack {versions['chart']}\n"
        f"helm {versions['helm']} ({versions['helm_path']})"
    )
