"""What deploy checks on the release it is about to upgrade, from helm's record of it, before
helm runs:

- a release left `pending-*` by an interrupted helm (killed, or its CI job cancelled) is refused
  with the command that recovers it: helm refuses every other operation on it until then;
- a release installed from another chart (production-stack's `vllm-stack`, say) is refused unless
  adopted: the upgrade replaces its objects with this chart's and helm deletes the ones this chart
  does not render;
- an upgrade that would delete PersistentVolumeClaims is refused unless allowed: helm deletes an
  object the new render lacks unless it is marked helm.sh/resource-policy: keep (as pd-stack's
  claims are by default; production-stack's are not), read here from the release's manifest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pdctl import manifests
from pdctl.errors import InputError

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
_GOOD = ("deployed", "superseded")  # revisions a rollback may return to
_VERSION = re.compile(r"^v?\d")  # what follows "<chart name>-" in helm's "chart" column


def check(
    history: list[dict[str, Any]],
    current: Sequence[manifests.Manifest],
    target: Sequence[manifests.Manifest],
    *,
    release: str,
    namespace: str,
    chart_name: str,
    adopt: bool,
    allow_pvc_deletion: bool,
) -> None:
    """Raise InputError for a pending release, one of another chart (unless adopt) or an upgrade
    from the `current` manifest to the `target` objects that deletes claims (unless allowed)."""
    if not history:
        return
    _not_pending(history, release, namespace)
    if not adopt:
        _same_chart(history[-1], chart_name, release, namespace)
    if not allow_pvc_deletion:
        _keeps_claims(current, target, namespace)


def recovery(history: list[dict[str, Any]], release: str, namespace: str) -> str:
    """The command that ends an interrupted operation: a rollback to the newest good revision
    before it, or, when none was ever deployed, removing the release (its kept claims stay)."""
    good = [int(e["revision"]) for e in history[:-1] if e.get("status") in _GOOD]
    if good:
        return f"helm rollback {release} {max(good)} --namespace {namespace}"
    return f"pdctl uninstall --release {release} -n {namespace}"


def _not_pending(history: list[dict[str, Any]], release: str, namespace: str) -> None:
    last = history[-1]
    status = str(last.get("status", ""))
    if status in PENDING:
        raise InputError(
            f"release {release!r} in namespace {namespace!r} is {status} at revision "
            f"{last['revision']}: a helm operation on it was interrupted, and helm refuses "
            "another one until the release is recovered",
            hint=f"run `{recovery(history, release, namespace)}`, then deploy again",
        )


def _same_chart(last: dict[str, Any], chart_name: str, release: str, namespace: str) -> None:
    found = str(last.get("chart", ""))
    prefix = f"{chart_name}-"
    if found.startswith(prefix) and _VERSION.match(found.removeprefix(prefix)):
        return
    raise InputError(
        f"release {release!r} in namespace {namespace!r} was installed from chart {found} "
        f"(revision {last['revision']}), not {chart_name}: upgrading it replaces its objects "
        f"with {chart_name}'s, and helm deletes those {chart_name} does not render",
        hint=f"pass --adopt to move the release to {chart_name} (docs/production-stack.md, "
        "'Moving a production-stack release'), or deploy under another --release",
    )


def _keeps_claims(
    current: Sequence[manifests.Manifest], target: Sequence[manifests.Manifest], namespace: str
) -> None:
    before, after = _claims(current, namespace), _claims(target, namespace)
    doomed = sorted(
        key for key, obj in before.items() if key not in after and not manifests.helm_keeps(obj)
    )
    if doomed:
        raise InputError(
            f"this upgrade would delete the PersistentVolumeClaims {', '.join(doomed)} and the "
            f"data in them: the new render no longer has them, and the release does not mark "
            f"them {manifests.KEEP_POLICY}: keep",
            hint="pass --allow-pvc-deletion to delete them; to keep the data, keep rendering "
            "them (the same pools with pvcStorage), or first deploy the release marking them "
            f"{manifests.KEEP_POLICY}: keep (the pools' pvcAnnotations, in production-stack's "
            "chart too): helm then leaves them in place",
        )


def _claims(objects: Sequence[manifests.Manifest], namespace: str) -> dict[str, manifests.Manifest]:
    """PersistentVolumeClaims by namespace/name."""
    found = {}
    for obj in objects:
        if obj.get("kind") == "PersistentVolumeClaim":
            metadata = obj.get("metadata") or {}
            found[f"{metadata.get('namespace') or namespace}/{metadata.get('name')}"] = obj
    return found
