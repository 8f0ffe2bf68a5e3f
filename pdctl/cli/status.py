"""pdctl status: the release as helm recorded it and as the cluster runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdctl import defaults, limits
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import ClusterOpt, HelmOpt, NamespaceOpt, OutputOpt, ReleaseOpt
from pdctl.cli._output import OutputFormat

if TYPE_CHECKING:
    from pdctl.release import StatusReport


@handle_errors
def status(
    release: ReleaseOpt = defaults.RELEASE,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    events: Annotated[
        int,
        typer.Option(
            "--events",
            min=0,
            max=limits.EVENTS_MAX,
            help="How many recent warning events to show.",
        ),
    ] = 10,
    output: OutputOpt = OutputFormat.text,
    helm: HelmOpt = None,
    cluster: ClusterOpt = False,
) -> None:
    """Show the release: revision and state, pools and roles, pods Ready, router, warnings.

    Exit 0 when the release is deployed and every pod is Ready, 1 otherwise. A local release
    that `pdctl up` runs here, or ran until its supervisor was killed (dead), is shown instead
    (its processes), unless --cluster."""
    from pdctl import release as releases  # lazy: start-up
    from pdctl.local import lifecycle, state  # lazy: start-up

    local = None if cluster else lifecycle.status(release)
    if local is not None and (local["up"] or local["status"] == state.DEAD):
        _local(local, output)
        return

    report = releases.status(release, namespace, helm_path=helm, events=events)
    if output is OutputFormat.json:
        _output.as_json(report.as_dict())
    else:
        _print(report)
    if not report.ready:
        raise typer.Exit(1)


def _print(report: StatusReport) -> None:
    from pdctl.cli._release_view import pod_table  # lazy: start-up

    screen = _output.Screen()
    screen.line(
        f"release {report.release} (namespace {report.namespace}): revision "
        f"{report.revision}, {report.status}; chart {report.chart}, app "
        f"{report.app_version}; updated {report.updated}\n  {report.description}"
    )
    screen.table(pod_table(report.groups))
    service = report.router_service
    if service is not None:
        external = f", external {', '.join(service.external)}" if service.external else ""
        screen.line(
            f"router: Service {service.name} ({service.type}, cluster IP {service.cluster_ip}"
            f"{external}), endpoint {report.endpoint}"
        )
    if report.events:
        screen.line(f"recent warning events ({len(report.events)}):")
        for event in report.events:
            line = f"  {event.last_seen or ''} {event.kind} {event.name}: {event.reason}: "
            line += f"{event.message}" + (f" (x{event.count})" if event.count > 1 else "")
            screen.line(line)
    else:
        screen.line("no warning events for the release")
    screen.line("ready: " + ("yes, every pod is Ready" if report.ready else "no"))


def _local(found: dict[str, Any], output: OutputFormat) -> None:
    """A local release's processes; exit 1 unless every one is ready."""
    from pdctl.local.state import READY  # lazy: start-up

    ready = found["up"] and found["status"] == READY and all(found["ready"].values())
    if output is OutputFormat.json:
        _output.as_json(found)
    else:
        from rich.table import Table  # lazy: start-up

        from pdctl.local.lifecycle import engines_named  # lazy: start-up

        table = Table("process", "role", "URL", "pid", "ready")
        roles = {e["name"]: (e["role"], e["url"]) for e in found["engines"]}
        if found.get("router"):
            roles["router"] = (found.get("router_by") or "router", found["router"])
        for name, (role, url) in roles.items():
            mark = "yes" if found["ready"].get(name) else "no"
            table.add_row(name, role, url, str(found["pids"].get(name, "")), mark)
        what = engines_named(found["engine"]) if found["engine"] else "not chosen yet"
        screen = _output.Screen()
        screen.table(
            table,
            f"local release {found['release']} (pdctl up), engines: {what}; supervisor pid "
            f"{found['supervisor']}, {found['status']}; logs in {found['logs']}",
        )
        screen.line("ready: " + ("yes, every process is ready" if ready else "no"))
    if not ready:
        raise typer.Exit(1)
