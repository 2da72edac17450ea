"""The Swagger 2.0 document in protocol-buffer form (gnostic's ``openapi.v2.Document``), as
kube-apiserver serves ``/openapi/v2`` to ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``.

kubectl asks for it in that form alone (``discovery.OpenAPISchema``): it validates client-side
with it whenever the v3 documents cannot say that the server validates (a ``kind: List``
manifest, always). The encoding is derived from the JSON document ksched builds
(``ksched.apiserver.openapi``), field numbers as in gnostic's ``openapiv2/OpenAPIv2.proto``.

Known divergences: only the parts of a document ksched writes are encoded (info, paths with
their operations, parameters and responses, definitions); security requirements and other
sections a client does not read are left out. Vendor extensions carry their value as YAML text
(JSON), as gnostic's ``Any.yaml``."""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["PROTOBUF_CONTENT_TYPE", "PROTOBUF_MIME", "encode_document"]

# What clients ask for, and what the answer is labelled ('@' is no valid media-type character).
PROTOBUF_MIME = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_VARINT, _I64, _LEN = 0, 1, 2


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class _Msg:
    """A message under construction: fields appended in order (proto3, no defaults written)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def _key(self, field: int, wire: int) -> None:
        self.buf += _varint(field << 3 | wire)

    def string(self, field: int, v: str | None) -> _Msg:
        if v:
            data = v.encode()
            self._key(field, _LEN)
            self.buf += _varint(len(data)) + data
        return self

    def strings(self, field: int, vs: list[str] | None) -> _Msg:
        for v in vs or ():
            data = str(v).encode()
            self._key(field, _LEN)
            self.buf += _varint(len(data)) + data
        return self

    def boolean(self, field: int, v: bool | None) -> _Msg:
        if v:
            self._key(field, _VARINT)
            self.buf += b"\x01"
        return self

    def int64(self, field: int, v: int | None) -> _Msg:
        if v:
            self._key(field, _VARINT)
            self.buf += _varint(int(v))
        return self

    def double(self, field: int, v: float | None) -> _Msg:
        if v:
            self._key(field, _I64)
            self.buf += struct.pack("<d", float(v))
        return self

    def message(self, field: int, m: _Msg | None, *, always: bool = False) -> _Msg:
        if m is not None and (m.buf or always):
            self._key(field, _LEN)
            self.buf += _varint(len(m.buf)) + m.buf
        return self


def _any(value: Any) -> _Msg:
    return _Msg().string(2, json.dumps(value, separators=(",", ":")))  # Any.yaml


def _extensions(msg: _Msg, field: int, obj: dict[str, Any]) -> None:
    for k, v in obj.items():
        if k.startswith("x-"):
            msg.message(field, _Msg().string(1, k).message(2, _any(v), always=True), always=True)


def _schema(s: dict[str, Any]) -> _Msg:
    m = _Msg()
    m.string(1, s.get("$ref"))
    m.string(2, s.get("format"))
    m.string(3, s.get("title"))
    m.string(4, s.get("description"))
    if "default" in s:
        m.message(5, _any(s["default"]), always=True)
    m.double(6, s.get("multipleOf"))
    m.double(7, s.get("maximum"))
    m.boolean(8, s.get("exclusiveMaximum"))
    m.double(9, s.get("minimum"))
    m.boolean(10, s.get("exclusiveMinimum"))
    m.int64(11, s.get("maxLength"))
    m.int64(12, s.get("minLength"))
    m.string(13, s.get("pattern"))
    m.int64(14, s.get("maxItems"))
    m.int64(15, s.get("minItems"))
    m.boolean(16, s.get("uniqueItems"))
    m.strings(19, s.get("required"))
    for e in s.get("enum") or ():
        m.message(20, _any(e), always=True)
    ap = s.get("additionalProperties")
    if isinstance(ap, dict):
        m.message(21, _Msg().message(1, _schema(ap), always=True), always=True)
    elif isinstance(ap, bool):
        m.message(21, _Msg().boolean(2, ap), always=True)
    t = s.get("type")
    if t:
        m.message(22, _Msg().strings(1, t if isinstance(t, list) else [t]))
    items = s.get("items")
    if isinstance(items, dict):
        m.message(23, _Msg().message(1, _schema(items), always=True), always=True)
    for sub in s.get("allOf") or ():
        m.message(24, _schema(sub), always=True)
    props = s.get("properties")
    if isinstance(props, dict):
        pm = _Msg()
        for name, ps in props.items():
            pm.message(1, _Msg().string(1, name).message(2, _schema(ps), always=True), always=True)
        m.message(25, pm, always=True)
    _extensions(m, 31, s)
    return m


def _parameter(p: dict[str, Any]) -> _Msg:
    if "$ref" in p:
        return _Msg().message(2, _Msg().string(1, p["$ref"]), always=True)
    if p.get("in") == "body":
        body = (_Msg().string(1, p.get("description")).string(2, p.get("name")).string(3, "body")
                .boolean(4, p.get("required")).message(5, _schema(p.get("schema") or {}), always=True))
        _extensions(body, 6, p)
        return _Msg().message(1, _Msg().message(1, body, always=True), always=True)
    where = p.get("in")
    sub = _Msg().boolean(1, p.get("required")).string(2, where).string(3, p.get("description")).string(4, p.get("name"))
    if where == "path":
        sub.string(5, p.get("type")).string(6, p.get("format")).boolean(19, p.get("uniqueItems"))
        _extensions(sub, 22, p)
        which = 4
    elif where == "header":
        sub.string(5, p.get("type")).string(6, p.get("format")).boolean(19, p.get("uniqueItems"))
        _extensions(sub, 22, p)
        which = 1
    else:  # query (formData shares its layout)
        sub.string(6, p.get("type")).string(7, p.get("format")).boolean(20, p.get("uniqueItems"))
        _extensions(sub, 23, p)
        which = 2 if where == "formData" else 3
    non_body = _Msg().message(which, sub, always=True)
    return _Msg().message(1, _Msg().message(2, non_body, always=True), always=True)


def _operation(op: dict[str, Any]) -> _Msg:
    m = _Msg().strings(1, op.get("tags")).string(2, op.get("summary")).string(3, op.get("description"))
    m.string(5, op.get("operationId")).strings(6, op.get("produces")).strings(7, op.get("consumes"))
    for p in op.get("parameters") or ():
        m.message(8, _parameter(p), always=True)
    responses = _Msg()
    for code, r in (op.get("responses") or {}).items():
        resp = _Msg().string(1, r.get("description"))
        if "schema" in r:
            resp.message(2, _Msg().message(1, _schema(r["schema"]), always=True), always=True)
        value = _Msg().message(1, resp, always=True)
        responses.message(1, _Msg().string(1, code).message(2, value, always=True), always=True)
    m.message(9, responses, always=True)
    m.strings(10, op.get("schemes"))
    m.boolean(11, op.get("deprecated"))
    _extensions(m, 13, op)
    return m


_PATH_OPS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def encode_document(doc: dict[str, Any]) -> bytes:
    """gnostic's ``openapi.v2.Document`` for a Swagger 2.0 document."""
    m = _Msg().string(1, doc.get("swagger"))
    info = doc.get("info") or {}
    m.message(2, _Msg().string(1, info.get("title")).string(2, info.get("version"))
              .string(3, info.get("description")), always=True)
    m.string(3, doc.get("host")).string(4, doc.get("basePath"))
    m.strings(5, doc.get("schemes")).strings(6, doc.get("consumes")).strings(7, doc.get("produces"))
    paths = _Msg()
    for path, item in (doc.get("paths") or {}).items():
        pi = _Msg().string(1, item.get("$ref"))
        for verb, field in _PATH_OPS.items():
            if verb in item:
                pi.message(field, _operation(item[verb]), always=True)
        for p in item.get("parameters") or ():
            pi.message(9, _parameter(p), always=True)
        _extensions(pi, 10, item)
        paths.message(2, _Msg().string(1, path).message(2, pi, always=True), always=True)
    m.message(8, paths, always=True)
    defs = _Msg()
    for name, s in (doc.get("definitions") or {}).items():
        defs.message(1, _Msg().string(1, name).message(2, _schema(s), always=True), always=True)
    m.message(9, defs, always=True)
    _extensions(m, 16, doc)
    return bytes(m.buf)
