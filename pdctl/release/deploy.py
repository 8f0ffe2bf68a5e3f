"""deploy: the values go through the pipeline (refused values stop here), the chart is rendered
client-side with exactly those values (that render is the dry run, and the per-object diff
against the release's current manifest on an upgrade), then helm installs them with its own wait
and rollback (spelled per major, pdctl.helm.UpgradeRequest). While helm waits, pdctl watches the
release's pods through the kubernetes client and reports them (phase, readiness, restarts, why a
pod is stuck: unschedulable for lack of GPUs, image pull errors, crash loops with their last log
lines). Success is pdctl's own verdict: every engine pool and the router rolled out, each pod of
the current template Ready; when helm says deployed and pdctl does not agree by the timeout,
pdctl rolls back itself (or removes a first install), as helm's rollback-on-failure would.
Before helm starts, pdctl.release.guards refuses a release left pending by an interrupted helm,
one installed from another chart (unless --adopt) and an upgrade that deletes claims.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from pdctl import defaults, manifests, naming, pipeline, workloads
from pdctl import helm as helm_mod
from pdctl.chart import bundled_chart_dir, chart_name
from pdctl.cluster import Pod, connect
from pdctl.errors import EnvironmentProblem, PdctlError, UsageError
from pdctl.helm import Helm
from pdctl.release import guards
from pdctl.release.pods import ROUTER, Group, groups_of, is_hook
from pdctl.release.watch import Watch

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_timeout(text: str) -> int:
    """Seconds from a helm-style duration (20m, 1h30m, 90s) or a plain number of seconds."""
    text = text.strip()
    if text.isdigit():
        seconds = int(text)
    else:
        match = _DURATION.match(text)
        if not text or not match:
            raise UsageError(f"--timeout {text!r}: use a duration such as 90s, 20m or 1h30m")
        hours, minutes, secs = (int(part or 0) for part in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds < 1:
        raise UsageError("--timeout must be at least 1s")
    return seconds


# What deploy waits for beyond the engines' startup probes: scheduling and pulling the engine
# image (vLLM's are 10 GB and more) before the probe's clock starts. The default wait is never
# shorter than DEFAULT_TIMEOUT.
IMAGE_PULL_ALLOWANCE = 600
DEFAULT_TIMEOUT = 1200


def startup_budget(objects: list[manifests.Manifest]) -> int:
    """The longest time a rendered container's startup probe lets it start, in seconds
    (initialDelaySeconds + periodSeconds x failureThreshold, Kubernetes' defaults where unset)."""
    longest = 0
    for obj in objects:
        templates = [("", (obj.get("spec") or {}).get("template") or {})]
        templates += list(workloads.pod_templates(obj))
        for _, template in templates:
            for container in (template.get("spec") or {}).get("containers") or []:
                probe = container.get("startupProbe") or {}
                if probe:
                    seconds = probe.get("initialDelaySeconds", 0)
                    seconds += probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
                    longest = max(longest, seconds)
    return longest


def wait_seconds(objects: list[manifests.Manifest], asked: int | None) -> tuple[int, str | None]:
    """How long deploy waits (--timeout, else the startup budget plus IMAGE_PULL_ALLOWANCE, at
    least DEFAULT_TIMEOUT) and a warning when the asked time is shorter than the budget."""
    budget = startup_budget(objects)
    if asked is None:
        return max(DEFAULT_TIMEOUT, budget + IMAGE_PULL_ALLOWANCE), None
    if asked < budget:
        return asked, (
            f"--timeout {asked}s is shorter than the engines' startup probes allow "
            f"({budget}s, to download and load the model): a healthy first start may be rolled "
            f"back; leave --timeout out to wait {budget + IMAGE_PULL_ALLOWANCE}s"
        )
    return asked, None


@dataclass(frozen=True)
class DeployOptions:
    values_files: tuple[str, ...]
    set_values: tuple[str, ...] = ()
    release: str = defaults.RELEASE
    namespace: str = defaults.NAMESPACE
    chart: Path | None = None
    create_namespace: bool = False
    timeout: int | None = None  # seconds; None: wait_seconds derives it from the startup probes
    dry_run: bool = False
    skip_validation: bool = False
    helm_path: str | None = None
    poll_interval: float = 1.0
    log_lines: int = 20
    adopt: bool = False  # upgrade a release installed from another chart (pdctl.release.guards)
    allow_pvc_deletion: bool = False  # an upgrade that deletes PersistentVolumeClaims


@dataclass
class Change:
    """One object of an upgrade: added, changed or removed, with a unified diff if changed."""

    kind: str
    name: str
    change: str
    diff: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DeployResult:
    release: str
    namespace: str
    action: str  # install, upgrade, or dry-run
    status: str  # deployed, failed, rolled-back, uninstalled (a failed install removed), rendered
    ok: bool
    helm_version: str
    command: list[str]
    revision: int | None = None  # the release's revision now
    previous_revision: int | None = None  # the one deployed before this deploy
    message: str = ""
    elapsed: float = 0.0
    changes: list[Change] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    stuck: list[tuple[Group, Pod]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    manifest: str | None = None  # dry run: what would be installed
    summary: dict[str, Any] | None = None  # dry run: pools, router, services

    @property
    def outcome(self) -> str:
        """What the release is now, in a sentence."""
        if self.status == "rolled-back":
            return (
                f"the release was rolled back to revision {self.previous_revision} "
                f"(now revision {self.revision})"
            )
        if self.status == "uninstalled":
            return "the failed first install was removed"
        if self.status == "deployed":
            return f"revision {self.revision} is deployed and every pod is Ready"
        if self.status == "rendered":
            return "nothing was installed (dry run)"
        return "the release is left as helm left it (pdctl status shows it)"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "release": self.release,
            "namespace": self.namespace,
            "action": self.action,
            "status": self.status,
            "ok": self.ok,
            "revision": self.revision,
            "previous_revision": self.previous_revision,
            "message": self.message,
            "outcome": self.outcome,
            "elapsed_seconds": round(self.elapsed, 1),
            "helm": {"version": self.helm_version, "command": self.command},
            "changes": [change.as_dict() for change in self.changes],
            "pools": [g.as_dict() for g in self.groups if g.role != ROUTER],
            "router": next((g.as_dict() for g in self.groups if g.role == ROUTER), None),
            "stuck_pods": [{"pool": g.name, "role": g.role, **p.as_dict()} for g, p in self.stuck],
            "warnings": self.warnings,
        }
        if self.action == "dry-run":
            data["summary"] = self.summary
            data["manifest"] = self.manifest
        return data


class Reporter(Protocol):
    """What deploy tells its caller while it works (the CLI draws it)."""

    def changes(self, action: str, changes: list[Change]) -> None: ...

    def progress(self, groups: list[Group], elapsed: float) -> None: ...


class _Silent:
    def changes(self, action: str, changes: list[Change]) -> None:
        pass

    def progress(self, groups: list[Group], elapsed: float) -> None:
        pass


def _redacted(obj: manifests.Manifest) -> manifests.Manifest:
    """A Secret with each value replaced by a short hash: a diff shows what changed, not what
    it is."""
    if obj.get("kind") != "Secret":
        return obj
    copy = {**obj}
    for key in ("data", "stringData"):
        if isinstance(obj.get(key), dict):
            copy[key] = {
                name: "<redacted sha256:"
                + hashlib.sha256(str(value).encode()).hexdigest()[:12]
                + ">"
                for name, value in obj[key].items()
            }
    return copy


def diff_objects(
    current: Sequence[manifests.Manifest], target: Sequence[manifests.Manifest]
) -> list[Change]:
    """Per object (kind and name): added, removed, or changed with a unified YAML diff. Hooks are
    left out (helm keeps them out of a release's manifest); Secret values are redacted."""

    def index(objects: Sequence[manifests.Manifest]) -> dict[tuple[str, str], manifests.Manifest]:
        return {
            (obj["kind"], obj["metadata"]["name"]): _redacted(obj)
            for obj in objects
            if not is_hook(obj)
        }

    before, after = index(current), index(target)
    changes = []
    for key in sorted(before.keys() | after.keys()):
        kind, name = key
        if key not in before:
            changes.append(Change(kind, name, "added"))
        elif key not in after:
            changes.append(Change(kind, name, "removed"))
        elif before[key] != after[key]:
            old = yaml.safe_dump(before[key], sort_keys=True).splitlines()
            new = yaml.safe_dump(after[key], sort_keys=True).splitlines()
            diff = difflib.unified_diff(old, new, "deployed", "to apply", n=2, lineterm="")
            changes.append(Change(kind, name, "changed", "\n".join(diff)))
    return changes


def _deployed_revision(entries: list[dict[str, Any]]) -> int | None:
    deployed = [int(e["revision"]) for e in entries if e.get("status") == "deployed"]
    return deployed[-1] if deployed else None


def deploy(options: DeployOptions, reporter: Reporter | None = None) -> DeployResult:
    """Install or upgrade a release and wait until every pod of it is Ready (see the module
    docstring). Refused values raise InputError before helm runs; no helm or no cluster raise
    EnvironmentProblem; a deployment that fails returns a result with ok False and the evidence."""

    reporter = reporter or _Silent()
    prepared = pipeline.prepare(
        list(options.values_files),
        list(options.set_values),
        release=options.release,
        namespace=options.namespace,
        chart=options.chart,
        skip_validation=options.skip_validation,
        helm_path=options.helm_path,
    )
    helm = helm_mod.find_helm(options.helm_path)
    chart = options.chart or bundled_chart_dir()
    rendered = pipeline.render(
        prepared.values,
        release=options.release,
        namespace=options.namespace,
        chart=chart,
        helm_path=options.helm_path,
    )

    timeout, too_short = wait_seconds(rendered.objects, options.timeout)
    names = naming.Release(options.release, options.namespace)

    def request(values_file: Path) -> helm_mod.UpgradeRequest:
        return helm_mod.UpgradeRequest(
            release=options.release,
            chart=chart,
            namespace=options.namespace,
            values_files=(values_file,),
            timeout=timeout,
            create_namespace=options.create_namespace,
        )

    result = DeployResult(
        release=options.release,
        namespace=options.namespace,
        action="dry-run",
        status="rendered",
        ok=True,
        helm_version=helm.version,
        command=[str(helm.path), *request(Path("<values.json>")).args(helm.major)],
        warnings=[line for finding in prepared.warnings for line in finding.lines()]
        + ([too_short] if too_short else []),
        groups=groups_of(rendered.objects, names),
    )
    if options.dry_run:
        result.manifest, result.summary = rendered.text, rendered.summary.as_dict()
        return result

    kube = connect()
    before = helm_mod.history(helm, options.release, options.namespace)
    result.previous_revision = _deployed_revision(before)
    current: list[manifests.Manifest] = []
    if result.previous_revision is not None:
        current = manifests.parse(helm_mod.manifest(helm, options.release, options.namespace))
    guards.check(
        before,
        current,
        rendered.objects,
        release=options.release,
        namespace=options.namespace,
        chart_name=chart_name(chart),
        adopt=options.adopt,
        allow_pvc_deletion=options.allow_pvc_deletion,
    )
    result.action = "upgrade" if result.previous_revision is not None else "install"
    result.changes = diff_objects(current, rendered.objects)
    reporter.changes(result.action, result.changes)

    watch = Watch(kube, names, result.groups, options.log_lines)
    started = time.monotonic()

    def look() -> list[Group]:
        try:
            groups = watch.observe()
        except PdctlError:  # a hiccup of the API while helm works: keep the last view
            return result.groups
        reporter.progress(groups, time.monotonic() - started)
        return groups

    with (
        pipeline.merged_file(prepared.values) as values_file,
        helm.start(request(values_file).args(helm.major)) as child,
    ):
        while child.poll() is None:
            result.groups = look()
            child.wait(options.poll_interval)
        completed = child.result()
    after = helm_mod.history(helm, options.release, options.namespace)

    if completed.returncode != 0:
        error = helm_mod.failure(completed, "helm upgrade --install")
        if isinstance(error, EnvironmentProblem) and not watch.seen:
            raise error
        result.ok = False
        result.message = str(error)
        result.status, result.revision = _after_failure(after)
    else:
        result.revision = _deployed_revision(after)
        deadline = started + timeout
        while True:
            result.groups = look()
            if all(group.rolled_out for group in result.groups):
                break
            if time.monotonic() >= deadline:
                result.ok = False
                result.message = (
                    f"helm reported the release deployed, but not every pod is Ready after "
                    f"{timeout}s"
                )
                try:
                    result.status, result.revision = _undo(
                        helm, options, result.previous_revision, timeout
                    )
                except PdctlError as error:
                    result.status, result.message = "failed", f"{result.message}; {error}"
                break
            time.sleep(options.poll_interval)
        if result.ok:
            result.status = "deployed"
    result.elapsed = time.monotonic() - started
    if not result.ok:
        watch.replay()
        result.stuck = watch.stuck()
        result.groups = look()
    return result


def _after_failure(entries: list[dict[str, Any]]) -> tuple[str, int | None]:
    """What helm left after a failed upgrade --install: the status and the revision now."""
    if not entries:
        return "uninstalled", None
    last = entries[-1]
    if last.get("status") == "deployed" and str(last.get("description", "")).startswith("Rollback"):
        return "rolled-back", int(last["revision"])
    return "failed", int(last["revision"])


def _undo(
    helm: Helm, options: DeployOptions, previous: int | None, timeout: int
) -> tuple[str, int | None]:
    """Roll back to the revision deployed before (or remove a first install)."""

    if previous is None:
        helm_mod.check(
            helm,
            helm_mod.uninstall_args(helm, options.release, options.namespace, timeout),
            "helm uninstall",
        )
        return "uninstalled", None
    helm_mod.check(
        helm,
        helm_mod.rollback_args(helm, options.release, options.namespace, previous, timeout),
        "helm rollback",
    )
    return "rolled-back", _deployed_revision(
        helm_mod.history(helm, options.release, options.namespace)
    )
