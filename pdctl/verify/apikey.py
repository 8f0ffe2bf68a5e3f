"""The API key that verify and bench send to the router (vLLM's --api-key; the chart's
routerSpec.vllmApiKey, else servingEngineSpec.vllmApiKey): from --api-key-file, else
$VLLM_API_KEY, else, against a release, from the Secret its router reads the key from (where
RBAC lets the caller read it). Never from the command line, and never printed."""

from __future__ import annotations

import os
from pathlib import Path

from pdctl import files, secrets
from pdctl.cluster import connect
from pdctl.errors import InputError
from pdctl.naming import Release
from pdctl.verify.client import API_KEY_ENV

MAX_KEY_BYTES = 4096


def _checked(key: str, where: str) -> str:
    """The key, stripped; refused when it cannot be an HTTP header value (the key itself is
    never part of the message)."""
    key = key.strip()
    if not key:
        raise InputError(f"{where}: the API key is empty")
    if not all(33 <= ord(c) < 127 for c in key):
        raise InputError(
            f"{where}: the API key holds a space, a line break or a character outside ASCII",
            hint="a key is one line of printable ASCII",
        )
    secrets.remember({"vllmApiKey": key})  # masked wherever pdctl prints
    return key


def from_file(path: Path) -> str:
    """The key in a regular file (one line; refused when larger than MAX_KEY_BYTES)."""
    try:
        data = files.read_bytes(path, MAX_KEY_BYTES)
    except files.UnreadableFile as error:
        raise InputError(f"--api-key-file {error.message}") from None
    return _checked(data.decode("latin-1"), f"--api-key-file {path}")


def from_release(release: str, namespace: str) -> str | None:
    """The key the release's router sends (env VLLM_API_KEY of its Deployment), read from its
    Secret; None when the router has none or the Secret cannot be read."""
    deployment = Release(release, namespace).router_deployment
    key = connect().env_value(namespace, deployment, API_KEY_ENV)
    return None if key is None else _checked(key, f"the {API_KEY_ENV} of Deployment {deployment}")


def resolve(file: Path | None, release: str | None, namespace: str) -> str | None:
    """The key from the file, else the environment, else the release (None: cluster mode off)."""
    if file is not None:
        return from_file(file)
    if os.environ.get(API_KEY_ENV, "").strip():
        return _checked(os.environ[API_KEY_ENV], f"${API_KEY_ENV}")
    return None if release is None else from_release(release, namespace)
