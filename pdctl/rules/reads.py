"""Which keys of the values a rule read: a rule whose inputs the schema refused stays silent.

The rules see the values through `watch`, a copy whose mappings and lists note every key read
from them (get, [], in, items, values, and the merges `{**m}` and `dict(m)` that go through
them). The registry compares those keys with the paths the schema refused: a rule that read a
refused key (or anything inside it) reports nothing, since the schema's error already says
what is wrong and a rule reasoning from a bad value would add a second, misleading one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pdctl.values.paths import KeyPath


class Reads:
    """The key paths read (since the last `restart`)."""

    def __init__(self) -> None:
        self.paths: set[KeyPath] = set()

    def restart(self, paths: set[KeyPath]) -> None:
        self.paths = set(paths)

    def touched(self, refused: set[KeyPath]) -> bool:
        """Whether a read key is a refused path or lies inside one."""
        return any(path[:end] in refused for path in self.paths for end in range(1, len(path) + 1))


class _WatchedDict(dict[Any, Any]):
    _where: KeyPath
    _reads: Reads

    def _note(self, key: Any) -> None:
        self._reads.paths.add((*self._where, key))

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def items(self) -> Any:
        for key in super().keys():
            self._note(key)
        return super().items()

    def values(self) -> Any:
        for key in super().keys():
            self._note(key)
        return super().values()

    # Defined so that CPython copies this mapping key by key through __getitem__ ({**m},
    # dict(m), update) instead of reading its storage directly, which would note nothing.
    def __iter__(self) -> Iterator[Any]:
        return super().__iter__()


class _WatchedList(list[Any]):
    _where: KeyPath
    _reads: Reads

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            self._reads.paths.add((*self._where, index if index >= 0 else len(self) + index))
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Any]:
        for index, value in enumerate(super().__iter__()):
            self._reads.paths.add((*self._where, index))
            yield value


def watch(node: Any, reads: Reads, where: KeyPath = ()) -> Any:
    """A copy of a values tree whose mappings and lists note their reads in `reads`."""
    watched: _WatchedDict | _WatchedList
    if isinstance(node, dict):
        watched = _WatchedDict(
            (key, watch(value, reads, (*where, key))) for key, value in node.items()
        )
    elif isinstance(node, list):
        watched = _WatchedList(watch(value, reads, (*where, i)) for i, value in enumerate(node))
    else:
        return node
    watched._where, watched._reads = where, reads
    return watched
