"""The vLLM version an engine image states (helm/files/vllm-image.yaml): a tag of the official
image, or modelSpec[].vllmVersion, read by the pattern the chart's pd-stack.vllmVersion reads it
with. Nothing here restates the file's grammar."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pdctl.chart import bundled_chart_dir, read_yaml

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Grammar:
    official_repository: re.Pattern[str]  # searched in modelSpec[].repository (by the chart)
    version: re.Pattern[str]  # matched at the start of a tag or vllmVersion
    block_size: int  # vLLM's --block-size when none is given (tokens per KV cache block)


@functools.cache
def grammar() -> Grammar:
    data = read_yaml(bundled_chart_dir() / "files" / "vllm-image.yaml")
    return Grammar(
        re.compile(data["officialRepository"]),
        re.compile(data["versionPattern"]),
        int(data["blockSize"]),
    )


def parse_version(text: object) -> Version | None:
    """X.Y.Z from a tag or a stated version (v0.10.1.1 -> (0, 10, 1)), or None (latest)."""
    found = grammar().version.match(str(text)) if text is not None else None
    if not found:
        return None
    major, minor, patch = found[0].removeprefix("v").split(".")
    return int(major), int(minor), int(patch)
