"""Part of the Kubernetes API server TEST DOUBLE (tests/doubles/kube_api.py): reads the
Kubernetes protobuf encoding of the kinds helm writes with it.

helm's release storage uses client-go's typed clientset, which sends Secrets as
`application/vnd.kubernetes.protobuf` (accepting JSON back), and deletes them with protobuf
DeleteOptions. This decodes that envelope ("k8s\\0" + runtime.Unknown), a core/v1 Secret with the
ObjectMeta fields helm sets and DeleteOptions' propagation policy, field
numbers from k8s.io/api/core/v1/generated.proto and apimachinery's meta/v1/generated.proto.
"""

from __future__ import annotations

import base64
import time
from typing import Any

MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, Any]]

TIME: Schema = {1: ("seconds", "int"), 2: ("nanos", "int")}
OWNER_REFERENCE: Schema = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", TIME),
    11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")),
    13: ("ownerReferences", ("repeated", OWNER_REFERENCE)),
    14: ("finalizers", ("repeated", "string")),
}
SECRET: Schema = {
    1: ("metadata", OBJECT_META),
    2: ("data", ("map", "bytes")),
    3: ("type", "string"),
    4: ("stringData", ("map", "string")),
    5: ("immutable", "bool"),
}
TYPE_META: Schema = {1: ("apiVersion", "string"), 2: ("kind", "string")}
UNKNOWN: Schema = {1: ("typeMeta", TYPE_META), 2: ("raw", "bytes")}
DELETE_OPTIONS: Schema = {1: ("gracePeriodSeconds", "int"), 4: ("propagationPolicy", "string")}
KINDS: dict[str, Schema] = {"Secret": SECRET, "DeleteOptions": DELETE_OPTIONS}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> list[tuple[int, Any]]:
    out, pos = [], 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _scalar(kind: Any, value: Any) -> Any:
    if kind == "string":
        return value.decode()
    if kind == "bytes":
        return bytes(value)
    if kind == "int":
        return int(value)
    if kind == "bool":
        return bool(value)
    return decode(value, kind)


def decode(data: bytes, schema: Schema) -> dict[str, Any]:
    """A message as a dict, with the names of `schema`; unknown fields are skipped."""
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = dict(_fields(value))
            result.setdefault(name, {})[entry.get(1, b"").decode()] = _scalar(
                kind[1], entry.get(2, b"")
            )
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            result.setdefault(name, []).append(_scalar(kind[1], value))
        else:
            result[name] = _scalar(kind, value)
    return result


def to_json_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object the API would have received."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    envelope = decode(body[len(MAGIC) :], UNKNOWN)
    type_meta = envelope.get("typeMeta", {})
    kind = type_meta.get("kind", "")
    if kind not in KINDS:
        raise ValueError(f"the double cannot decode protobuf {kind or 'objects'}")
    obj = decode(envelope.get("raw", b""), KINDS[kind])
    if kind == "DeleteOptions":
        return obj
    meta = obj.setdefault("metadata", {})
    stamp = meta.pop("creationTimestamp", None)
    if stamp:
        meta["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp.get("seconds", 0))
        )
    if "data" in obj:
        obj["data"] = {k: base64.b64encode(v).decode() for k, v in obj["data"].items()}
    return {"apiVersion": type_meta.get("apiVersion", "v1"), "kind": kind, **obj}
