"""Printing: data on stdout, messages on stderr."""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Any


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def data(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def as_json(payload: Any) -> None:
    data(json.dumps(payload, indent=2, sort_keys=False))


def error(message: str, hint: str | None = None) -> None:
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")


def info(message: str) -> None:
    sys.stderr.write(message + "\n")
