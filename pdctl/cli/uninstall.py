"""pdctl uninstall: helm uninstall, keeping the model cache's PVCs unless --delete-data."""

from __future__ import annotations

from typing import Annotated

import typer

from pdctl import defaults
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import HelmOpt, NamespaceOpt, OutputOpt, ReleaseOpt
from pdctl.cli._output import OutputFormat


@handle_errors
def uninstall(
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    delete_data: Annotated[
        bool,
        typer.Option(
            "--delete-data",
            help="Also delete the release's PersistentVolumeClaims (the model cache).",
        ),
    ] = False,
    timeout: Annotated[
        str, typer.Option("--timeout", help="How long to wait for the objects to go (5m, 90s).")
    ] = f"{defaults.WAIT_S // 60}m",
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
) -> None:
    """Remove the release; its PersistentVolumeClaims stay unless --delete-data."""
    from pdctl import release as releases  # lazy: start-up

    result = releases.uninstall(
        release,
        namespace,
        delete_data=delete_data,
        helm_path=helm,
        timeout=releases.parse_timeout(timeout),
    )
    if output is OutputFormat.json:
        _output.as_json(result.as_dict())
        return
    lines = [f"release {release} (namespace {namespace}, revision {result.revision}) uninstalled"]
    if result.kept_claims:
        lines.append(f"kept PersistentVolumeClaims: {', '.join(result.kept_claims)}")
    if result.deleted_claims:
        lines.append(f"deleted PersistentVolumeClaims: {', '.join(result.deleted_claims)}")
    _output.data("\n".join(lines))
