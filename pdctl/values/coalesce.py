"""Values as helm merges them: several -f files, then the chart's defaults (values.yaml).

Helm merges user files in order (a later file wins; mappings merge key by key; lists and
scalars are replaced), then coalesces the result with the chart's defaults: user values win,
mappings merge recursively, and a user null removes the default (helm's chartutil
coalesceValues). The rules see values exactly as the templates do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any


def merge_files(documents: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several values documents as one, as `helm -f a.yaml -f b.yaml` merges them."""
    merged: dict[str, Any] = {}
    for document in documents:
        _merge_into(merged, document)
    return merged


def _merge_into(target: dict[str, Any], source: dict[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def with_defaults(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """User values over the chart's defaults, as helm hands them to the templates."""
    result = copy.deepcopy(defaults)
    for key, value in values.items():
        if value is None and key in result:
            del result[key]
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = with_defaults(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
