"""Prometheus text exposition, parsed into samples and read by family: the /metrics pages of the
PD proof (pdctl/verify/judge.py), for `pdctl verify` and the chart's canary (scripts/build_canary.py
writes this module into helm/files/canary/pd_canary.py too). Standard library only.

Prometheus text exposition (prometheus.io/docs/instrumenting/exposition_formats): one sample a
line, `name{label="value",...} value [timestamp]`; `# HELP` and `# TYPE` lines and other
comments; label values escape `\\`, `\"` and `\n`; values are floats, `+Inf`, `-Inf` or `NaN`;
timestamps are dropped. prometheus_client (which vLLM uses) writes a counter `x` as the sample
`x_total` (plus `x_created`), a histogram `h` as `h_bucket`, `h_count`, `h_sum` (plus
`h_created`). A count that is +Inf, NaN or negative is refused: differences of it prove nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# The samples that count (a counter's, a histogram's or a summary's): finite, and not negative but
# for a sum.
_COUNTS = ("_total", "_count", "_bucket")
_SUMS = ("_sum",)
_FAMILY_SUFFIXES = ("_total", "_created", "_count", "_sum", "_bucket")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_VALUE = re.compile(
    r"[+-]?(?:inf|infinity|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)", re.I
)
_TIMESTAMP = re.compile(r"-?[0-9]+")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class ExpositionError(ValueError):
    """Text that is not Prometheus exposition, or a count that is not one."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float

    def matches(self, labels: dict[str, str]) -> bool:
        return all(self.labels.get(key) == value for key, value in labels.items())


@dataclass
class Scrape:
    """One /metrics page: its samples, and the declared type of each family (# TYPE)."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {sample.name for sample in self.samples}

    def has(self, name: str) -> bool:
        return any(sample.name == name for sample in self.samples)

    def total(self, name: str, labels: dict[str, str] | None = None) -> float:
        """The sum of every sample called `name` whose labels include `labels` (0 if none)."""
        wanted = labels or {}
        return sum(s.value for s in self.samples if s.name == name and s.matches(wanted))

    def label_values(self, name: str, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}

    def family(self, name: str) -> Family | None:
        """The samples that carry a metric as a counter (`name`, `name_total`) or a histogram
        (`name_count`, `name_sum`), whichever way the page writes it; None when absent."""
        base = name[: -len("_total")] if name.endswith("_total") else name
        kind = self.types.get(base) or self.types.get(name)
        histogram = kind in ("histogram", "summary") or (kind is None and self.has(f"{base}_count"))
        if histogram:
            total = f"{base}_sum" if self.has(f"{base}_sum") else None
            return Family(name, kind or "histogram", f"{base}_count", total)
        for candidate in (name, f"{base}_total", base):
            if self.has(candidate):
                return Family(name, kind or "counter", candidate, None)
        return None

    def kind(self, name: str) -> str | None:
        """The declared type of the family a sample belongs to (None when undeclared)."""
        if name in self.types:
            return self.types[name]
        for suffix in _FAMILY_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)] in self.types:
                return self.types[name[: -len(suffix)]]
        return None


@dataclass(frozen=True)
class Family:
    """Where a metric's values are on a page: `count` is the counter's value or a histogram's
    number of observations; `sum` the histogram's total (None for a counter)."""

    name: str
    kind: str
    count: str
    sum: str | None

    def read(self, scrape: Scrape, labels: dict[str, str] | None = None) -> dict[str, float]:
        values = {"count": scrape.total(self.count, labels)}
        if self.sum:
            values["sum"] = scrape.total(self.sum, labels)
        return values


def parse(text: str) -> Scrape:
    """A /metrics page's samples and declared types. Raises ExpositionError, naming the line, on
    text that is not Prometheus exposition and on a count that is +Inf, NaN or negative."""
    scrape = Scrape()
    numbered: list[tuple[int, Sample]] = []
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped.split(None, 3)
            if len(words) == 4 and words[1] == "TYPE" and words[3] not in ("untyped", "unknown"):
                scrape.types.setdefault(words[2], words[3])
        elif stripped:
            try:
                numbered.append((number, _sample(stripped)))
            except ExpositionError as error:
                shown = repr(stripped[:120])
                raise ExpositionError(
                    f"not Prometheus text: line {number}: {error}: {shown}"
                ) from None
    for number, sample in numbered:
        _check_count(number, sample, scrape.kind(sample.name))
        scrape.samples.append(sample)
    return scrape


def _sample(line: str) -> Sample:
    """One sample line: a name, labels in braces, a value and an optional timestamp."""
    name = _NAME.match(line)
    if name is None:
        raise ExpositionError("no metric name")
    labels: dict[str, str] = {}
    rest = line[name.end() :]
    if rest.lstrip().startswith("{"):
        rest = _labels(rest.lstrip()[1:], labels)
    elif rest and not rest[0].isspace():
        raise ExpositionError(f"{line.split()[0][:40]!r} is not a metric name")
    words = rest.split()
    if not words or len(words) > 2:
        raise ExpositionError("not `name{labels} value [timestamp]`")
    if not _VALUE.fullmatch(words[0]):
        raise ExpositionError(f"{words[0][:40]!r} is not a number")
    if len(words) == 2 and not _TIMESTAMP.fullmatch(words[1]):
        raise ExpositionError(f"{words[1][:40]!r} is not a timestamp")
    return Sample(name.group(), labels, float(words[0]))


def _labels(text: str, labels: dict[str, str]) -> str:
    """Read `name="value",...}` from the start of `text` into `labels`; the text after `}`."""
    position = 0
    while True:
        position = _blank(text, position)
        if text.startswith("}", position):
            return text[position + 1 :]
        label = _LABEL_NAME.match(text, position)
        if label is None:
            raise ExpositionError("a label without a name")
        position = _blank(text, label.end())
        if not text.startswith("=", position):
            raise ExpositionError(f"label {label.group()} without =")
        position = _blank(text, position + 1)
        if not text.startswith('"', position):
            raise ExpositionError(f"label {label.group()}: its value is not quoted")
        labels[label.group()], position = _label_value(text, position + 1)
        position = _blank(text, position)
        if text.startswith(",", position):
            position += 1
        elif not text.startswith("}", position):
            raise ExpositionError(f"no , or }} after label {label.group()}")


def _blank(text: str, position: int) -> int:
    """The position of the first character at or after `position` that is not a blank."""
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def _label_value(text: str, position: int) -> tuple[str, int]:
    """The label value from `position` (after its opening quote) to its closing quote, escapes
    undone (\\\\, \\" and \\n; any other backslash stays, as prometheus_client keeps it); the
    position after the closing quote."""
    out: list[str] = []
    while position < len(text):
        char = text[position]
        if char == '"':
            return "".join(out), position + 1
        if char == "\\" and position + 1 < len(text):
            escaped = text[position + 1]
            out.append(_ESCAPES.get(escaped, "\\" + escaped))
            position += 2
            continue
        out.append(char)
        position += 1
    raise ExpositionError("a label value without its closing quote")


def _check_count(number: int, sample: Sample, kind: str | None) -> None:
    """Refuse a count that is not one (+Inf, NaN, negative): its differences would be no
    evidence of anything."""
    name, value = sample.name, sample.value
    counts = name.endswith(_COUNTS) or (kind == "counter" and not name.endswith("_created"))
    if not (counts or name.endswith(_SUMS)):
        return
    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
    shown = f"{name}{{{labels}}}" if labels else name
    if not math.isfinite(value):
        written = "NaN" if math.isnan(value) else f"{value:+}".replace("inf", "Inf")
        raise ExpositionError(f"line {number}: {shown} is {written}: not a count, so no evidence")
    if counts and value < 0:
        raise ExpositionError(f"line {number}: {shown} is {value:g}: a count is never negative")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def delta(before: Scrape, after: Scrape, name: str, labels: dict[str, str] | None = None) -> float:
    """How much a counter sample moved between two scrapes of one engine. A negative difference
    (the engine restarted in between) is returned as is; the verdicts count it as such."""
    moved = after.total(name, labels) - before.total(name, labels)
    return 0.0 if math.isnan(moved) else moved
