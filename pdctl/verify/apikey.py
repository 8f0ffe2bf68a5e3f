"""The API key that verify and bench send to the router (vLLM's --api-key; the chart's
routerSpec.vllmApiKey, else servingEngineSpec.vllmApiKey): from --api-key-file, else
$VLLM_API_KEY, else, against a release, from the Secret its router reads the key from (where
RBAC lets the caller read it). Never from the command line, and never printed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
    return key


def from_file(path: Path) -> str:
    """The key in a regular file (one line; refused when larger than MAX_KEY_BYTES)."""
    where = f"--api-key-file {path}"
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise InputError(f"{where}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{where}: not a regular file")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_KEY_BYTES + 1)
    except OSError as error:
        raise InputError(f"{where}: {error.strerror}") from None
    if len(data) > MAX_KEY_BYTES:
        raise InputError(f"{where}: larger than {MAX_KEY_BYTES} bytes: not an API key")
    return _checked(data.decode("latin-1"), where)


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
