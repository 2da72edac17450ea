"""Request bodies in Kubernetes' protobuf encoding (``application/vnd.kubernetes.protobuf``), as
client-go's typed clients send them -- ``kubectl create namespace|deployment|job|cronjob``,
``kubectl run``, ``kubectl create job --from=cronjob/...``, the evictions of ``kubectl drain`` --
read into the JSON form the store keeps.

The wire format is the API server's (``k8s.io/apimachinery/pkg/runtime/serializer/protobuf``): the
magic ``k8s\\x00``, then a ``runtime.Unknown`` whose TypeMeta names the kind and whose raw bytes
are the object's message; field numbers and types come from ``protobuf_schema`` (generated from
upstream's ``generated.proto`` files). The well-known messages read as their JSON forms: Time
(RFC 3339), Quantity and IntOrString (their strings or numbers), RawExtension and FieldsV1 (the
JSON they carry), Duration (Go's duration string).

The encoding writes a scalar that is not a Go pointer even when it is the zero value; JSON omits
such fields. Decoded empty strings and zero numbers and booleans are dropped, except for the
fields whose zero means something (pointer fields such as ``parallelism: 0`` or
``automountServiceAccountToken: false``). A body with a field or a kind ksched cannot read is
refused (415) with what it could not read -- nothing is silently lost. Responses are JSON, which
these clients accept.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Any

from ksched.api.errors import BadRequest, UnsupportedMediaType
from ksched.apiserver.protobuf_schema import SCHEMA

__all__ = ["CONTENT_TYPE", "decode_object"]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
TIME = _META + "Time"
MICRO_TIME = _META + "MicroTime"
DURATION = _META + "Duration"
FIELDS_V1 = _META + "FieldsV1"
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"

# (apiVersion, kind) -> message.
KINDS = {
    ("v1", "Namespace"): "k8s.io.api.core.v1.Namespace",
    ("v1", "Pod"): "k8s.io.api.core.v1.Pod",
    ("apps/v1", "Deployment"): "k8s.io.api.apps.v1.Deployment",
    ("batch/v1", "Job"): "k8s.io.api.batch.v1.Job",
    ("batch/v1", "CronJob"): "k8s.io.api.batch.v1.CronJob",
    ("policy/v1", "Eviction"): "k8s.io.api.policy.v1.Eviction",
}

# Fields that are Go pointers: a zero value on the wire was set by the client and is kept.
_KEEP_ZERO = frozenset((
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "priority", "tolerationSeconds",
    "deletionGracePeriodSeconds", "parallelism", "completions", "backoffLimit", "backoffLimitPerIndex",
    "maxFailedIndexes", "ttlSecondsAfterFinished", "startingDeadlineSeconds", "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit", "runAsUser", "runAsGroup", "fsGroup", "defaultMode", "mode", "expirationSeconds",
    "automountServiceAccountToken", "enableServiceLinks", "hostUsers", "setHostnameAsFQDN",
    "shareProcessNamespace", "allowPrivilegeEscalation", "privileged", "readOnlyRootFilesystem", "runAsNonRoot",
    "suspend", "manualSelector", "controller", "blockOwnerDeletion", "optional", "gracePeriodSeconds",
    "orphanDependents", "replicas", "revisionHistoryLimit", "progressDeadlineSeconds", "collisionCount",
    "terminatingReplicas",
))


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = 0
    out = 0
    while True:
        if i >= len(buf):
            raise BadRequest("the protobuf body is truncated")
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
        shift += 7
        if shift > 70:
            raise BadRequest("the protobuf body has a malformed varint")


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in order: ints for varints and fixed, bytes otherwise."""
    out = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise BadRequest("the protobuf body is truncated")
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise BadRequest(f"the protobuf body has an unsupported wire type {wire}")
        out.append((num, wire, v))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _go_duration(ns: int) -> str:
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    s, rem = divmod(abs(ns), 1_000_000_000)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    frac = f"{rem / 1e9:.9f}"[1:].rstrip("0").rstrip(".") if rem else ""
    out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}{frac}s"
    return sign + out


def _special(message: str, raw: bytes) -> Any:
    fields = {num: v for num, _, v in _fields(raw)}
    if message in (TIME, MICRO_TIME):
        secs = _signed(fields.get(1, 0))
        nanos = fields.get(2, 0)
        d = datetime.fromtimestamp(secs, UTC)
        if message == MICRO_TIME:
            return d.replace(microsecond=nanos // 1000).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    if message == QUANTITY:
        return bytes(fields.get(1, b"")).decode()
    if message == INT_OR_STRING:
        return bytes(fields.get(3, b"")).decode() if fields.get(1, 0) == 1 else _signed(fields.get(2, 0))
    if message in (RAW_EXTENSION, FIELDS_V1):
        data = bytes(fields.get(1, b""))
        return json.loads(data) if data else {}
    if message == DURATION:
        return _go_duration(_signed(fields.get(1, 0)))
    raise AssertionError(message)


_SPECIAL = frozenset((TIME, MICRO_TIME, DURATION, FIELDS_V1, QUANTITY, INT_OR_STRING, RAW_EXTENSION))


def _scalar(typ: str, wire: int, v: Any, where: str) -> Any:
    if typ == "s":
        return bytes(v).decode()
    if typ == "y":
        return base64.b64encode(bytes(v)).decode()
    if typ == "b":
        return bool(v)
    if typ == "i":
        return _signed(v)
    if typ in ("d", "x"):
        return struct.unpack("<d", int(v).to_bytes(8, "little"))[0] if typ == "d" else v
    if typ in ("f", "w"):
        return struct.unpack("<f", int(v).to_bytes(4, "little"))[0] if typ == "f" else v
    raise UnsupportedMediaType(f"the protobuf body has a field of type {typ} at {where} that ksched cannot read")


def _packed(typ: str, raw: bytes) -> list[Any]:
    out = []
    i = 0
    while i < len(raw):
        v, i = _varint(raw, i)
        out.append(_scalar(typ, 0, v, ""))
    return out


def _decode(raw: bytes, message: str, where: str) -> Any:
    if message in _SPECIAL:
        return _special(message, raw)
    schema = SCHEMA.get(message)
    if schema is None:
        raise UnsupportedMediaType(f"the protobuf body holds a {message.rsplit('.', 1)[-1]} at {where}, which "
                                   "ksched cannot read; send the object as JSON (kubectl create -f)")
    out: dict[str, Any] = {}
    for num, wire, v in _fields(raw):
        field = schema.get(num)
        if field is None:
            raise UnsupportedMediaType(f"the protobuf body has field {num} of {message.rsplit('.', 1)[-1]} at "
                                       f"{where or 'the top'}, which ksched cannot read; send the object as JSON")
        name, typ, repeated = field
        path = (f"{where}.{name}" if where else name) if name else where
        if isinstance(typ, tuple):  # map<string, V>: entries {1: key, 2: value}
            entry = {n: ev for n, _, ev in _fields(bytes(v))}
            key = bytes(entry.get(1, b"")).decode()
            vt = typ[1]
            value: Any = (_scalar(vt, 0, entry.get(2, b"" if vt == "s" else 0), path)
                          if len(vt) == 1 else _decode(bytes(entry.get(2, b"")), vt, f"{path}[{key}]"))
            out.setdefault(name, {})[key] = value
            continue
        if len(typ) == 1:
            if repeated and wire == 2 and typ != "s" and typ != "y":
                out.setdefault(name, []).extend(_packed(typ, bytes(v)))
                continue
            value = _scalar(typ, wire, v, path)
        else:
            value = _decode(bytes(v), typ, path)
        if name == "":  # an embedded Go struct: its fields are the parent's in JSON
            out.update(value)
            continue
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return {k: v for k, v in out.items() if not _zero(k, v)}


def _zero(name: str, v: Any) -> bool:
    if name in _KEEP_ZERO:
        return False
    return v == "" or v is False or (v == 0 and not isinstance(v, bool)) or v == []


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object. Raises UnsupportedMediaType (415) for a kind
    or field ksched cannot read, BadRequest for a malformed body."""
    if not body.startswith(MAGIC):
        raise BadRequest("the protobuf body does not start with the Kubernetes magic number")
    unknown = {num: v for num, _, v in _fields(body[len(MAGIC):])}
    type_meta = {num: bytes(v).decode() for num, _, v in _fields(bytes(unknown.get(1, b"")))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise UnsupportedMediaType(f"ksched reads protobuf bodies of {', '.join(k for _, k in KINDS)} only, not "
                                   f'"{api_version}, Kind={kind}"; send the object as JSON (kubectl create -f)')
    obj = _decode(bytes(unknown.get(2, b"")), message, "")
    return {"apiVersion": api_version, "kind": kind, **obj}
