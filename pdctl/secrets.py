"""What counts as a secret in values, and how secrets are kept out of what pdctl prints.

A secret is the value of `hf_token` or `vllmApiKey` (a string, or whatever was given there by
mistake), and the `value` of an env entry (`{name, value}` in any list) whose name contains
TOKEN, KEY, SECRET or PASSWORD in any letter case. `{secretName, secretKey}` references name a
Secret; they are not secrets themselves.

The values pipeline remembers the secret strings of every values file it loads (`remember`), and
the CLI's one printing module passes all text through `redact`, as a CI runner masks the secrets
it was given: a message that quotes a value (a finding, helm's stderr, a dry-run manifest) shows
MARKER instead.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

MARKER = "<redacted>"

SECRET_KEYS = frozenset({"hf_token", "vllmApiKey"})
_REFERENCE_KEYS = frozenset({"secretName", "secretKey"})
_SECRET_ENV = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)

# Placeholders as tutorials write them (production-stack's `<hf-token>`, pd-stack's
# `<your-hf-token>`), matched whole: a real token that merely contains "xxx" is not one.
_PLACEHOLDER = re.compile(
    r"<[^<>]*>|(hf_)?x+|(hf_)?\.\.\.|changeme|change-me|token-here"
    r"|your[-_](hf[-_])?token(-here)?",
    re.IGNORECASE,
)
# Shorter strings are not masked in output: they would garble line numbers and words, and no
# credential is that short.
_MIN_MASKED = 4

_known: set[str] = set()


def is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value.strip()) is not None


def is_secret_env(name: Any) -> bool:
    return isinstance(name, str) and _SECRET_ENV.search(name) is not None


def paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(key path, value) of every secret in a values tree (nulls, which set nothing, left out)."""
    if isinstance(node, dict):
        for key, child in node.items():
            if key in SECRET_KEYS and child is not None:
                yield (*at, key), child
            else:
                yield from paths(child, (*at, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            if isinstance(item, dict) and is_secret_env(item.get("name")) and "value" in item:
                if item["value"] is not None:
                    yield (*at, index, "value"), item["value"]
            else:
                yield from paths(item, (*at, index))


def masked(node: Any) -> Any:
    """A copy of a values tree with each secret replaced by MARKER."""
    tree = copy.deepcopy(node)
    for path, _ in paths(node):
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = MARKER
    return tree


def is_secret_path(path: tuple[Any, ...], secret_paths: list[tuple[Any, ...]]) -> bool:
    """Whether a key path is a secret or lies inside one."""
    return any(path[: len(found)] == found for found in secret_paths)


def _strings(node: Any, key: Any = None) -> Iterator[str]:
    if isinstance(node, str) and key not in _REFERENCE_KEYS:
        yield node
    elif isinstance(node, dict):
        for child_key, child in node.items():
            yield from _strings(child, child_key)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def collect(values: Any) -> set[str]:
    """The secret strings of a values tree that output must never show."""
    return {
        text
        for _, secret in paths(values)
        for text in _strings(secret)
        if len(text.strip()) >= _MIN_MASKED and not is_placeholder(text)
    }


def remember(values: Any) -> None:
    """Mask the secrets of these values in everything redact() sees from now on."""
    _known.update(collect(values))


def _forms(secret: str) -> Iterator[str]:
    """The secret as printed raw, inside JSON or a repr, and base64-encoded in a Secret."""
    yield secret
    yield json.dumps(secret)[1:-1]
    yield repr(secret)[1:-1]
    yield base64.b64encode(secret.encode("utf-8")).decode("ascii")


@lru_cache(maxsize=8)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str]:
    forms = {form for secret in secrets for form in _forms(secret)}
    return re.compile("|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True)))


def redact(text: str) -> str:
    """The text with every remembered secret replaced by MARKER."""
    if not _known:
        return text
    return _pattern(frozenset(_known)).sub(MARKER, text)
