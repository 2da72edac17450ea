"""CustomResourceDefinition (apiextensions.k8s.io/v1) and the kinds it defines at run time
(``staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions``: types, validation,
defaults; the API server's naming and establishing controllers set the status at once).

A CRD becomes a :class:`CustomObject` subclass (:func:`custom_kind`) that a :class:`Scheme` serves:
objects of it are stored in the storage version, validated and defaulted against the
structural schema of the version they arrive in (``ksched.api.structural``).

Divergences: conversion webhooks are not called (every served version has the same fields:
``strategy: None``, whatever the CRD says); the scale subresource is not served;
``x-kubernetes-validations`` rules are not evaluated.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ksched.api.errors import FieldError, Path
from ksched.api.meta import KubeObject
from ksched.api.structural import Schema, SchemaError

__all__ = [
    "API_APPROVED_ANNOTATION",
    "CRD_CLEANUP_FINALIZER",
    "CustomObject",
    "CustomResourceDefinition",
    "crd_status",
    "custom_kind",
    "validate_crd",
]

API_APPROVED_ANNOTATION = "api-approved.kubernetes.io"
# The finalizer upstream puts on a CRD until its objects are deleted.
CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_SCOPES = ("Cluster", "Namespaced")


class CustomResourceDefinition(KubeObject):
    KIND: ClassVar[str] = "CustomResourceDefinition"
    API_VERSION: ClassVar[str] = "apiextensions.k8s.io/v1"
    PLURAL: ClassVar[str] = "customresourcedefinitions"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("crd", "crds")
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("categories", "group", "kind", "list_kind", "plural", "scope", "short_names", "singular",
                 "versions")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        names = spec.get("names") or {}
        self.group: str = spec.get("group") or ""
        self.kind: str = names.get("kind") or ""
        self.plural: str = names.get("plural") or ""
        self.singular: str = names.get("singular") or self.kind.lower()
        self.list_kind: str = names.get("listKind") or f"{self.kind}List"
        self.short_names: tuple[str, ...] = tuple(names.get("shortNames") or ())
        self.categories: tuple[str, ...] = tuple(names.get("categories") or ())
        self.scope: str = spec.get("scope") or ""
        self.versions: list[dict[str, Any]] = [v for v in spec.get("versions") or () if isinstance(v, dict)]

    @property
    def storage_version(self) -> str:
        for v in self.versions:
            if v.get("storage"):
                return str(v.get("name") or "")
        return ""

    @property
    def served_versions(self) -> tuple[str, ...]:
        return tuple(str(v.get("name")) for v in self.versions if v.get("served"))

    def condition(self, ctype: str) -> dict[str, Any] | None:
        for c in (self.raw.get("status") or {}).get("conditions") or ():
            if isinstance(c, dict) and c.get("type") == ctype:
                return c
        return None

    @property
    def established(self) -> bool:
        c = self.condition("Established")
        return c is not None and c.get("status") == "True"


class CustomObject(KubeObject):
    """An object of a kind some CustomResourceDefinition defines; its class (made by
    :func:`custom_kind`) carries the CRD's names, versions and schemas."""

    GROUP: ClassVar[str] = ""
    SINGULAR: ClassVar[str] = ""
    LIST_KIND: ClassVar[str] = ""
    CATEGORIES: ClassVar[tuple[str, ...]] = ()
    SERVED_VERSIONS: ClassVar[tuple[str, ...]] = ()
    STATUS_VERSIONS: ClassVar[frozenset[str]] = frozenset()
    SCHEMAS: ClassVar[dict[str, Schema | None]] = {}
    CRD: ClassVar[CustomResourceDefinition | None] = None
    # Changes whenever the definition does (uid and generation of the CRD).
    SCHEMA_KEY: ClassVar[tuple[str, int]] = ("", 0)

    __slots__ = ()

    @classmethod
    def schema(cls, version: str) -> Schema | None:
        return cls.SCHEMAS.get(version)

    @classmethod
    def openapi_schema(cls) -> dict[str, Any]:
        """The storage version's schema as the OpenAPI documents publish it."""
        return openapi_schema(cls.schema(cls.API_VERSION.rpartition("/")[2]))

    @classmethod
    def schema_view(cls, version: str) -> type:
        """A stand-in naming this kind at ``version`` with that version's schema (what field
        validation judges a request at that version by)."""
        schema = cls.schema(version)
        return type(cls.KIND, (), {"API_VERSION": f"{cls.GROUP}/{version}", "KIND": cls.KIND, "PLURAL": cls.PLURAL,
                                   "NAMESPACED": cls.NAMESPACED, "SCHEMA_KEY": (cls.SCHEMA_KEY, version),
                                   "openapi_schema": staticmethod(lambda: openapi_schema(schema))})


def openapi_schema(schema: Schema | None) -> dict[str, Any]:
    """A custom kind's schema for the OpenAPI documents: the CRD's, with the object's apiVersion,
    kind and metadata (any metadata; the API server checks it)."""
    out: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True} if schema is None \
        else dict(schema.raw)
    props = dict(out.get("properties") or {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if schema is not None or props:
        out["properties"] = props
    return out


def custom_kind(crd: CustomResourceDefinition) -> type[CustomObject]:
    """The class of the objects ``crd`` defines (the CRD must be valid)."""
    schemas: dict[str, Schema | None] = {}
    status_versions = set()
    for v in crd.versions:
        name = str(v.get("name") or "")
        s = (v.get("schema") or {}).get("openAPIV3Schema")
        try:
            schemas[name] = Schema(s) if isinstance(s, dict) else None
        except SchemaError:
            schemas[name] = None
        if isinstance((v.get("subresources") or {}).get("status"), dict):
            status_versions.add(name)
    attrs: dict[str, Any] = {
        "__slots__": (),
        "KIND": crd.kind,
        "KIND_KEY": crd.name,
        "API_VERSION": f"{crd.group}/{crd.storage_version}",
        "PLURAL": crd.plural,
        "NAMESPACED": crd.scope == "Namespaced",
        "SHORT_NAMES": crd.short_names,
        "GROUP": crd.group,
        "SINGULAR": crd.singular,
        "LIST_KIND": crd.list_kind,
        "CATEGORIES": crd.categories,
        "SERVED_VERSIONS": crd.served_versions,
        "STATUS_VERSIONS": frozenset(status_versions),
        # Served with a status subresource when its storage version has one.
        "STATUS_SUBRESOURCE": crd.storage_version in status_versions,
        "SCHEMAS": schemas,
        "CRD": crd,
        "SCHEMA_KEY": (crd.uid, crd.generation),
    }
    return type(crd.kind or "CustomObject", (CustomObject,), attrs)


def crd_status(crd: dict[str, Any], conflict: tuple[str, str] | None = None) -> dict[str, Any]:
    """The status the API server's naming and establishing controllers give a CRD:
    accepted names, NamesAccepted and Established conditions, stored versions. ``conflict``
    is (reason, message) when its names cannot be accepted (then it is not established)."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    kind = names.get("kind") or ""
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    old = crd.get("status") or {}
    stored = list(old.get("storedVersions") or ())
    for v in spec.get("versions") or ():
        if isinstance(v, dict) and v.get("storage") and v.get("name") not in stored:
            stored.append(v.get("name"))
    if conflict:
        conds = [{"type": "NamesAccepted", "status": "False", "reason": conflict[0], "message": conflict[1]},
                 {"type": "Established", "status": "False", "reason": "NotAccepted",
                  "message": "not all names are accepted"}]
        return {"acceptedNames": {"kind": "", "plural": ""}, "conditions": conds, "storedVersions": stored}
    conds = [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
              "message": "no conflicts found"},
             {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
              "message": "the initial names have been accepted"}]
    return {"acceptedNames": names, "conditions": conds, "storedVersions": stored}


# ---------------------------------------------------------------- validation


def _err(errs: list[FieldError], path: Path | str, msg: str, reason: str = "FieldValueInvalid") -> None:
    errs.append(FieldError(str(path), msg, reason))


def _dns_label(errs: list[FieldError], path: Path, v: Any, required: bool = True) -> None:
    if v in (None, ""):
        if required:
            _err(errs, path, "Required value", "FieldValueRequired")
        return
    if not isinstance(v, str) or len(v) > 63 or not _DNS1123_LABEL.match(v):
        _err(errs, path, f'Invalid value: "{v}": a lowercase RFC 1123 label must consist of lower case '
                         "alphanumeric characters or '-', and must start and end with an alphanumeric character")


def validate_crd(raw: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    """Every problem with a CustomResourceDefinition manifest (``old``: the stored one, on update)."""
    errs: list[FieldError] = []
    md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    spec = raw.get("spec")
    sp = Path("spec")
    if not isinstance(spec, dict):
        _err(errs, sp, "Required value", "FieldValueRequired")
        return errs
    group = spec.get("group")
    if not group:
        _err(errs, sp.child("group"), "Required value", "FieldValueRequired")
    elif not isinstance(group, str) or not _DNS1123_SUBDOMAIN.match(group) or len(group) > 253:
        _err(errs, sp.child("group"), f'Invalid value: "{group}": a lowercase RFC 1123 subdomain must consist of '
                                      "lower case alphanumeric characters, '-' or '.', and must start and end with "
                                      "an alphanumeric character")
    elif "." not in group:
        _err(errs, sp.child("group"), f'Invalid value: "{group}": should be a domain with at least one dot')
    elif (group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))) and \
            not (md.get("annotations") or {}).get(API_APPROVED_ANNOTATION):
        _err(errs, Path("metadata.annotations").key(API_APPROVED_ANNOTATION),
             'Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see '
             "https://github.com/kubernetes/enhancements/pull/1111", "FieldValueRequired")
    names = spec.get("names")
    np = sp.child("names")
    if not isinstance(names, dict):
        _err(errs, np, "Required value", "FieldValueRequired")
        names = {}
    plural = names.get("plural")
    _dns_label(errs, np.child("plural"), plural)
    _dns_label(errs, np.child("singular"), names.get("singular"), required=False)
    kind = names.get("kind")
    if not kind:
        _err(errs, np.child("kind"), "Required value", "FieldValueRequired")
    elif not isinstance(kind, str) or not _DNS1035_LABEL.match(kind.lower()):
        _err(errs, np.child("kind"), f'Invalid value: "{kind}": may have mixed case, but should otherwise match: '
                                     "[a-z]([-a-z0-9]*[a-z0-9])?")
    list_kind = names.get("listKind")
    if list_kind is not None and list_kind == kind:
        _err(errs, np.child("listKind"), f'Invalid value: "{list_kind}": kind and listKind may not be the same')
    for i, s in enumerate(names.get("shortNames") or ()):
        _dns_label(errs, np.child("shortNames").index(i), s)
    for i, c in enumerate(names.get("categories") or ()):
        _dns_label(errs, np.child("categories").index(i), c)
    if plural and group and md.get("name") != f"{plural}.{group}":
        _err(errs, Path("metadata.name"), f'Invalid value: "{md.get("name")}": must be '
                                          'spec.names.plural+"."+spec.group')
    scope = spec.get("scope")
    if scope not in _SCOPES:
        if not scope:
            _err(errs, sp.child("scope"), "Required value", "FieldValueRequired")
        else:
            _err(errs, sp.child("scope"), f'Unsupported value: "{scope}": supported values: "Cluster", '
                                          '"Namespaced"', "FieldValueNotSupported")
    _validate_versions(errs, spec, sp)
    conv = spec.get("conversion")
    if isinstance(conv, dict) and conv.get("strategy") not in (None, "None", "Webhook"):
        _err(errs, sp.child("conversion").child("strategy"), f'Unsupported value: "{conv.get("strategy")}": '
                                                             'supported values: "None", "Webhook"',
             "FieldValueNotSupported")
    if old is not None:
        ospec = old.get("spec") or {}
        for f in ("scope",):
            if ospec.get(f) != spec.get(f):
                _err(errs, sp.child(f), f'Invalid value: "{spec.get(f)}": field is immutable')
        stored = (old.get("status") or {}).get("storedVersions") or ()
        names_now = {v.get("name") for v in spec.get("versions") or () if isinstance(v, dict)}
        for s in stored:
            if s not in names_now:
                _err(errs, Path("status.storedVersions"), f"Invalid value: {list(stored)!r}: must have the same "
                                                          f"version {s} in spec.versions[*].name")
    return errs


def _validate_versions(errs: list[FieldError], spec: dict[str, Any], sp: Path) -> None:
    vp = sp.child("versions")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        _err(errs, vp, "Invalid value: null: must have exactly one version marked as storage version")
        return
    storage = 0
    seen: set[str] = set()
    for i, v in enumerate(versions):
        p = vp.index(i)
        if not isinstance(v, dict):
            _err(errs, p, "Invalid value: must be an object")
            continue
        name = v.get("name")
        if not name:
            _err(errs, p.child("name"), "Required value", "FieldValueRequired")
        elif not isinstance(name, str) or not _DNS1035_LABEL.match(name) or len(name) > 63:
            _err(errs, p.child("name"), f'Invalid value: "{name}": a DNS-1035 label must consist of lower case '
                                        "alphanumeric characters or '-', start with an alphabetic character, and "
                                        "end with an alphanumeric character")
        elif name in seen:
            _err(errs, p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
        else:
            seen.add(name)
        if v.get("storage"):
            storage += 1
        for f in ("served", "storage"):
            if not isinstance(v.get(f), bool):
                _err(errs, p.child(f), "Required value", "FieldValueRequired")
        schema = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), dict) else None
        sch = p.child("schema").child("openAPIV3Schema")
        if not isinstance(schema, dict):
            _err(errs, sch, "Required value: schemas are required", "FieldValueRequired")
        else:
            try:
                errs.extend(Schema(schema).check(sch))
            except SchemaError as e:
                errs.extend(FieldError(f"{sch}.{fe.path}" if fe.path else str(sch), fe.message, fe.reason)
                            for fe in e.errors)
        sub = v.get("subresources")
        if sub is not None and not isinstance(sub, dict):
            _err(errs, p.child("subresources"), "Invalid value: must be an object")
    if storage != 1:
        _err(errs, vp, f"Invalid value: {_versions_repr(versions)}: must have exactly one version marked as "
                       "storage version")
    if not any(isinstance(v, dict) and v.get("served") for v in versions):
        _err(errs, vp, f"Invalid value: {_versions_repr(versions)}: must have at least one version marked as served")


def _versions_repr(versions: list[Any]) -> str:
    return "[" + ", ".join(str(v.get("name")) for v in versions if isinstance(v, dict)) + "]"
