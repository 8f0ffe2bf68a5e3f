"""pdctl validate: parse the command line, call the validation library, print findings."""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from pdctl import defaults, secrets
from pdctl.cli import _output
from pdctl.cli._errors import handle_errors
from pdctl.cli._options import ChartOpt, HelmOpt, NamespaceOpt, ReleaseOpt, SetOpt
from pdctl.errors import UsageError

if TYPE_CHECKING:
    from pdctl.validation.report import FileReport


class ValidateFormat(str, Enum):
    text = "text"
    json = "json"
    github = "github"


def _github_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _print_text(reports: list[FileReport], strict: bool) -> None:
    for report in reports:
        for finding in report.findings:
            for line in finding.lines(report.name):
                _output.data(line)
        status = "ok" if report.passed(strict) else "invalid"
        counts = f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)"
        _output.info(f"{report.name}: {status} ({counts})")
        if report.render:
            _output.info(f"{report.name}: {report.render.describe()}")


def _print_github(reports: list[FileReport], strict: bool) -> None:
    for report in reports:
        for finding in report.findings:
            level = "error" if finding.severity.value == "error" or strict else "warning"
            # A finding of several merged -f files names its own file.
            props = [f"file={_github_escape(finding.file or report.name, True)}"]
            if finding.line:
                props.append(f"line={finding.line}")
            if finding.column:
                props.append(f"col={finding.column}")
            props.append(f"title={_github_escape(finding.rule, True)}")
            key = (f"{finding.flag}: " if finding.flag else "") + (
                f"{finding.key}: " if finding.key else ""
            )
            hint = f" (hint: {finding.hint})" if finding.hint else ""
            # Masked before escaping: a secret's %, CR or LF would hide it from data()'s mask.
            message = _github_escape(secrets.redact(key + finding.message + hint))
            _output.data(f"::{level} {','.join(props)}::{message}")


@handle_errors
def validate(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help="Values files, globs, directories (their *values*.yaml), or - for stdin; "
            "each is checked alone, not merged with the others.",
            show_default=False,
            metavar="[FILE]...",
        ),
    ] = None,
    values: Annotated[
        list[str] | None,
        typer.Option(
            "--values",
            "-f",
            help="Values file to check merged with the other -f files, as helm, template, "
            "deploy and preflight merge them (repeatable; later files win).",
        ),
    ] = None,
    set_values: SetOpt = None,
    release: ReleaseOpt = defaults.RELEASE,
    output: Annotated[
        ValidateFormat, typer.Option("--output", "-o", help="text, json, or github annotations.")
    ] = ValidateFormat.text,
    render: Annotated[
        bool,
        typer.Option(
            "--render", help="Also render with helm and check objects against Kubernetes schemas."
        ),
    ] = False,
    kube_version: Annotated[
        str, typer.Option("--kube-version", help="Kubernetes version for --render.")
    ] = defaults.KUBE_VERSION,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail validation too.")] = False,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            help="Leave out these warnings, e.g. --ignore PD103 or PD101,PD103 (repeatable). "
            "Errors cannot be ignored: the chart refuses them too.",
        ),
    ] = None,
    chart: ChartOpt = None,
    namespace: NamespaceOpt = defaults.NAMESPACE,
    helm: HelmOpt = None,
) -> None:
    """Check values files: YAML, the chart's schema and the PD rules (exit 1 if any is invalid).

    Each FILE is checked alone, as if it were the only values file: an override file that
    needs keys from a base file fails on its own. The -f files are checked once, merged in
    order as template, deploy and preflight merge them: `pdctl validate -f base.yaml -f
    override.yaml` checks what `pdctl deploy base.yaml override.yaml` would install."""
    from pdctl.pipeline import ValidateOptions, validate, validate_each  # lazy: start-up
    from pdctl.validation.inputs import expand, warning_ids  # lazy: start-up

    if not re.match(r"^1\.\d+(\.\d+)?$", kube_version):
        raise UsageError(f"--kube-version {kube_version!r}: expected a version such as 1.35")
    if not files and not values:
        raise UsageError("name the values files to check: FILE... (each alone) or -f FILE...")
    options = ValidateOptions(
        set_values=tuple(set_values or ()),
        ignore=warning_ids(ignore or []),
        release=release,
        namespace=namespace,
        render=render,
        kube_version=kube_version,
        helm_path=helm,
        chart=chart,
    )
    reports = validate_each(expand(files or []), options) + (
        [validate(values, options)] if values else []
    )
    if output is ValidateFormat.json:
        failed = [r for r in reports if not r.passed(strict)]
        _output.as_json(
            {
                "valid": not failed,
                "strict": strict,
                "files": [r.as_dict(strict) for r in reports],
            }
        )
    elif output is ValidateFormat.github:
        _print_github(reports, strict)
    else:
        _print_text(reports, strict)
    failed = [r for r in reports if not r.passed(strict)]
    if len(reports) > 1:
        _output.info(f"{len(reports) - len(failed)} of {len(reports)} file(s) valid")
    if failed:
        raise typer.Exit(1)
