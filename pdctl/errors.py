"""The errors pdctl reports to users, each with its exit code (docs/cli.md: 1 bad input or
deployment, 2 usage, 3 environment)."""

from __future__ import annotations


class PdctlError(Exception):
    """A problem to report as one message, without a traceback."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, details: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or []  # lines printed before the message (e.g. each finding)


class InputError(PdctlError):
    """The input (values, files, options' values) or the deployment is bad: exit 1."""

    exit_code = 1


class UsageError(PdctlError):
    """The command line is wrong: exit 2."""

    exit_code = 2


class EnvironmentProblem(PdctlError):
    """The machine lacks something pdctl needs (helm, cluster access): exit 3."""

    exit_code = 3
