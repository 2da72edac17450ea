"""Who the client is and what it may do: ``SelfSubjectReview`` (authentication.k8s.io/v1,
``kubectl auth whoami``), ``SelfSubjectAccessReview`` and ``SelfSubjectRulesReview``
(authorization.k8s.io/v1, ``kubectl auth can-i [--list]``), as kube-apiserver's
``pkg/registry/authentication/selfsubjectreview`` and ``pkg/registry/authorization/``.

ksched serves one user: whoever holds the bearer token (or, on loopback without a token, any
client). That user is in ``system:masters``, so every access review is allowed, as RBAC allows
that group everything.

kubectl posts these reviews as protobuf (``application/vnd.kubernetes.protobuf``: the ``k8s\\0``
magic, a ``runtime.Unknown`` envelope, the object): :func:`decode_protobuf_review` reads the
fields of the spec (numbers from ``k8s.io/api/authorization/v1/generated.proto``); answers are JSON,
which kubectl also accepts.

Known divergences: no RBAC objects are consulted; the reviews are not stored (as upstream: they
are create-only virtual resources)."""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.errors import BadRequest, FieldError, Invalid

__all__ = ["GROUPS", "PROTOBUF", "RESOURCES", "USERNAME", "create_review", "decode_protobuf_review",
           "review_resource"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
# Message fields: number -> (JSON name, nested message fields or None for a string).
_RESOURCE_ATTRIBUTES: dict[int, tuple[str, Any]] = {
    1: ("namespace", None), 2: ("verb", None), 3: ("group", None), 4: ("version", None), 5: ("resource", None),
    6: ("subresource", None), 7: ("name", None)}
_NON_RESOURCE_ATTRIBUTES: dict[int, tuple[str, Any]] = {1: ("path", None), 2: ("verb", None)}
_SPECS: dict[str, dict[int, tuple[str, Any]]] = {
    "SelfSubjectAccessReview": {1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                                2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES)},
    "SelfSubjectRulesReview": {1: ("namespace", None)},
    "SelfSubjectReview": {},
}

USERNAME = "ksched-admin"
GROUPS = ["system:masters", "system:authenticated"]

# (group, version, plural) -> kind; all are create-only and cluster-scoped.
RESOURCES: dict[tuple[str, str, str], str] = {
    ("authentication.k8s.io", "v1", "selfsubjectreviews"): "SelfSubjectReview",
    ("authorization.k8s.io", "v1", "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    ("authorization.k8s.io", "v1", "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
}


def review_resource(group: str, version: str, plural: str) -> str | None:
    """The kind served at that path, or None."""
    return RESOURCES.get((group, version, plural))


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's fields (varints as ints, length-delimited as bytes); others are skipped."""
    out: list[tuple[int, int | bytes]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        n = shift = 0
        while True:
            if i >= len(buf):
                raise BadRequest("the protobuf request body is truncated")
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 2:
            n = varint()
            if i + n > len(buf):
                raise BadRequest("the protobuf request body is truncated")
            out.append((field, buf[i:i + n]))
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise BadRequest(f"the protobuf request body has an unsupported wire type {wire}")
    return out


def _message(buf: bytes, layout: dict[int, tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, value in _fields(buf):
        if field in layout and isinstance(value, bytes):
            name, nested = layout[field]
            out[name] = _message(value, nested) if nested is not None else value.decode(errors="replace")
    return out


def decode_protobuf_review(kind: str, raw: bytes) -> dict[str, Any]:
    """The JSON form of a review kubectl sent as protobuf (its spec; metadata is not read)."""
    if not raw.startswith(_MAGIC):
        raise BadRequest("the protobuf request body does not start with the Kubernetes magic number")
    unknown = dict(_fields(raw[len(_MAGIC):]))
    obj = unknown.get(2, b"")
    if not isinstance(obj, bytes):
        raise BadRequest("the protobuf request body has no object")
    spec = next((v for f, v in _fields(obj) if f == 2 and isinstance(v, bytes)), b"")
    return {"spec": _message(spec, _SPECS[kind])}


def _user_info() -> dict[str, Any]:
    return {"username": USERNAME, "groups": list(GROUPS)}


def create_review(group: str, version: str, kind: str, body: Any) -> dict[str, Any]:
    """The answered review for a POSTed one."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadRequest(f"a {kind} must be a JSON object")
    if body.get("kind") not in (None, kind):
        raise BadRequest(f'the kind "{body["kind"]}" of the object does not match "{kind}"')
    av = f"{group}/{version}"
    if body.get("apiVersion") not in (None, av):
        raise BadRequest(f'the API version "{body["apiVersion"]}" of the object does not match "{av}"')
    spec = body.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise BadRequest("spec must be an object")
    out: dict[str, Any] = {"kind": kind, "apiVersion": av, "metadata": {"creationTimestamp": None}}
    if kind == "SelfSubjectReview":
        out["status"] = {"userInfo": _user_info()}
        return out
    spec = copy.deepcopy(spec or {})
    if kind == "SelfSubjectAccessReview":
        has_res = spec.get("resourceAttributes") is not None
        has_non = spec.get("nonResourceAttributes") is not None
        if has_res == has_non:
            raise Invalid.of(f"{kind}.{group}", "", [FieldError(
                "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be "
                                           "specified")], group)
        out["spec"] = spec
        out["status"] = {"allowed": True}
        return out
    # SelfSubjectRulesReview
    out["spec"] = spec
    out["status"] = {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    }
    return out
