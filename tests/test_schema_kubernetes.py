"""Kubernetes pass-through fields of the values schema are typed by Kubernetes 1.29's own types.

For each such field: a value Kubernetes accepts passes `pdctl validate` and renders into objects
that pass Kubernetes' strict schemas; a value Kubernetes refuses is refused, by validate with the
full key path and by helm itself. The copied definitions are draft-07, strict, and exactly what
the source references.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from pdctl.chart import default_values
from pdctl.validation.kube import library
from pdctl.validation.schema import check
from pdctl.values.coalesce import with_defaults

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "helm" / "values.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
SOURCE = yaml.safe_load((ROOT / "schemas" / "values.schema.yaml").read_text())
HELM = ROOT / ".tools" / "helm-4.1.4" / "helm"
BASE = yaml.safe_load((ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml").read_text())
KUBE_VERSION = "1.29.0"
LOCAL = "#/definitions/"
kubernetes_validate = library()


def _load_build_script() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))  # as `python scripts/build_schema.py` has it
    spec = importlib.util.spec_from_file_location(
        "build_schema", ROOT / "scripts" / "build_schema.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _load_build_script()

# Where each field lives: (values path to the field, path as pdctl writes it).
POOL = ("servingEngineSpec", "modelSpec", 0)
FIELDS: dict[str, tuple[tuple[str | int, ...], str]] = {
    "affinity": ((*POOL, "affinity"), "servingEngineSpec.modelSpec[0].affinity"),
    "tolerations": ((*POOL, "tolerations"), "servingEngineSpec.modelSpec[0].tolerations"),
    "nodeSelector": ((*POOL, "nodeSelector"), "servingEngineSpec.modelSpec[0].nodeSelector"),
    "pool env": ((*POOL, "env"), "servingEngineSpec.modelSpec[0].env"),
    "engine env": (("servingEngineSpec", "env"), "servingEngineSpec.env"),
    "engine securityContext": (
        ("servingEngineSpec", "securityContext"),
        "servingEngineSpec.securityContext",
    ),
    "engine containerSecurityContext": (
        ("servingEngineSpec", "containerSecurityContext"),
        "servingEngineSpec.containerSecurityContext",
    ),
    "router containerSecurityContext": (
        ("routerSpec", "containerSecurityContext"),
        "routerSpec.containerSecurityContext",
    ),
    "router resources": (("routerSpec", "resources"), "routerSpec.resources"),
    "router env": (("routerSpec", "env"), "routerSpec.env"),
}

ACCEPTED: dict[str, Any] = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}
                        ]
                    }
                ]
            }
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"model": "llama-prefill"}},
                    },
                }
            ]
        },
    },
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "pool",
            "operator": "Equal",
            "value": "pd",
            "effect": "NoExecute",
            "tolerationSeconds": 30,
        },
    ],
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "pool env": [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "HF_TOKEN_ALT", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {
            "name": "MEM_LIMIT",
            "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
        },
    ],
    "engine env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    "engine securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "fsGroup": 1000,
        "supplementalGroups": [44],
        "seccompProfile": {"type": "RuntimeDefault"},
        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
    },
    "engine containerSecurityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]},
        "readOnlyRootFilesystem": False,
    },
    "router containerSecurityContext": {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/router.json"},
    },
    "router resources": {
        "requests": {"cpu": 2, "memory": "30Gi"},
        "limits": {"cpu": "2500m", "memory": "32G", "ephemeral-storage": "1e10"},
    },
    "router env": [{"name": "LOG_LEVEL", "value": "debug"}],
}

# (field, value, the key path pdctl names, whether Kubernetes' OpenAPI schema refuses it too;
# False: only the API server's validation does, which kubernetes-validate does not model).
REFUSED: dict[str, tuple[str, Any, str, bool]] = {
    "affinity: wrong type deep inside": (
        "affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}
            }
        },
        "servingEngineSpec.modelSpec[0].affinity.nodeAffinity"
        ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        True,
    ),
    "affinity: unknown key in a label selector": (
        "affinity",
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "labelSelector": {"matchLabel": {"a": "b"}}}
                ]
            }
        },
        "servingEngineSpec.modelSpec[0].affinity.podAffinity"
        ".requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabel",
        True,
    ),
    "tolerations: unknown key": (
        "tolerations",
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effects": "NoSchedule"}],
        "servingEngineSpec.modelSpec[0].tolerations[0].effects",
        True,
    ),
    "tolerations: unsupported operator": (
        "tolerations",
        [{"key": "nvidia.com/gpu", "operator": "exists"}],
        "servingEngineSpec.modelSpec[0].tolerations[0].operator",
        False,
    ),
    "nodeSelector: a number": (
        "nodeSelector",
        {"gpu": 1},
        "servingEngineSpec.modelSpec[0].nodeSelector.gpu",
        True,
    ),
    "pool env: unknown key in a secret reference": (
        "pool env",
        [
            {
                "name": "T",
                "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t", "optionall": True}},
            }
        ],
        "servingEngineSpec.modelSpec[0].env[0].valueFrom.secretKeyRef.optionall",
        True,
    ),
    "pool env: name not allowed": (
        "pool env",
        [{"name": "1ST", "value": "x"}],
        "servingEngineSpec.modelSpec[0].env[0].name",
        False,
    ),
    "engine env: unknown key": (
        "engine env",
        [{"name": "NCCL_DEBUG", "valu": "INFO"}],
        "servingEngineSpec.env[0].valu",
        True,
    ),
    "engine env: value and valueFrom": (
        "engine env",
        [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "servingEngineSpec.env[0]",
        False,
    ),
    "engine securityContext: user as a string": (
        "engine securityContext",
        {"runAsUser": "root"},
        "servingEngineSpec.securityContext.runAsUser",
        True,
    ),
    "engine securityContext: negative group": (
        "engine securityContext",
        {"fsGroup": -1},
        "servingEngineSpec.securityContext.fsGroup",
        False,
    ),
    "engine containerSecurityContext: capabilities not a list": (
        "engine containerSecurityContext",
        {"capabilities": {"drop": "ALL"}},
        "servingEngineSpec.containerSecurityContext.capabilities.drop",
        True,
    ),
    "router containerSecurityContext: a field newer than 1.29": (
        "router containerSecurityContext",
        {"appArmorProfile": {"type": "RuntimeDefault"}},
        "routerSpec.containerSecurityContext.appArmorProfile",
        True,
    ),
    "router containerSecurityContext: unknown seccomp type": (
        "router containerSecurityContext",
        {"seccompProfile": {"type": "Default"}},
        "routerSpec.containerSecurityContext.seccompProfile.type",
        False,
    ),
    "router resources: unknown key": (
        "router resources",
        {"limit": {"cpu": "1"}},
        "routerSpec.resources.limit",
        True,
    ),
    "router resources: malformed quantity": (
        "router resources",
        {"limits": {"memory": "30 GB"}},
        "routerSpec.resources.limits.memory",
        False,
    ),
    "router env: value a number": (
        "router env",
        [{"name": "LOG_LEVEL", "value": 1}],
        "routerSpec.env[0].value",
        True,
    ),
}


def checked(values: dict[str, Any]) -> list[Any]:
    """The schema's findings on values merged with the chart's defaults, as helm checks them."""
    return check(with_defaults(default_values(ROOT / "helm"), values), SCHEMA_PATH)


def with_field(name: str, value: Any) -> dict[str, Any]:
    values = copy.deepcopy(BASE)
    path, _ = FIELDS[name]
    node: Any = values
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return values


def helm_template(
    tmp_path: Path, values: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    if not HELM.is_file():
        pytest.fail(f"{HELM} is missing: run `make helm`")
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    return subprocess.run(
        [str(HELM), "template", "pd", str(ROOT / "helm"), "-f", str(values_file), *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def kube_errors(manifest_text: str) -> list[str]:
    """What Kubernetes 1.29's strict schemas say about each rendered object."""
    errors = []
    for obj in yaml.safe_load_all(manifest_text):
        if not obj:
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {error.message}")
    return errors


# ---- Each typed field: accepted and refused values -------------------------------------------


def test_every_kubernetes_field_has_cases() -> None:
    assert set(ACCEPTED) == set(FIELDS)
    assert {field for field, *_ in REFUSED.values()} == set(FIELDS)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_value_kubernetes_accepts_passes_and_renders(name: str, tmp_path: Path) -> None:
    values = with_field(name, ACCEPTED[name])
    assert checked(values) == []
    result = helm_template(tmp_path, values)
    assert result.returncode == 0, result.stderr
    assert kube_errors(result.stdout) == []


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_value_kubernetes_refuses_is_refused_with_its_path(case: str, tmp_path: Path) -> None:
    name, value, where, _ = REFUSED[case]
    findings = checked(with_field(name, value))
    assert [finding.key for finding in findings] == [where], [f.message for f in findings]
    parent, _, last = where.rpartition(".")
    message = findings[0].message
    assert where in message or f"unknown key {last!r} in {parent}" in message, message
    result = helm_template(tmp_path, with_field(name, value))
    assert result.returncode != 0, f"helm accepted {case}"
    assert "schema" in result.stderr
    assert where.rsplit(".", 1)[-1].split("[")[0] in result.stderr


@pytest.mark.parametrize("case", sorted(c for c, v in REFUSED.items() if v[3]))
def test_kubernetes_schema_refuses_the_same_values(case: str, tmp_path: Path) -> None:
    name, value, _, _ = REFUSED[case]
    result = helm_template(tmp_path, with_field(name, value), "--skip-schema-validation")
    assert result.returncode == 0, result.stderr
    assert kube_errors(result.stdout), f"Kubernetes {KUBE_VERSION} accepts {case}"


def test_messages_name_the_full_key_path() -> None:
    deep = REFUSED["affinity: wrong type deep inside"]
    (finding,) = checked(with_field(deep[0], deep[1]))
    assert finding.message == f'{deep[2]} must be of type array, not "x"'
    unknown = REFUSED["tolerations: unknown key"]
    (finding,) = checked(with_field(unknown[0], unknown[1]))
    assert (
        finding.message == "unknown key 'effects' in servingEngineSpec.modelSpec[0].tolerations[0]"
    )
    assert finding.hint == "did you mean effect?"


# ---- Quantity and IntOrString -----------------------------------------------------------------


@pytest.mark.parametrize(
    "quantity", ["30Gi", 8, 0.5, "500m", "1.5Gi", "16G", "1e3", "+2", ".5", "100n"]
)
def test_quantities_kubernetes_parses_pass(quantity: Any) -> None:
    values = with_field("router resources", {"limits": {"memory": quantity}})
    assert checked(values) == []


@pytest.mark.parametrize("quantity", ["30 GB", "30gi", "1Gb", "1e", "1.5.5", "", True, "-1Gi", -1])
def test_quantities_kubernetes_refuses_are_refused(quantity: Any) -> None:
    values = with_field("router resources", {"requests": {"cpu": quantity}})
    findings = checked(values)
    assert [finding.key for finding in findings] == ["routerSpec.resources.requests.cpu"]


def test_int_or_string_copies_as_int_or_string() -> None:
    name = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    copied = BUILD.kubernetes_definitions({name}, BUILD.kubernetes_source())
    schema = {"$ref": LOCAL + name, "definitions": copied}
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid(8080) and validator.is_valid("http")
    assert not validator.is_valid(1.5) and not validator.is_valid(True)


# ---- The generated definitions ----------------------------------------------------------------


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every dict in a definition (property maps included, which is harmless for the checks)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from schemas(item)


KUBERNETES = {name: s for name, s in SCHEMA["definitions"].items() if name.startswith("io.k8s.")}


def test_schema_is_draft07() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    text = json.dumps(SCHEMA)
    assert "$defs" not in text and "x-kubernetes-" not in text
    for definition in KUBERNETES.values():
        for node in schemas(definition):
            assert "format" not in node
            if isinstance(node.get("$ref"), str):
                assert set(node) == {"$ref"}, "keywords beside $ref are ignored in draft-07"


def test_every_ref_resolves_locally() -> None:
    for ref in refs(SCHEMA):
        assert ref.startswith(LOCAL), ref
        assert ref.removeprefix(LOCAL) in SCHEMA["definitions"], ref


def test_copied_definitions_are_exactly_what_the_source_references() -> None:
    own = set(SOURCE["definitions"])
    wanted = {ref.removeprefix(LOCAL) for ref in refs(SOURCE)} - own
    assert wanted and all(name.startswith("io.k8s.") for name in wanted)
    closure: set[str] = set()
    pending = list(wanted)
    while pending:
        name = pending.pop()
        if name not in closure:
            closure.add(name)
            pending += [ref.removeprefix(LOCAL) for ref in refs(SCHEMA["definitions"][name])]
    assert set(KUBERNETES) == closure
    assert set(SCHEMA["definitions"]) == own | closure


def test_copied_definitions_are_kubernetes_1_29_and_strict() -> None:
    source = BUILD.kubernetes_source()
    assert BUILD.KUBERNETES_FILE.startswith("kubernetes-json-schema/v1.29.0-local-strict/")
    for name, definition in KUBERNETES.items():
        original = source[name]
        assert set(definition.get("properties", {})) == set(original.get("properties", {})), name
        assert definition.get("required") == original.get("required"), name
        for node in schemas(definition):
            if isinstance(node.get("properties"), dict) and "type" in node:
                assert node.get("additionalProperties") is False, name
    # Fields Kubernetes added after 1.29 are not there (appArmorProfile came in 1.30).
    assert "appArmorProfile" not in KUBERNETES["io.k8s.api.core.v1.SecurityContext"]["properties"]


def test_check_mode_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "values.schema.json"
    stale.write_text(SCHEMA_PATH.read_text().replace("io.k8s.api.core.v1.Affinity", "Affinity", 1))
    monkeypatch.setattr(BUILD, "TARGET", stale)
    monkeypatch.setattr(sys, "argv", ["build_schema.py", "--check"])
    assert BUILD.main() == 1
    stale.write_text(SCHEMA_PATH.read_text())
    assert BUILD.main() == 0
