"""pdctl plan's text for people, the parts apart from the plan's own table: the aggregated
layout beside it and the Pareto frontier."""

from __future__ import annotations

from typing import Any

from pdctl.cli import _output


def ms(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:,} ms"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def print_aggregated(console: _output.Screen, data: dict[str, Any]) -> None:
    agg = data["aggregated"]
    if agg is None:
        console.line("Aggregated: no single engine fits the GPUs given")
        return
    given, used = data["request"]["gpus"], agg["gpus"]
    console.line(
        f"Aggregated on the {_gpus(given)} given (plain engines, no KV transfer): "
        f"{agg['replicas']} x TP{agg['tp']} = {_gpus(used)}, "
        f"{agg['batch_per_engine']} sequences per engine"
    )
    console.line(
        f"  TTFT about {ms(agg['ttft_ms'])} ({agg['ttft_unqueued_ms']} ms unqueued); ITL "
        f"{agg['itl_ms']} ms (steps of {agg['decode_step_ms']} ms, prefills take "
        f"{agg['prefill_share']:.0%} of engine time, a step with a prompt chunk "
        f"{agg['itl_stall_ms']} ms); about {agg['requests_per_s']} requests/s, "
        f"{agg['output_tokens_per_s']:,.0f} output tokens/s, "
        f"{agg['output_tokens_per_s_per_gpu']:,.1f} per GPU"
    )


def print_pareto(front: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table()
    table.add_column("", justify="left", overflow="fold")
    table.add_column("mode", justify="left", overflow="fold", min_width=10)
    table.add_column("layout", justify="left", overflow="fold")
    for column in ("GPUs", "tokens/s per GPU", "TTFT ms", "ITL ms", "targets"):
        table.add_column(column, justify="right", overflow="fold")
    met = {True: "met", False: "missed", None: "none in force"}
    for p in front:
        table.add_row(
            "pick" if p["pick"] else "",
            p["mode"],
            p["layout"],
            str(p["gpus"]),
            f"{p['output_tokens_per_s_per_gpu']:,}",
            "unbounded" if p["ttft_ms"] is None else f"{p['ttft_ms']:,}",
            str(p["itl_ms"]),
            met[p["meets_targets"]],
        )
    _output.Screen().table(
        table,
        heading="Layouts on the frontier (output tokens/s per GPU given, TTFT, ITL; the choice "
        "marked)",
    )
