"""Printing: data on stdout, messages on stderr. Every line leaves through here, so here secrets
are masked (pdctl.secrets) and control characters escaped: a values key, helm's stderr or a
server's reply cannot clear the screen, rewrite a line or hide text on a terminal or in a log."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from enum import Enum
from typing import TYPE_CHECKING, Any

from pdctl import secrets

if TYPE_CHECKING:
    from rich.table import Table

# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and isolates
# that reorder what a terminal shows (https://trojansource.codes).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def short_help(doc: str | None) -> str:
    """A command's line in its group's help: its docstring's first paragraph as one line (click
    would cut it at a few dozen characters, and a docstring's first line may end mid-sentence)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """Control characters as visible escapes (\\x1b); newlines and tabs kept."""
    return _CONTROL.sub(_escaped, text)


def clean(text: str) -> str:
    """Text fit for a terminal or a CI log: secrets masked, control characters escaped."""
    return escape(secrets.redact(text))


def data(text: str) -> None:
    text = clean(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def manifests(text: str) -> None:
    """Rendered manifests for a pipe (pdctl template | kubectl apply): escaped, secrets kept, as a
    Secret object needs its data."""
    text = escape(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def as_json(payload: Any) -> None:
    data(json.dumps(payload, indent=2, sort_keys=False))


def error(message: str, hint: str | None = None) -> None:
    sys.stderr.write(f"error: {clean(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {clean(hint)}\n")


def info(message: str) -> None:
    sys.stderr.write(clean(message) + "\n")


# Piped without COLUMNS, a table takes its natural width: no page width to fold it to.
_UNBOUNDED = 10_000


class Screen:
    """Prose and tables for people, through rich. On a terminal, prose wraps at its width (or
    COLUMNS) with continuation lines indented; piped or captured, a line of prose stays one line
    (for grep and logs) and tables take their natural width, or COLUMNS when it is set. Colour
    follows rich, which honours NO_COLOR (https://no-color.org) and FORCE_COLOR."""

    def __init__(self, stderr: bool = False) -> None:
        from rich.console import Console  # lazy: start-up

        self.console = Console(stderr=stderr, highlight=False)
        self.terminal = self.console.is_terminal
        if not self.terminal and not os.environ.get("COLUMNS", "").isdigit():
            self.console.width = _UNBOUNDED

    @property
    def width(self) -> int:
        return self.console.width

    def line(self, text: str, style: str | None = None) -> None:
        """Plain text (no markup), secrets masked and controls escaped, as clean() does."""
        lines = clean(text).split("\n")
        if self.terminal:
            lines = [_wrapped(line, self.width) for line in lines]
        self.console.print("\n".join(lines), markup=False, style=style, soft_wrap=True)

    def fits(self, table: Table) -> bool:
        """Whether the table fits the width unfolded (its natural width)."""
        unbounded = self.console.options.update_width(_UNBOUNDED)
        return self.console.measure(table, options=unbounded).maximum <= self.width

    def table(self, table: Table, heading: str | None = None) -> None:
        """A heading is prose above the table: a table's own title would wrap at its width."""
        if heading:
            self.line(heading)
        self.console.print(table)


def _wrapped(line: str, width: int) -> str:
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    if len(line) <= width or not body:
        return line
    return "\n".join(
        textwrap.wrap(
            body,
            width=width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    )
