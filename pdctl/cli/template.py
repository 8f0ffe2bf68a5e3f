from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import HelmOpt, NamespaceOpt, OutputOpt, ReleaseOpt, SetOpt, ValuesOpt
from pdctl.cli._output import OutputFormat


@handle_errors
def template(
    values: ValuesOpt,
    set_values: SetOpt = None,
    release: ReleaseOpt = "pd",
    namespace: NamespaceOpt = "default",
    chart: Annotated[
        Path | None,
        typer.Option("--chart", help="Chart directory (default: the chart bundled with pdctl)."),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", help="Write one file per template here, not to stdout."),
    ] = None,
    summary: Annotated[
        bool, typer.Option("--summary", help="Print what would be deployed, not the manifests.")
    ] = False,
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
) -> None:
    """Render the chart through the real helm (helm template)."""
    from pdctl.render import render

    rendered = render(
        values_files=values,
        set_values=set_values or [],
        release=release,
        namespace=namespace,
        chart=chart,
        output_dir=output_dir,
        helm_path=helm,
    )
    if summary:
        if output is OutputFormat.json:
            _output.as_json(rendered.summary.as_dict())
        else:
            from pdctl.cli._summary import print_summary

            print_summary(rendered.summary, release)
    elif output_dir:
        _output.info(f"wrote {len(rendered.objects)} objects under {output_dir}")
    else:
        _output.data(rendered.text)
