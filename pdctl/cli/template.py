from __future__ import annotations

from pathlib import Path

import typer

from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._output import OutputFormat


@handle_errors
def template(
    values: list[Path] = typer.Option(
        ..., "--values", "-f", help="Values file (repeatable; later files win)."
    ),
    set_values: list[str] = typer.Option(
        [], "--set", help="Set a value on the command line, helm syntax: key=value."
    ),
    release: str = typer.Option("pd", "--release", help="Release name."),
    namespace: str = typer.Option("default", "--namespace", "-n", help="Namespace."),
    chart: Path | None = typer.Option(
        None, "--chart", help="Chart directory (default: the chart bundled with pdctl)."
    ),
    output_dir: Path | None = typer.Option(
        None, "--output-dir", help="Write one file per template here instead of to stdout."
    ),
    summary: bool = typer.Option(
        False, "--summary", help="Print what would be deployed instead of the manifests."
    ),
    output: OutputFormat = typer.Option(
        OutputFormat.text, "--output", "-o", help="Summary format."
    ),
    helm: str | None = typer.Option(None, "--helm", help="Path of the helm binary to use."),
) -> None:
    """Render the chart through the real helm (helm template)."""
    from pdctl.render import render

    rendered = render(
        values_files=values,
        set_values=set_values,
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
