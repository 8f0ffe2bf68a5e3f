"""status: a release's helm revision, its pools and router as pods, the router's Service, and
the release's recent warnings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdctl import helm as helm_mod
from pdctl import manifests, naming
from pdctl.cluster import Cluster, Event, Service, connect
from pdctl.helm import Helm
from pdctl.release.pods import ROUTER, Group, groups_of
from pdctl.release.watch import Watch


@dataclass
class StatusReport:
    release: str
    namespace: str
    revision: int
    status: str  # helm's: deployed, failed, pending-upgrade, ...
    chart: str
    app_version: str
    updated: str
    description: str
    groups: list[Group]
    router_service: Service | None
    events: list[Event]

    @property
    def ready(self) -> bool:
        return self.status == "deployed" and all(g.rolled_out for g in self.groups)

    @property
    def endpoint(self) -> str | None:
        service = self.router_service
        if service is None or not service.ports:
            return None
        host = service.external[0] if service.external else service.name
        if not service.external:
            host = naming.Release(self.release, self.namespace).service_dns(service.name)
        return f"http://{host}:{service.ports[0]}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "namespace": self.namespace,
            "revision": self.revision,
            "status": self.status,
            "ready": self.ready,
            "chart": self.chart,
            "app_version": self.app_version,
            "updated": self.updated,
            "description": self.description,
            "pools": [g.as_dict() for g in self.groups if g.role != ROUTER],
            "router": next((g.as_dict() for g in self.groups if g.role == ROUTER), None),
            "router_service": self.router_service.as_dict() if self.router_service else None,
            "endpoint": self.endpoint,
            "events": [event.as_dict() for event in self.events],
        }


def installed(
    release: str, namespace: str, helm_path: str | None
) -> tuple[Cluster, Helm, list[dict[str, Any]]]:
    """The cluster, helm, and the release's history; ReleaseNotFound when there is none."""

    kube = connect()
    helm = helm_mod.find_helm(helm_path)
    entries = helm_mod.history(helm, release, namespace)
    if not entries:
        raise helm_mod.ReleaseNotFound(
            f"release {release!r} not found in namespace {namespace!r}",
            hint="helm list -A shows the releases; pass --release and -n",
        )
    return kube, helm, entries


def status(
    release: str, namespace: str, helm_path: str | None = None, events: int = 10
) -> StatusReport:
    """The release as helm recorded it and as the cluster runs it."""

    kube, helm, entries = installed(release, namespace, helm_path)
    last = entries[-1]
    names = naming.Release(release, namespace)
    objects = manifests.parse(helm_mod.manifest(helm, release, namespace))
    groups = Watch(kube, names, groups_of(objects, names)).observe()
    service = None
    if any(group.role == ROUTER for group in groups):
        service = kube.service(namespace, names.router_service)
    mine = f"{release}-"
    warnings = [event for event in kube.events(namespace) if event.name.startswith(mine)]
    return StatusReport(
        release=release,
        namespace=namespace,
        revision=int(last["revision"]),
        status=str(last.get("status", "")),
        chart=str(last.get("chart", "")),
        app_version=str(last.get("app_version", "")),
        updated=str(last.get("updated", "")),
        description=str(last.get("description", "")),
        groups=groups,
        router_service=service,
        events=warnings[-events:] if events else [],
    )
