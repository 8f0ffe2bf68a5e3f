"""Rendered custom resources against their CRDs' own OpenAPI schemas, strictly.

The CRDs are vendored from kubernetes-sigs/lws release v0.10.0, and for the llm-d router's gateway
mode from kubernetes-sigs/gateway-api-inference-extension v1.6.0 (InferencePool) and
kubernetes-sigs/gateway-api v1.5.1 standard channel (HTTPRoute), KEDA v2.20.2 (ScaledObject) and
prometheus-operator v0.93.0 (ServiceMonitor, PodMonitor) (tests/fixtures/crds/README.md).
A CRD's openAPIV3Schema is an OpenAPI v3 structural schema; it is checked here with the
`jsonschema` library after one change, the strictness Kubernetes' own pruning implies: an object
schema with `properties` and without `x-kubernetes-preserve-unknown-fields` takes no other keys
(the API server would silently drop them, the same silent loss `kubernetes-validate --strict`
catches for built-in kinds). The CRDs leave `metadata` and embedded pod-template metadata open, so
those, and every embedded pod template, are also checked as Kubernetes objects of the cluster's
version with kubernetes-validate (strict). The CEL rules of a CRD (x-kubernetes-validations) are
not evaluated here: the chart's checks and `pdctl validate` enforce the DisaggregatedSet's.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from pdctl import workloads

CRDS = Path(__file__).resolve().parent / "fixtures" / "crds"
FILES = {
    (
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
    ): "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"): (
        "disaggregatedset.x-k8s.io_disaggregatedsets.yaml"
    ),
    ("inference.networking.k8s.io/v1", "InferencePool"): (
        "inference.networking.k8s.io_inferencepools.yaml"
    ),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "gateway.networking.k8s.io_httproutes.yaml",
    # Autoscaling and monitoring (KEDA v2.20.2, prometheus-operator v0.93.0; the fixtures' README).
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects.yaml",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitors.yaml",
    ("monitoring.coreos.com/v1", "PodMonitor"): "monitoring.coreos.com_podmonitors.yaml",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "monitoring.coreos.com_prometheusrules.yaml",
}


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def schema(api_version: str, kind: str) -> dict[str, Any]:
    """The strict JSON schema of a vendored CRD's served version."""
    crd = yaml.safe_load((CRDS / FILES[(api_version, kind)]).read_text())
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    return _strict(served["schema"]["openAPIV3Schema"])


def is_custom(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in FILES


def errors(obj: dict[str, Any], kube_version: str) -> list[str]:
    """Every way a rendered custom resource (LeaderWorkerSet, DisaggregatedSet, InferencePool,
    HTTPRoute) fails its CRD or, for its metadata and pod templates, Kubernetes `kube_version`."""
    import jsonschema

    from pdctl.validation.kube import library

    kubernetes_validate = library()

    found = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in jsonschema.Draft7Validator(schema(obj["apiVersion"], obj["kind"])).iter_errors(obj)
    ]
    wrapped = [("metadata", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]})]
    for where, template in workloads.pod_templates(obj):
        pod = copy.deepcopy(template)
        wrapped.append(
            (
                where,
                {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": "t"},
                    "template": pod,
                },
            )
        )
    for where, wrapper in wrapped:
        try:
            kubernetes_validate.validate(wrapper, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            found.append(
                f"{where}: Kubernetes {kube_version}: {error.message} at {list(error.path)}"
            )
    return found
