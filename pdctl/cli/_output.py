"""Printing: data on stdout, messages on stderr. Every line leaves through here, so here secrets
are masked (pdctl.secrets) and control characters escaped: a values key, helm's stderr or a
server's reply cannot clear the screen, rewrite a line or hide text on a terminal or in a log."""

from __future__ import annotations

import json
import re
import sys
from enum import Enum
from typing import Any

from pdctl import secrets

# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and isolates
# that reorder what a terminal shows (https://trojansource.codes).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


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
