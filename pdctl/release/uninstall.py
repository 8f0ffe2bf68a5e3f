"""uninstall: helm uninstall, and what it leaves behind on purpose (the kept model caches)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pdctl import defaults, manifests
from pdctl import helm as helm_mod
from pdctl.errors import InputError
from pdctl.manifests import KEEP_POLICY
from pdctl.release.status import installed


@dataclass
class UninstallResult:
    release: str
    namespace: str
    revision: int
    kept_claims: list[str]
    deleted_claims: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def uninstall(
    release: str,
    namespace: str,
    delete_data: bool = False,
    helm_path: str | None = None,
    timeout: int = defaults.WAIT_S,
) -> UninstallResult:
    """helm uninstall, keeping the release's PersistentVolumeClaims (the model cache) unless
    delete_data. helm keeps a claim only when the chart marks it helm.sh/resource-policy: keep;
    a claim helm would delete is refused without delete_data (InputError), before anything is
    removed."""

    kube, helm, entries = installed(release, namespace, helm_path)
    claims = {
        obj["metadata"]["name"]: manifests.helm_keeps(obj)
        for obj in manifests.parse(helm_mod.manifest(helm, release, namespace))
        if obj.get("kind") == "PersistentVolumeClaim"
    }
    doomed = sorted(name for name, keep in claims.items() if not keep)
    if doomed and not delete_data:
        raise InputError(
            f"helm uninstall would delete the release's PersistentVolumeClaims "
            f"{', '.join(doomed)} and the data in them: the chart of this release does not mark "
            f"them {KEEP_POLICY}: keep",
            hint="pass --delete-data to remove them with the release; to keep them, give the "
            f"pools pvcAnnotations {{{KEEP_POLICY}: keep}}, deploy, then uninstall",
        )
    helm_mod.check(
        helm, helm_mod.uninstall_args(helm, release, namespace, timeout), "helm uninstall"
    )
    kept = sorted(name for name, keep in claims.items() if keep)
    deleted = doomed
    if delete_data:
        deleted = sorted(doomed + [name for name in kept if kube.delete_claim(namespace, name)])
        kept = []
    else:
        kept = [name for name in kept if kube.claim_exists(namespace, name)]
    return UninstallResult(release, namespace, int(entries[-1]["revision"]), kept, deleted)
