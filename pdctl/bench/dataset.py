"""bench's dataset file: JSON Lines, one request per line (docs/cli.md, "Dataset file").

    {"prompt": "Summarise this contract: ...", "output_len": 200}
    {"prompt": "Translate to French: ..."}

`prompt` (a non-empty string) is sent as the completion prompt unchanged; `output_len` (an integer
of at least 1) is the tokens the request asks for, `--output-len` where a line leaves it out.
Blank lines and lines starting with `#` are skipped; any other key is an error (a typo would
otherwise change nothing silently). Requests are sent in file order, continuing across load steps;
a step that runs past the last line starts again from the first (and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdctl import files
from pdctl.errors import InputError

# A dataset is read whole into memory: refuse one larger than this without reading the rest.
MAX_BYTES = 256 * 1024 * 1024
KEYS = {"prompt", "output_len"}


@dataclass(frozen=True)
class Entry:
    prompt: str
    output_len: int | None = None  # None: the workload's --output-len


def _entry(path: Path, number: int, line: str) -> Entry:
    where = f"{path}:{number}"
    data = files.parse_json(line, where)
    if not isinstance(data, dict):
        raise InputError(f'{where}: expected an object such as {{"prompt": "..."}}')
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (known: output_len, prompt)")
    prompt, output_len = data.get("prompt"), data.get("output_len")
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError(f"{where}: prompt: expected a non-empty string")
    if output_len is not None and (
        isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1
    ):
        raise InputError(f"{where}: output_len: expected an integer of at least 1")
    return Entry(prompt, output_len)


def load(path: Path) -> tuple[Entry, ...]:
    """The file's requests, in order; InputError names the file and line of anything wrong."""
    text = files.read_text(path, MAX_BYTES)
    entries = tuple(
        _entry(path, number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    )
    if not entries:
        raise InputError(f"{path}: no requests (one JSON object per line)")
    return entries
