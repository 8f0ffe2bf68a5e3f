"""Write helm/values.schema.json from schemas/values.schema.yaml (the one source), the
connector table helm/files/connectors.yaml (`kvTransfer.connector` takes the table's connector
names, and each connector's own kvTransfer keys are its `values`; a key two connectors share must
be defined identically; routerSpec.llmd.version takes its llm-d router releases) and
helm/files/production-stack.yaml (the production-stack keys pd-stack refuses become properties
that take anything, so the refusal's own message reaches the user).

The source names Kubernetes types it does not define, as `$ref: "#/definitions/<name>"` with
Kubernetes' own names (io.k8s.api.core.v1.Affinity, ...). This script copies each of them, and
every definition they reference transitively (nothing else), into the JSON's `definitions` from

    PyPI package kubernetes-validate==1.37.0, file
    kubernetes_validate/kubernetes-json-schema/v1.29.0-local-strict/_definitions.json
    (the strict variant: additionalProperties false on every object; Kubernetes 1.29.0, the
    oldest version the chart supports, so no field newer than 1.29 is accepted)

and turns them into JSON Schema draft-07, which Helm 3.14+ and 4.x apply:
- `$ref: "#/$defs/<name>"` becomes `#/definitions/<name>`; names are kept;
- every object schema with `properties` gets additionalProperties false (strict);
- `x-kubernetes-*` extension keys are dropped; any keyword outside draft-07 fails the build;
- formats int32 and int64 are not draft-07 formats: int32 becomes minimum/maximum of its range,
  int64 (the range of any integer Helm reads) is dropped;
- Quantity (`oneOf` string or number) gets the grammar of Kubernetes' resource.ParseQuantity
  as a pattern on its string form, so "30Gi" and 8 pass and "30 GB" does not;
- property descriptions are dropped (each definition keeps its own), to keep the file small:
  Helm loads it on every render.

Every schema that takes an integer, the source's and Kubernetes', gets the bounds
-(2^53 - 1) to 2^53 - 1 (or keeps narrower ones of its own): Helm reads every number as a float64,
which holds integers exactly only up to 2^53, so a larger one would reach the chart already
rounded (helm/helm issues 1707 and 6431); the chart prints integers with pd-stack.int.

Usage: python scripts/build_schema.py [--check]   (--check: exit 1 if the JSON is stale)
"""

from __future__ import annotations

import json
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import yaml
from values_reference import value_comments

from pdctl.values.loader import SAFE_INTEGER

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "schemas" / "values.schema.yaml"
CONNECTORS = ROOT / "helm" / "files" / "connectors.yaml"
TOPOLOGY = ROOT / "helm" / "files" / "topology.yaml"
VALUES = ROOT / "helm" / "values.yaml"
PRODUCTION_STACK = ROOT / "helm" / "files" / "production-stack.yaml"
TARGET = ROOT / "helm" / "values.schema.json"

KUBERNETES_PACKAGE = ("kubernetes-validate", "1.37.0")
KUBERNETES_FILE = "kubernetes-json-schema/v1.29.0-local-strict/_definitions.json"
KUBERNETES_PREFIX = "io.k8s."
LOCAL = "#/definitions/"

# Draft-07 keywords the copied definitions may use (anything else, say a 2019+ keyword, fails).
DRAFT07 = {
    "$ref",
    "description",
    "type",
    "properties",
    "additionalProperties",
    "required",
    "items",
    "enum",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "minimum",
    "maximum",
    "pattern",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
}
INTEGER_RANGES: dict[str, tuple[int, int] | None] = {"int32": (-(2**31), 2**31 - 1), "int64": None}
# String formats left out (a string is all the API server takes there): the pod volume types
# reach ObjectMeta's timestamps.
STRING_FORMATS = {"date-time"}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# resource.ParseQuantity: <sign>?<number><suffix>, number "1", "1.5", "1." or ".5", suffix a
# binary SI (Ki..Ei), a decimal SI (n, u, m, "", k, M..E) or a decimal exponent (e3, E-2).
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"


def kubernetes_source() -> dict[str, Any]:
    """The `$defs` of the pinned kubernetes-validate file."""
    package, version = KUBERNETES_PACKAGE
    installed = metadata.version(package)
    if installed != version:
        raise SystemExit(f"{package}=={version} is needed to build the schema, not {installed}")
    text = resources.files("kubernetes_validate").joinpath(KUBERNETES_FILE).read_text("utf-8")
    definitions: dict[str, Any] = json.loads(text)["$defs"]
    return definitions


def local_refs(node: Any) -> set[str]:
    """Names of the definitions that `node` references (#/definitions/<name>)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(LOCAL):
                found.add(value.removeprefix(LOCAL))
            else:
                found |= local_refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= local_refs(item)
    return found


def _draft07(node: dict[str, Any], where: str, top: bool = False) -> dict[str, Any]:
    """One schema of the Kubernetes file, in draft-07 and strict."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or (key == "description" and not top):
            continue
        if key == "format" and value in STRING_FORMATS:
            continue
        if key == "format":
            if value not in INTEGER_RANGES:
                raise SystemExit(f"{where}: format {value!r} has no draft-07 translation")
            bounds = INTEGER_RANGES[value]
            if bounds:
                out["minimum"], out["maximum"] = bounds
        elif key not in DRAFT07:
            raise SystemExit(f"{where}: keyword {key!r} is not draft-07")
        elif key == "$ref":
            name = value.removeprefix("#/$defs/")
            if name == value:
                raise SystemExit(f"{where}: unexpected $ref {value!r}")
            out[key] = LOCAL + name
        elif key == "properties":
            out[key] = {k: _draft07(v, f"{where}.{k}") for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _draft07(value, f"{where}/{key}")
        elif key in ("oneOf", "anyOf", "allOf"):
            out[key] = [_draft07(v, f"{where}/{key}") for v in value]
        else:
            out[key] = value
    if "$ref" in out and len(out) > 1:
        raise SystemExit(f"{where}: keywords beside $ref are ignored in draft-07: {sorted(out)}")
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def _quantity(source: dict[str, Any]) -> dict[str, Any]:
    expected = {"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]}
    if source != expected:
        raise SystemExit(f"{QUANTITY} changed in the Kubernetes file: {source}")
    return {
        "description": (
            "A Kubernetes quantity: a number, or a string such as 30Gi, 500m, 1.5 or 1e3 "
            "(the grammar of resource.ParseQuantity)."
        ),
        "oneOf": [{"type": "string", "pattern": QUANTITY_PATTERN}, {"type": "number"}],
    }


def kubernetes_definitions(names: set[str], source: dict[str, Any]) -> dict[str, Any]:
    """The definitions `names` and all they reference, from `source`, in draft-07 and strict."""
    copied: dict[str, Any] = {}
    pending = sorted(names)
    while pending:
        name = pending.pop()
        if name in copied:
            continue
        if name not in source:
            raise SystemExit(f"#/definitions/{name} is neither in the source nor in Kubernetes")
        schema = _quantity(source[name]) if name == QUANTITY else _draft07(source[name], name, True)
        copied[name] = schema
        pending += sorted(local_refs(schema) - set(copied))
    return dict(sorted(copied.items()))


def add_connectors(kv_transfer: dict[str, Any], table: dict[str, Any]) -> None:
    """The connector enum and every connector's own keys, into the kvTransfer definition."""
    properties = kv_transfer["properties"]
    properties["connector"]["enum"] = list(table["connectors"])
    owners: dict[str, str] = {}
    for name, connector in table["connectors"].items():
        for key, schema in (connector.get("values") or {}).items():
            if key in properties and (key not in owners or properties[key] != schema):
                raise SystemExit(f"{name} redefines kvTransfer.{key} (also {owners.get(key)})")
            properties[key] = schema
            owners.setdefault(key, name)


def add_topology(own: dict[str, Any], topology: dict[str, Any]) -> None:
    """The enums of helm/files/topology.yaml: pool roles, kv roles, router types."""
    own["modelSpec"]["properties"]["role"]["enum"] = topology["roles"]
    own["kvTransfer"]["properties"]["kvRole"]["enum"] = topology["kvRoles"]
    own["lmcacheConfig"]["properties"]["kvRole"]["enum"] = topology["kvRoles"]
    own["routerSpec"]["properties"]["type"]["enum"] = topology["routerTypes"]


def add_llmd_releases(llmd: dict[str, Any], table: dict[str, Any]) -> None:
    """routerSpec.llmd.version takes the llm-d router releases of the table (routerImages.llm-d)."""
    llmd["properties"]["version"]["enum"] = list(table["routerImages"]["llm-d"]["releases"])


def _definition(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A schema with its local $ref followed."""
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].removeprefix(LOCAL)]
    return node


def add_refused(schema: dict[str, Any], table: dict[str, Any]) -> None:
    """Each production-stack key pd-stack refuses, as a property that takes any value, so the
    chart's and validate's own message (PD019) explains it instead of "unknown key"."""
    for path, entry in table["keys"].items():
        if entry["status"] != "refused":
            continue
        *parents, key = path.split(".")
        node = schema
        for part in parents:
            node = _definition(schema, node["properties"][part.removesuffix("[]")])
            if part.endswith("[]"):
                node = _definition(schema, node["items"])
        if key in node["properties"]:
            raise SystemExit(f"{PRODUCTION_STACK.name}: {path} is refused but the schema has it")
        node["properties"][key] = {
            "description": f"production-stack's {key}, not supported by pd-stack: "
            + " ".join(entry["note"].split())
        }


def add_value_comments(schema: dict[str, Any], comments: dict[str, str]) -> None:
    """Each key that values.yaml documents (its `# --` comment, the one source of that text) gets
    the comment as its description here, for pdctl's messages and the values reference."""
    for path, text in comments.items():
        node: dict[str, Any] | None = schema
        for part in path.split("."):
            node = _definition(schema, node) if node else None
            node = (node or {}).get("properties", {}).get(part)
        if node is not None and text:
            node["description"] = text


def bound_integers(node: Any) -> None:
    """Every schema in `node` whose type takes an integer, bounded to +-SAFE_INTEGER in place."""
    if isinstance(node, dict):
        types = node.get("type")
        if types == "integer" or (isinstance(types, list) and "integer" in types):
            node["minimum"] = max(node.get("minimum", -SAFE_INTEGER), -SAFE_INTEGER)
            node["maximum"] = min(node.get("maximum", SAFE_INTEGER), SAFE_INTEGER)
        for value in node.values():
            bound_integers(value)
    elif isinstance(node, list):
        for item in node:
            bound_integers(item)


def build() -> dict[str, Any]:
    schema: dict[str, Any] = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    own = schema.setdefault("definitions", {})
    connectors = yaml.safe_load(CONNECTORS.read_text(encoding="utf-8"))
    add_connectors(own["kvTransfer"], connectors)
    add_llmd_releases(own["llmd"], connectors)
    add_topology(own, yaml.safe_load(TOPOLOGY.read_text(encoding="utf-8")))
    add_refused(schema, yaml.safe_load(PRODUCTION_STACK.read_text(encoding="utf-8")))
    add_value_comments(schema, value_comments(VALUES.read_text(encoding="utf-8")))
    clash = sorted(name for name in own if name.startswith(KUBERNETES_PREFIX))
    if clash:
        raise SystemExit(f"{SOURCE.name} defines Kubernetes names itself: {clash}")
    wanted = local_refs(schema) - set(own)
    own.update(kubernetes_definitions(wanted, kubernetes_source()))
    bound_integers(schema)
    return schema


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} is stale: run `make schema`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
