"""Render the chart through the real helm and read back what it rendered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pdctl import manifests
from pdctl.chart import bundled_chart_dir
from pdctl.errors import InputError
from pdctl.helm import TemplateRequest, find_helm, template


@dataclass
class Rendered:
    text: str
    objects: list[manifests.Manifest]

    @property
    def summary(self) -> manifests.Summary:
        return manifests.summarize(self.objects)


def _check_loadable(paths: Sequence[Path]) -> None:
    """Refuse missing files and hostile or broken YAML before helm sees them."""
    from pdctl.values.loader import ValuesLoadError, load

    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: no such values file")
        try:
            load(path)
        except ValuesLoadError as error:
            raise InputError(f"{path}: {error.message}") from None


def render(
    values_files: Sequence[Path],
    set_values: Sequence[str] = (),
    release: str = "pd",
    namespace: str = "default",
    chart: Path | None = None,
    output_dir: Path | None = None,
    helm_path: str | None = None,
    kube_version: str | None = None,
) -> Rendered:
    _check_loadable(values_files)
    chart_dir = chart or bundled_chart_dir()
    if not (chart_dir / "Chart.yaml").is_file():
        raise InputError(f"{chart_dir}: not a chart directory (no Chart.yaml)")
    request = TemplateRequest(
        chart=chart_dir,
        release=release,
        namespace=namespace,
        values_files=tuple(path.resolve() for path in values_files),
        set_values=tuple(set_values),
        kube_version=kube_version,
        output_dir=output_dir,
    )
    text = template(find_helm(helm_path), request)
    if output_dir:
        text = "".join(
            path.read_text(encoding="utf-8") for path in sorted(output_dir.rglob("*.yaml"))
        )
    return Rendered(text=text, objects=manifests.parse(text))
