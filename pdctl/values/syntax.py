"""YAML syntax errors told as the line where the structure broke, the cause and the fix.

PyYAML's own text ("expected <block end>, but found '<block mapping start>'") names the parser's
state, not the mistake. From its marks (problem_mark: where parsing failed; context_mark: where
the construct being parsed began) and the file's lines this module names the common mistakes:
a key indented to match no block above it, a key indented under a key that already has its
value, a list item among keys (or a key among list items), a missing `:` or a `:` without a space,
two keys on one line, an unclosed quote, `[` or `{`. Anything else keeps the parser's words.

Lines quote keys only, never values (a values file holds tokens). Lines and columns are 1-based.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

_QUOTED = "while scanning a quoted scalar"
_FLOW = {"while parsing a flow sequence": ("[", "]"), "while parsing a flow mapping": ("{", "}")}


@dataclass(frozen=True)
class Explained:
    message: str
    line: int | None
    column: int | None


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based
    text: str

    @property
    def indent(self) -> int:
        return len(self.text) - len(self.text.lstrip(" "))

    @property
    def column(self) -> int:
        return self.indent + 1

    @property
    def content(self) -> str:
        return self.text.strip()

    @property
    def is_item(self) -> bool:
        return self.content == "-" or self.content.startswith("- ")

    @property
    def key(self) -> str:
        """How a message names the line: its key (`name:`), else its first word; never a value."""
        body = self.content[2:].lstrip() if self.is_item else self.content
        head, colon, _ = body.partition(": ")
        if not colon and body.endswith(":"):
            head, colon = body[:-1], ":"
        word = head if colon else (body.split() or [""])[0]
        word = word if len(word) <= 40 else word[:39] + "…"
        return ("- " if self.is_item else "") + word + (":" if colon else "")

    @property
    def has_value(self) -> bool:
        """A `key: value` line (or `- value`): its key's value is on the line itself."""
        body = self.content[2:].lstrip() if self.is_item else self.content
        if self.is_item and ": " not in body and not body.endswith(":"):
            return bool(body)
        _, colon, value = body.partition(": ")
        return bool(colon and value.split("#")[0].strip())


def _lines(text: str) -> list[_Line]:
    return [_Line(number, line) for number, line in enumerate(text.splitlines(), start=1)]


def _above(lines: list[_Line], number: int) -> list[_Line]:
    """The content lines before line `number` that open the blocks around it: walking up, each
    line indented less than every line met so far."""
    chain: list[_Line] = []
    for line in reversed(lines[: number - 1]):
        if not line.content or line.content.startswith("#"):
            continue
        if not chain or line.indent < chain[-1].indent:
            chain.append(line)
    return chain


def _previous(lines: list[_Line], number: int) -> _Line | None:
    for line in reversed(lines[: number - 1]):
        if line.content and not line.content.startswith("#"):
            return line
    return None


def _block_end(lines: list[_Line], here: _Line) -> str | None:
    """`expected <block end>`: the line's indentation fits no block above it, or it mixes list
    items and keys at one level."""
    chain = _above(lines, here.number)
    level = next((line for line in chain if line.indent == here.indent), None)
    if level is not None and here.is_item and not level.is_item:
        return (
            f"a list item among the keys of a mapping (`{level.key}` on line {level.number} is at "
            f"the same column, {here.column}): put the list under a key with nothing after its "
            "`:`, its items indented below it, or remove the `-`"
        )
    if level is not None and level.is_item and not here.is_item:
        return (
            f"`{here.key}` is at column {here.column}, the column of the list item "
            f"`{level.key}` on line {level.number}: a key cannot sit among list items; indent it "
            "like the keys of an item, or move it out of the list"
        )
    deeper = [line for line in chain if line.indent > here.indent]
    shallower = next((line for line in chain if line.indent < here.indent), None)
    near = [
        f"`{line.key}` (line {line.number}) starts at column {line.column}"
        for line in (deeper[-1] if deeper else None, shallower)
        if line
    ]
    if level is not None or not near:
        return None
    return (
        f"this line's indentation does not match the block above it: `{here.key}` starts at "
        f"column {here.column}, while {' and '.join(near)}. Check that it is indented like its "
        "siblings (the keys of the same mapping start at the same column)"
    )


def _mapping_value(lines: list[_Line], here: _Line, column: int) -> str | None:
    """`mapping values are not allowed here`: a `:` where YAML is still reading a value."""
    before = here.text[: column - 1].strip()
    if here.is_item:
        before = before[1:].lstrip()
    if ": " in before:
        return (
            f"a second `key:` on one line (after `{here.key}`): quote the value if the `:` is part "
            "of it, or put the inner key on a line of its own, indented"
        )
    above = _previous(lines, here.number)
    if above is None:
        return None
    body = above.content[2:].lstrip() if above.is_item else above.content
    if ":" in body and ": " not in body and not body.endswith(":"):
        return (
            f"`{above.key}` on line {above.number} has no space after its `:`, so YAML reads it "
            "and this line as one text: write `key: value`, with a space after the colon"
        )
    if above.indent < here.indent and ":" not in body and not above.is_item:
        return (
            f"`{above.key}` on line {above.number} has no `:`, so this more indented line reads "
            f"as more of its text: if `{above.key}` is a key, write `{above.key}:`"
        )
    if above.indent < here.indent and above.has_value:
        owner = "the list item" if above.is_item else f"`{above.key}`"
        return (
            f"`{here.key}` is indented more than `{above.key}` on line {above.number} (column "
            f"{here.column}, not {above.column}), so YAML reads it as part of the value of "
            f"{owner}, which is already given on that line. If they are siblings, start "
            f"`{here.key}` at column {above.column}; if it belongs under {owner}, move that value "
            "off the line"
        )
    return None


def _missing_colon(line: _Line) -> str:
    body = line.content[2:].lstrip() if line.is_item else line.content
    if ":" in body:
        return (
            f"`{line.key}` has a `:` with no space after it, so it is not read as a key: write "
            "`key: value`, with a space after the colon"
        )
    if body.startswith("-"):
        return f"`{line.key}`: a list item needs a space after its `-`: write `- {body[1:]}`"
    return (
        f"`{line.key}` has no `:` after it, so YAML cannot read it as a key: write "
        f"`{line.key}: value`, with a space after the colon"
    )


def _flow(opened: str, closing: str, start: yaml.Mark) -> str:
    kind = "list" if opened == "[" else "mapping"
    other = "`- item` lines" if opened == "[" else "`key: value` lines"
    return (
        f"the {kind} opened with `{opened}` on line {start.line + 1} (column {start.column + 1}) "
        f"is still open here: close it with `{closing}` on that line, or write it as {other} "
        f"without `{opened}`"
    )


def _line_at(lines: list[_Line], mark: yaml.Mark | None) -> _Line | None:
    if mark is None or not 0 <= mark.line < len(lines):
        return None
    return lines[mark.line]


def _specific(error: yaml.MarkedYAMLError, lines: list[_Line]) -> Explained | None:
    problem, context = error.problem or "", error.context or ""
    at, start = error.problem_mark, error.context_mark
    here, opening = _line_at(lines, at), _line_at(lines, start)
    if context == _QUOTED and opening and start and "end of stream" in problem:
        quote = opening.text[start.column : start.column + 1]
        return Explained(
            f"the quote `{quote}` opened at column {start.column + 1} is never closed: end the "
            f"value with `{quote}` on this line",
            opening.number,
            start.column + 1,
        )
    if context in _FLOW and at and start:
        return Explained(_flow(*_FLOW[context], start), at.line + 1, at.column + 1)
    if "could not find expected ':'" in problem and opening and start:
        return Explained(_missing_colon(opening), opening.number, start.column + 1)
    if here is None or at is None:
        return None
    message = None
    if problem.startswith("expected <block end>") and at.column == here.indent:
        message = _block_end(lines, here)
    elif problem == "mapping values are not allowed here":
        message = _mapping_value(lines, here, at.column + 1)
    return Explained(message, at.line + 1, at.column + 1) if message else None


def explain(error: yaml.MarkedYAMLError, text: str) -> Explained:
    """The message, line and column for a YAML syntax error in `text`."""
    specific = _specific(error, _lines(text))
    if specific:
        return specific
    mark = error.problem_mark or error.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    message = f"invalid YAML: {error.problem or error}"
    start = error.context_mark
    if error.context and start and error.problem_mark and start.line != error.problem_mark.line:
        message += f" ({error.context} that starts on line {start.line + 1})"
    return Explained(message, line, column)
