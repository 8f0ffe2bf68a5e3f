"""The one way values reach helm: load safely, merge the files, apply --set, check (schema and
PD rules), write one merged values file, render it with the real helm.

`pdctl template`, `pdctl validate`, `pdctl deploy` and `pdctl init` all go through here, so what was
validated is byte for byte the file helm renders.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import defaults, manifests, process, render_dir, secrets
from pdctl.chart import bundled_chart_dir
from pdctl.errors import InputError
from pdctl.findings import Finding, Severity
from pdctl.helm import Helm, TemplateRequest, find_helm, template, values_file
from pdctl.validation.inputs import STDIN, Input
from pdctl.validation.kube import check_objects
from pdctl.validation.report import FileReport, RenderCheck
from pdctl.validation.schema_and_rules import check_values
from pdctl.values.coalesce import merge_files
from pdctl.values.loader import Document, ValuesLoadError, load, load_stream
from pdctl.values.paths import KeyPath
from pdctl.values.setvalues import apply_sets, assignments

# Values files in helm's order: a list or tuple of names, never one string (a str is a Sequence
# of one-letter names to a type checker; load_values refuses one at run time too).
FileNames = list[str] | tuple[str, ...]


@dataclass(frozen=True)
class Origin:
    """Where a key's value came from: a file and line, or a --set assignment (`key=value`)."""

    file: str | None = None
    line: int | None = None
    assignment: str | None = None


@dataclass
class Values:
    """User values: the files merged in order, then --set applied; with where each key came from."""

    data: dict[str, Any]
    sources: list[tuple[str, Document]] = field(default_factory=list)
    # What each --set assignment wrote, in order: (key path, `key=value`). --set comes after
    # every file, so an assignment's key holds its value whatever the files say.
    sets: list[tuple[KeyPath, str]] = field(default_factory=list)

    def _set(self, wrote: Callable[[KeyPath], bool]) -> Origin | None:
        """The last --set assignment whose key path passes the test."""
        found = [assignment for path, assignment in self.sets if wrote(path)]
        return Origin(assignment=found[-1]) if found else None

    def _line(self, path: KeyPath) -> Origin | None:
        """The last file that has the key at path."""
        for name, document in reversed(self.sources):
            line = document.lines.get(path)
            if line is not None:
                return Origin(name, line)
        return None

    def _parent_line(self, path: KeyPath) -> Origin | None:
        for end in range(len(path) - 1, 0, -1):
            origin = self._line(path[:end])
            if origin:
                return origin
        return None

    def nearest_set(self, path: KeyPath) -> Origin:
        """The --set assignment whose key shares the most with path (the last of equals): where
        a finding the assignments caused, with no record of what it read, is shown."""

        def shared(wrote: KeyPath) -> int:
            return next(
                (i for i, (a, b) in enumerate(zip(wrote, path, strict=False)) if a != b),
                min(len(wrote), len(path)),
            )

        best = max(range(len(self.sets)), key=lambda i: (shared(self.sets[i][0]), i))
        return Origin(assignment=self.sets[best][1])

    def locate(self, path: KeyPath, read: frozenset[KeyPath] = frozenset()) -> Origin:
        """Where a key was set: the --set that wrote it (or a parent of it), else a --set that
        wrote a key in `read` (what a check read, for a finding the files alone do not give),
        else the last file with the key, else a --set that wrote a key under it, else the last
        file with its nearest parent."""
        return (
            self._set(lambda wrote: path[: len(wrote)] == wrote)
            or self._set(lambda wrote: wrote in read)
            or self._line(path)
            or self._set(lambda wrote: wrote[: len(path)] == path)
            or self._parent_line(path)
            or Origin(self.sources[-1][0] if self.sources else None)
        )


@dataclass
class Rendered:
    text: str
    objects: list[manifests.Manifest]
    helm_version: str  # as helm reports it, e.g. "v4.1.4"

    @property
    def summary(self) -> manifests.Summary:
        return manifests.summarize(self.objects)


def display_name(name: str) -> str:
    return "<stdin>" if name == STDIN else name


def load_values(files: FileNames, set_values: Sequence[str] = ()) -> Values:
    """Read each file safely (or - for stdin), merge them as helm does, apply --set. Hostile or
    broken YAML raises ValuesLoadError naming the file and line."""
    if isinstance(files, str):
        raise TypeError(f"files is a list of file names, not the string {files!r}")
    sources = []
    for name in files:
        try:
            document = (
                load_stream(sys.stdin.buffer, display_name(name))
                if name == STDIN
                else load(Path(name))
            )
        except ValuesLoadError as error:
            error.file = display_name(name)
            error.message = f"{error.file}: {error.message}"
            raise
        secrets.remember(document.data)  # masked in whatever pdctl prints from now on
        sources.append((display_name(name), document))
    data = apply_sets(merge_files(document.data for _, document in sources), set_values)
    secrets.remember(data)  # and those given with --set
    return Values(data=data, sources=sources, sets=assignments(set_values))


def _from_files(
    helm: Helm, values: Values, release: str, chart: Path, namespace: str
) -> set[tuple[str, KeyPath]]:
    """(rule, key path) of each finding the files give without the --set assignments: the others
    the assignments caused (none to tell apart without any)."""
    if not values.sets:
        return set()
    files_alone = merge_files(document.data for _, document in values.sources)
    return {(f.rule, f.path) for f in check_values(helm, files_alone, release, chart, namespace)}


def check(
    values: Values,
    release: str = defaults.RELEASE,
    chart: Path | None = None,
    namespace: str = defaults.NAMESPACE,
    helm_path: str | None = None,
) -> list[Finding]:
    """The chart's schema, its refusals and pdctl's rules; each finding located in its file and
    line, or at the --set assignment that wrote its key."""

    chart = chart or bundled_chart_dir()
    helm = find_helm(helm_path)
    findings = check_values(helm, values.data, release, chart, namespace)
    from_files = _from_files(helm, values, release, chart, namespace)
    for finding in findings:
        if finding.path and finding.line is None:
            caused = (finding.rule, finding.path) not in from_files
            origin = (
                values.nearest_set(finding.path)
                if caused and values.sets and not finding.inputs  # a refusal names no reads
                else values.locate(finding.path, finding.inputs if caused else frozenset())
            )
            finding.file, finding.line, finding.assignment = (
                origin.file,
                origin.line,
                origin.assignment,
            )
    return findings


def errors(findings: Sequence[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.severity is Severity.error]


@dataclass
class Prepared:
    """Values that passed the checks (or whose checks were skipped), and the warnings found."""

    values: Values
    warnings: list[Finding]


def prepare(
    files: FileNames,
    set_values: Sequence[str] = (),
    release: str = defaults.RELEASE,
    namespace: str = defaults.NAMESPACE,
    chart: Path | None = None,
    skip_validation: bool = False,
    helm_path: str | None = None,
) -> Prepared:
    """Load and check values for helm; refused values raise InputError listing every error."""
    values = load_values(files, set_values)
    if skip_validation:
        return Prepared(values, [])
    findings = check(values, release, chart, namespace, helm_path)
    refused = errors(findings)
    if refused:
        raise InputError(
            f"the values were refused: {len(refused)} error(s)",
            hint="fix them (`pdctl validate` explains each), or pass --skip-validation to "
            "hand them to helm anyway",
            details=[line for finding in refused for line in finding.lines()],
        )
    return Prepared(values, [f for f in findings if f.severity is Severity.warning])


def merged_file(values: Values) -> AbstractContextManager[Path]:
    """The merged values as one file for helm (pdctl.helm.values_file)."""
    return values_file(values.data)


def render(
    values: Values,
    release: str = defaults.RELEASE,
    namespace: str = defaults.NAMESPACE,
    chart: Path | None = None,
    output_dir: Path | None = None,
    helm_path: str | None = None,
    kube_version: str | None = None,
    force: bool = False,
) -> Rendered:
    """helm template of the chart (default: the bundled one) with exactly these values; with
    output_dir, into that folder (pdctl.render_dir: `force` replaces one pdctl did not write)."""

    chart_dir = chart or bundled_chart_dir()
    if not (chart_dir / "Chart.yaml").is_file():
        raise InputError(f"{chart_dir}: not a chart directory (no Chart.yaml)")
    folder: AbstractContextManager[Path | None] = (
        render_dir.replacing(output_dir, force) if output_dir else nullcontext()
    )
    with merged_file(values) as path, folder as into:
        request = TemplateRequest(
            chart=chart_dir,
            release=release,
            namespace=namespace,
            values_files=(path,),
            kube_version=kube_version,
            output_dir=into,
        )
        helm = find_helm(helm_path)
        text = template(helm, request)
        if into:
            text = "".join(
                path.read_text(encoding="utf-8") for path in sorted(into.rglob("*.yaml"))
            )
    return Rendered(text=text, objects=manifests.parse(text), helm_version=helm.version)


@dataclass(frozen=True)
class ValidateOptions:
    set_values: Sequence[str] = ()
    ignore: frozenset[str] = frozenset()  # warning rule ids to leave out
    release: str = defaults.RELEASE
    namespace: str = defaults.NAMESPACE
    render: bool = False
    kube_version: str = defaults.KUBE_VERSION
    helm_path: str | None = None
    chart: Path | None = None


def validate(names: FileNames, options: ValidateOptions) -> FileReport:
    """Everything `pdctl validate` checks for one file, or for several merged as helm merges
    them: loading, schema and rules, and with options.render the render of exactly those values
    against strict Kubernetes schemas. Only an environment problem (no helm) raises."""
    report = FileReport(
        name=" + ".join(display_name(name) for name in names),
        render=RenderCheck(options.kube_version) if options.render else None,
    )
    try:
        values = load_values(names, options.set_values)
    except ValuesLoadError as error:
        report.findings.append(
            Finding(
                error.code,
                Severity.error,
                error.reason,
                line=error.line,
                column=error.column,
                file=error.file,
            )
        )
        return report
    report.findings = [
        finding
        for finding in check(
            values, options.release, options.chart, options.namespace, options.helm_path
        )
        if not (finding.severity is Severity.warning and finding.rule in options.ignore)
    ]
    if options.render and not errors(report.findings):
        try:
            rendered = render(
                values,
                release=options.release,
                namespace=options.namespace,
                chart=options.chart,
                helm_path=options.helm_path,
                kube_version=options.kube_version,
            )
        except InputError as error:
            report.findings.append(Finding("HELM", Severity.error, error.message))
        else:
            report.findings += check_objects(rendered.objects, options.kube_version)
            report.render = RenderCheck(
                options.kube_version, rendered.helm_version, len(rendered.objects)
            )
    return report


def validate_each(inputs: Sequence[Input], options: ValidateOptions) -> list[FileReport]:
    """validate() of each file alone (an unread one as its problem), in order; the files are
    checked side by side, as each runs helm."""

    def one(item: Input) -> FileReport:
        if item.problem:
            return FileReport.unread(item.name, item.problem, item.severity)
        return validate([item.name], options)

    if len(inputs) < 2:  # nothing to check beside it
        return [one(item) for item in inputs]
    from concurrent.futures import ThreadPoolExecutor  # lazy: start-up

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        try:
            return list(pool.map(one, inputs))
        except process.Interrupted as interrupted:  # the workers' helm runs would hold the exit
            pool.shutdown(wait=False, cancel_futures=True)
            process.stop_all(interrupted.signum)
            raise
