"""One error mapper for every command: library errors become a message and an exit code."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from pdctl.cli import _output
from pdctl.errors import PdctlError

P = ParamSpec("P")
R = TypeVar("R")

DEBUG = {"enabled": False}


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except PdctlError as error:
            if DEBUG["enabled"]:
                raise
            for line in error.details:
                _output.info(line)
            _output.error(error.message, error.hint)
            raise typer.Exit(error.exit_code) from None

    return wrapper
