"""Options shared by several commands (Annotated aliases, as in the hf CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdctl.cli._output import OutputFormat

HelmOpt = Annotated[
    str | None,
    typer.Option(
        "--helm",
        help="helm binary to use (default: $PDCTL_HELM, the tools folder, then PATH).",
    ),
]
OutputOpt = Annotated[OutputFormat, typer.Option("--output", "-o", help="Output format.")]
ValuesOpt = Annotated[
    list[Path] | None,
    typer.Option("--values", "-f", help="Values file (repeatable; later files win)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Set a value, helm syntax: key=value (repeatable)."),
]
ReleaseOpt = Annotated[str, typer.Option("--release", help="Release name.")]
NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="Namespace.")]
ChartOpt = Annotated[
    Path | None,
    typer.Option("--chart", help="Chart directory (default: the chart bundled with pdctl)."),
]
SkipValidationOpt = Annotated[
    bool,
    typer.Option(
        "--skip-validation",
        help="Hand the values to helm even when the schema or a PD rule refuses them.",
    ),
]
# The deployment verify and bench talk to: URLs, or the release through port-forwards.
RouterUrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="The router's base URL (no cluster access then)."),
]
PrefillUrlOpt = Annotated[
    list[str] | None,
    typer.Option("--prefill-url", help="A prefill engine's base URL (repeatable)."),
]
DecodeUrlOpt = Annotated[
    list[str] | None,
    typer.Option("--decode-url", help="A decode engine's base URL (repeatable)."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="The served model name (default: the first listed)."),
]
RouterPortOpt = Annotated[
    int, typer.Option("--router-port", help="Cluster mode: the router's container port.")
]
EnginePortOpt = Annotated[
    int,
    typer.Option(
        "--engine-port",
        help="Cluster mode: the engines' container port (a port named vllm wins).",
    ),
]
# The router's API key (vLLM --api-key): from a file, never the command line itself.
ApiKeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--api-key-file",
        help="File holding the router's API key, sent as Authorization: Bearer (default: "
        "$VLLM_API_KEY, else in cluster mode the release's Secret where RBAC allows).",
    ),
]
