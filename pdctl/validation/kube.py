"""Rendered objects against strict Kubernetes schemas (kubernetes-validate, imported lazily)."""

from __future__ import annotations

import functools
from typing import Any

from pdctl import workloads
from pdctl.findings import Finding, Severity

# Kinds of the LWS controller, and the llm-d router's gateway-mode InferencePool and HTTPRoute:
# their pod templates and metadata are checked as Kubernetes objects (the CRD schemas themselves
# are checked in the test suite, tests/crd_schemas.py).
CUSTOM_KINDS = {"LeaderWorkerSet", "DisaggregatedSet", "InferencePool", "HTTPRoute"}


def library() -> Any:
    """kubernetes-validate, imported on first use, its schema files read once per process: as
    released (1.37.0) it reads them, the large `_definitions.json` among them, again for every
    object, which made checking a render about ten times slower."""
    import kubernetes_validate
    from kubernetes_validate import utils

    if not hasattr(utils.schema_contents, "cache_info"):
        utils.schema_contents = functools.cache(utils.schema_contents)
    return kubernetes_validate


def _check_custom(obj: dict[str, Any], name: str, kube_version: str) -> list[Finding]:
    kubernetes_validate = library()

    wrapped = [("metadata", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]})]
    for where, template in workloads.pod_templates(obj):
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
        wrapped.append((where, {**pod, "template": template}))
    findings = []
    for where, wrapper in wrapped:
        try:
            kubernetes_validate.validate(wrapper, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            at = ".".join(str(p) for p in error.path)
            findings.append(
                Finding(
                    "KUBE",
                    Severity.error,
                    f"rendered {name} {where} fails Kubernetes {kube_version} schemas: "
                    f"{error.message}" + (f" at {at}" if at else ""),
                )
            )
    return findings


def check_objects(objects: list[dict[str, Any]], kube_version: str) -> list[Finding]:
    kubernetes_validate = library()

    findings = []
    for obj in objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj.get("kind") in CUSTOM_KINDS:
            findings += _check_custom(obj, name, kube_version)
            continue
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
