"""Options shared by several commands (Annotated aliases, as in the hf CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pdctl import limits
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
# Values files as arguments, merged before the -f files (values_files joins them).
FilesArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Values files, merged in order with the -f files after them (later wins).",
        show_default=False,
        metavar="[FILE]...",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Set a value, helm syntax: key=value (repeatable)."),
]


def count(flag: str, most: int, help: str, **more: Any) -> Any:
    """An option that counts (GPUs, tokens, requests): from 1 to `most` (pdctl.limits), both
    bounds shown by --help and checked before the command runs (exit 2)."""
    return typer.Option(flag, min=1, max=most, help=help, **more)


def values_files(files: list[Path] | None, values: list[Path] | None) -> tuple[str, ...]:
    """FILE... then -f FILE..., in the order helm merges them; naming none is a usage error."""
    from pdctl.errors import UsageError  # lazy: start-up

    paths = [*(files or []), *(values or [])]
    if not paths:
        raise UsageError("name the values files: FILE... or -f FILE... (merged in order)")
    return tuple(str(path) for path in paths)


def _checked(name: str, check: str) -> str:
    """`name` through pdctl.naming's `check`; a refusal is click's usage error (exit 2)."""
    from pdctl import naming  # lazy: start-up
    from pdctl.errors import UsageError  # lazy: start-up

    try:
        return str(getattr(naming, check)(name))
    except UsageError as error:
        raise typer.BadParameter(error.message) from None


def _release(name: str) -> str:
    return _checked(name, "check_release")


def _namespace(name: str) -> str:
    return _checked(name, "check_namespace")


# Checked as helm and Kubernetes check them before the command runs (exit 2).
ReleaseOpt = Annotated[
    str,
    typer.Option(
        "--release",
        help="Release name: up to 53 lowercase letters, digits and '-', a letter first.",
        callback=_release,
    ),
]
NamespaceOpt = Annotated[
    str,
    typer.Option("--namespace", "-n", help="Namespace (a DNS-1123 label).", callback=_namespace),
]
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
EngineUrlOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-url",
        help="An aggregated engine's base URL (role both; repeatable): verify skips the PD proof.",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="The served model name (default: the first listed)."),
]
RouterPortOpt = Annotated[
    int,
    typer.Option(
        "--router-port",
        min=1,
        max=limits.PORT_MAX,
        help="Cluster mode: the router's container port.",
    ),
]
EnginePortOpt = Annotated[
    int,
    typer.Option(
        "--engine-port",
        min=1,
        max=limits.PORT_MAX,
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
# A live local release (`pdctl up`) wins over the cluster unless this is given.
ClusterOpt = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Talk to the release in the cluster even when `pdctl up` runs one of that name here.",
    ),
]
