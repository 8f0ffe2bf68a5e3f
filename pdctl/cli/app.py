"""The pdctl command: a root Typer app with one module per command."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from pdctl.cli import _errors, _output
from pdctl.cli.bench import bench
from pdctl.cli.bench_compare import bench_app
from pdctl.cli.catalog import catalog
from pdctl.cli.deploy import deploy
from pdctl.cli.init import init
from pdctl.cli.plan import plan
from pdctl.cli.preflight import preflight
from pdctl.cli.status import status
from pdctl.cli.template import template
from pdctl.cli.uninstall import uninstall
from pdctl.cli.up import down, up
from pdctl.cli.validate import validate
from pdctl.cli.verify import verify
from pdctl.cli.version import version


class _InOrder(TyperGroup):
    """Lists the commands in COMMANDS' order (typer would put a group, bench, after them all)."""

    def list_commands(self, ctx: Any) -> list[str]:
        order = [c.__name__ for c in COMMANDS]
        return sorted(self.commands, key=lambda name: order.index(name) if name in order else 99)


app = typer.Typer(
    name="pdctl",
    cls=_InOrder,
    help="Deploy disaggregated prefill/decode vLLM serving on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help: it wraps at any terminal width, where rich's panels cut option names
    # and help words with an ellipsis at 80 columns.
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from pdctl import __version__  # lazy: start-up

        typer.echo(f"pdctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: bool = typer.Option(
        False, "--debug", envvar="PDCTL_DEBUG", help="Show a traceback for errors."
    ),
    show_version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print pdctl's version and exit (`pdctl version` adds the chart's and helm's).",
    ),
) -> None:
    _errors.DEBUG["enabled"] = debug


# In the order of the work: size, write, check, render, run on this machine, probe the nodes,
# install, watch, prove, remove.
# Each command's first docstring paragraph is its line in `pdctl --help`, whole.
COMMANDS = (
    catalog,
    plan,
    init,
    validate,
    template,
    up,
    down,
    preflight,
    deploy,
    status,
    verify,
    bench,
    uninstall,
    version,
)
for command in COMMANDS:
    short_help = _output.short_help(command.__doc__)
    if command is bench:  # a group: the sweep without a sub-command, `bench compare` with one
        app.add_typer(bench_app, name="bench", short_help=short_help)
    else:
        app.command(name=command.__name__, short_help=short_help)(command)


def _only(args: list[str]) -> None:
    """Keep only the command that args name (the first word that is no option: the root's
    options take no value) in the app: typer builds the options of every command it holds at
    each start, tens of milliseconds for all, and a command runs alone as it runs among them.
    No command named (`pdctl --help`), or a word that names none, keeps them all."""
    named = next((arg for arg in args if not arg.startswith("-")), None)
    commands = [info for info in app.registered_commands if info.name == named]
    groups = [info for info in app.registered_groups if info.name == named]
    if commands or groups:
        app.registered_commands, app.registered_groups = commands, groups


def main() -> None:
    """The entry point: SIGINT and SIGTERM unwind every command (helm stopped, temporary files
    removed, pdctl.process) and end pdctl with 128 + the signal's number."""
    from pdctl import process  # lazy: start-up

    _only(sys.argv[1:])
    try:
        with process.signals_raise():
            app()
    except process.Interrupted as interrupted:
        if _errors.DEBUG["enabled"]:
            raise
        _output.error(f"stopped by {interrupted}")
        raise SystemExit(interrupted.exit_code) from None
