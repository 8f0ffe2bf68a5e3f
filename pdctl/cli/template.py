"""pdctl template: the values pipeline (load, --set, schema, PD rules), then helm template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdctl import defaults
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import (
    ChartOpt,
    FilesArg,
    HelmOpt,
    NamespaceOpt,
    OutputOpt,
    ReleaseOpt,
    SetOpt,
    SkipValidationOpt,
    ValuesOpt,
    values_files,
)
from pdctl.cli._output import OutputFormat


@handle_errors
def template(
    files: FilesArg = None,
    values: ValuesOpt = None,
    set_values: SetOpt = None,
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    chart: ChartOpt = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            help="Write one file per template into this folder, not to stdout: a new or empty "
            "folder, or one pdctl wrote before (it holds .pdctl-render), replaced whole once the "
            "render succeeds.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace an --output-dir folder pdctl did not write, and all it holds."
        ),
    ] = False,
    summary: Annotated[
        bool, typer.Option("--summary", help="Print what would be deployed, not the manifests.")
    ] = False,
    skip_validation: SkipValidationOpt = False,
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
) -> None:
    """Render the chart through the real helm (helm template), after validating the values."""
    from pdctl import pipeline  # lazy: start-up

    prepared = pipeline.prepare(
        values_files(files, values),
        set_values or [],
        release=release,
        namespace=namespace,
        chart=chart,
        skip_validation=skip_validation,
        helm_path=helm,
    )
    for finding in prepared.warnings:
        for line in finding.lines():
            _output.info(line)
    rendered = pipeline.render(
        prepared.values,
        release=release,
        namespace=namespace,
        chart=chart,
        output_dir=output_dir,
        helm_path=helm,
        force=force,
    )
    if summary:
        if output is OutputFormat.json:
            _output.as_json(rendered.summary.as_dict())
        else:
            from pdctl.cli._summary import print_summary  # lazy: start-up

            print_summary(rendered.summary, release)
    elif output_dir:
        _output.info(f"wrote {len(rendered.objects)} objects under {output_dir}")
    else:
        _output.manifests(rendered.text)
