"""Rendered objects against strict Kubernetes schemas (kubernetes-validate, imported lazily)."""

from __future__ import annotations

from typing import Any

from pdctl.findings import Finding, Severity

DEFAULT_KUBE_VERSION = "1.35"


def check_objects(objects: list[dict[str, Any]], kube_version: str) -> list[Finding]:
    import kubernetes_validate

    findings = []
    for obj in objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(p) for p in error.path)
            findings.append(
                Finding(
                    "KUBE",
                    Severity.error,
                    f"rendered {name} fails Kubernetes {kube_version} schemas: {error.message}"
                    + (f" at {where}" if where else ""),
                )
            )
        except kubernetes_validate.utils.SchemaNotFoundError:
            findings.append(
                Finding("KUBE", Severity.error, f"no Kubernetes {kube_version} schema for {name}")
            )
    return findings
