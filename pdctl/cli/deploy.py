"""pdctl deploy: the values pipeline, then helm upgrade --install, watched until every pod is
Ready (or rolled back, with the evidence)."""

from __future__ import annotations

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
def deploy(
    files: FilesArg = None,
    values: ValuesOpt = None,
    set_values: SetOpt = None,
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    create_namespace: Annotated[
        bool, typer.Option("--create-namespace", help="Create the namespace if it is missing.")
    ] = False,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            help="How long to wait for every pod to be Ready (90s, 20m, 1h); then roll back. "
            "Default: the engines' longest startup probe plus 10 minutes to pull images, at "
            "least 20m.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Render client-side and print what would be installed (no cluster)."
        ),
    ] = False,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Upgrade a release installed from another chart (production-stack's "
            "vllm-stack): its objects become this chart's, and helm deletes those this chart "
            "does not render (docs/production-stack.md).",
        ),
    ] = False,
    allow_pvc_deletion: Annotated[
        bool,
        typer.Option(
            "--allow-pvc-deletion",
            help="Let an upgrade delete PersistentVolumeClaims (and their data) that the new "
            "render no longer has and that are not marked helm.sh/resource-policy: keep.",
        ),
    ] = False,
    chart: ChartOpt = None,
    skip_validation: SkipValidationOpt = False,
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
) -> None:
    """Install or upgrade the release with helm and wait until every pod is Ready."""
    from pdctl import release as releases  # lazy: start-up
    from pdctl.cli._release_view import LiveView, evidence, pool_line  # lazy: start-up

    options = releases.DeployOptions(
        values_files=values_files(files, values),
        set_values=tuple(set_values or ()),
        release=release,
        namespace=namespace,
        chart=chart,
        create_namespace=create_namespace,
        timeout=releases.parse_timeout(timeout) if timeout else None,
        dry_run=dry_run,
        skip_validation=skip_validation,
        helm_path=helm,
        adopt=adopt,
        allow_pvc_deletion=allow_pvc_deletion,
    )
    with LiveView(release) as view:
        result = releases.deploy(options, view)
    for warning in result.warnings:
        _output.info(warning)
    if output is OutputFormat.json:
        _output.as_json(result.as_dict())
    elif result.action == "dry-run":
        _output.data(result.manifest or "")
        _output.info(
            f"dry run, rendered client-side (no cluster contacted): {pool_line(result.groups)}\n"
            f"deploy would run: {' '.join(result.command)}"
        )
    elif result.ok:
        _output.data(
            f"release {release} revision {result.revision} deployed ({result.action}, "
            f"{result.elapsed:.0f}s): every pod Ready: {pool_line(result.groups)}\n"
            f"next: pdctl status --release {release} -n {namespace}"
        )
    if result.ok:
        return
    if output is not OutputFormat.json:
        if result.stuck:
            _output.info("pods that did not become Ready:")
            for line in evidence(result.stuck):
                _output.info(line)
        _output.error(f"deploy failed: {result.message}", result.outcome)
    raise typer.Exit(1)
