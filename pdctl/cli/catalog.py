"""pdctl catalog: the models and GPUs the planner knows (pdctl/models/catalog/*.yaml)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Any, Literal

import typer

from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import OutputOpt
from pdctl.cli._output import OutputFormat


class Section(str, Enum):
    all = "all"
    models = "models"
    gpus = "gpus"


def _table(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    from rich.console import Console  # lazy: start-up
    from rich.table import Table  # lazy: start-up

    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        # Folded, never cut with an ellipsis: at 80 columns a long alias list wraps.
        justify: Literal["left", "right"] = "left" if index in (0, len(columns) - 1) else "right"
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _models(entries: list[dict[str, Any]]) -> None:
    rows = []
    for m in entries:
        active = m["active_params_billion"]
        params = f"{m['params_billion']:g}B" + (f" ({active:g}B active)" if active else "")
        rows.append(
            (
                m["name"],
                params,
                m["weight_dtype"].upper(),
                f"{m['max_positions']:,}",
                ", ".join(m["aliases"]),
            )
        )
    _table(
        "Models (--model: the name or an alias)",
        ("model", "parameters", "weights", "context", "aliases"),
        rows,
    )


def _gpus(entries: list[dict[str, Any]]) -> None:
    rows = [
        (
            g["name"],
            f"{g['memory_gib']:g} GiB",
            f"{g['hbm_tbps']:g} TB/s",
            f"{g['bf16_tflops']:g}",
            f"{g['network_gbps']:g} GB/s",
            ", ".join(g["aliases"]),
        )
        for g in entries
    ]
    _table(
        "GPUs (--gpu-type: the name or an alias)",
        ("GPU", "memory", "HBM", "BF16 TFLOPS", "KV network", "aliases"),
        rows,
    )


@handle_errors
def catalog(
    section: Annotated[
        Section, typer.Argument(help="What to list: models, gpus, or all (both).")
    ] = Section.all,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """List the models and GPUs that plan and init know by name (--model, --gpu-type)."""
    from pdctl.models import catalog as known  # lazy: start-up

    listed: dict[str, list[dict[str, Any]]] = {}
    if section in (Section.all, Section.models):
        listed["models"] = [known.model_entry(m) for m in known.models().values()]
    if section in (Section.all, Section.gpus):
        listed["gpus"] = [known.gpu_entry(g) for g in known.gpus().values()]
    if output is OutputFormat.json:
        _output.as_json(listed)
        return
    if "models" in listed:
        _models(listed["models"])
    if "gpus" in listed:
        _gpus(listed["gpus"])
