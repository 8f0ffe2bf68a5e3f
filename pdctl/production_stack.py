"""production-stack's values keys as pd-stack takes them (helm/files/production-stack.yaml):
which are taken with the same effect, which differ, and which are refused and why."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.chart import bundled_chart_dir, read_yaml
from pdctl.values.paths import KeyPath

TABLE = Path("files") / "production-stack.yaml"


@dataclass(frozen=True)
class Key:
    path: str  # dotted, "[]" for each list item: servingEngineSpec.modelSpec[].keda
    status: str  # same | differs | refused
    note: str = ""
    used_when: str | None = None  # refused maps: the subkey that turns the feature on
    example: Any = None
    renders: tuple[dict[str, Any], ...] = ()
    base: str | None = None  # the values file the tests start from
    also: dict[str, Any] = field(default_factory=dict)  # keys the tests set with the example
    # Router types that refuse the key (the production-stack router's own flags), with the reason.
    refused_by: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]


@functools.cache
def load(chart_dir: Path | None = None) -> dict[str, Key]:
    own = chart_dir / TABLE if chart_dir else None
    path = own if own and own.is_file() else bundled_chart_dir() / TABLE
    data = read_yaml(path)
    return {
        key: Key(
            path=key,
            status=entry["status"],
            note=" ".join(str(entry.get("note", "")).split()),
            used_when=entry.get("usedWhen"),
            example=entry.get("example"),
            renders=tuple(entry.get("renders", ())),
            base=entry.get("base"),
            also=dict(entry.get("also", {})),
            refused_by={
                router: " ".join(str(why).split())
                for router, why in entry.get("refusedBy", {}).items()
            },
        )
        for key, entry in data["keys"].items()
    }


def is_used(value: Any, used_when: str | None) -> bool:
    """Whether a refused key's value turns its feature on (the chart's pd-stack.isUsed)."""
    if isinstance(value, dict) and used_when:
        return bool(value.get(used_when))
    if isinstance(value, dict) and "enabled" in value:
        return bool(value["enabled"])
    return bool(value)


def used(
    values: Any, key: Key, parts: list[str] | None = None, at: KeyPath = ()
) -> Iterator[KeyPath]:
    """The key paths where a refused key is used in a values mapping."""
    parts = key.path.split(".") if parts is None else parts
    name = parts[0].removesuffix("[]")
    if not isinstance(values, dict) or name not in values:
        return
    value, here = values[name], (*at, name)
    if parts[0].endswith("[]"):
        for index, item in enumerate(value if isinstance(value, list) else []):
            yield from used(item, key, parts[1:], (*here, index))
    elif len(parts) > 1:
        yield from used(value, key, parts[1:], here)
    elif is_used(value, key.used_when):
        yield here
