"""Structural OpenAPI v3 schemas of custom resources, as the apiextensions API server applies them
(``staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema``: structural, pruning,
defaulting; value validation as kube-openapi's ``validate`` with Kubernetes' field errors):

* :meth:`Schema.check` -- the schema itself is structural (a CRD is refused otherwise);
* :meth:`Schema.prune` -- fields the schema does not specify are dropped (unless
  ``x-kubernetes-preserve-unknown-fields``), and nulls where the schema is not ``nullable``;
* :meth:`Schema.default` -- ``default:`` values for absent fields;
* :meth:`Schema.validate` -- types, ``required``, ``enum``, ``format``, bounds, patterns, list
  types and the value-validation combinators (``allOf``, ``anyOf``, ``oneOf``, ``not``).

Divergences: ``x-kubernetes-validations`` (CEL rules) are accepted and not evaluated; formats
beyond the common ones (``int32``, ``int64``, ``float``, ``double``, ``byte``, ``date``,
``date-time``, ``duration``, ``uuid``, ``email``, ``hostname``, ``ipv4``, ``ipv6``, ``cidr``,
``mac``, ``uri``) are accepted unchecked, as unknown formats are upstream.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import json
import re
from datetime import date, datetime
from typing import Any

from ksched.api.errors import FieldError, Path

__all__ = ["Schema", "SchemaError"]

_TYPES = ("object", "array", "string", "integer", "number", "boolean")
_ABSENT = object()
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}"
                       r"[A-Za-z0-9])?)*$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S*$")


class SchemaError(ValueError):
    """A schema that cannot be used (not structural); ``errors`` say where."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def _type_of(v: Any) -> str:
    """The JSON type name of a value, as upstream's messages print it."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, int | float) and not isinstance(v, bool)
    return True


def _show(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    return str(v)


def _number(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _format_ok(fmt: str, v: Any) -> bool:
    if not isinstance(v, str):
        return True
    try:
        if fmt == "byte":
            base64.b64decode(v, validate=True)
        elif fmt == "date":
            date.fromisoformat(v)
        elif fmt == "date-time":
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        elif fmt == "duration":
            return bool(_DURATION.match(v))
        elif fmt == "uuid" or fmt.startswith("uuid"):
            return bool(_UUID.match(v))
        elif fmt == "email":
            return bool(_EMAIL.match(v))
        elif fmt == "hostname":
            return bool(_HOSTNAME.match(v))
        elif fmt == "ipv4":
            ipaddress.IPv4Address(v)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(v)
        elif fmt == "cidr":
            ipaddress.ip_network(v, strict=False)
        elif fmt == "mac":
            return bool(_MAC.match(v))
        elif fmt == "uri":
            return bool(_URI.match(v))
    except (ValueError, binascii.Error):
        return False
    return True


class Schema:
    """One node of a structural schema (``openAPIV3Schema`` or any schema inside it)."""

    __slots__ = ("additional", "all_of", "any_of", "default", "embedded", "enum", "exclusive_maximum",
                 "exclusive_minimum", "format", "int_or_string", "items", "list_map_keys", "list_type",
                 "max_items", "max_length", "max_properties", "maximum", "min_items", "min_length",
                 "min_properties", "minimum", "multiple_of", "not_", "nullable", "one_of", "pattern",
                 "preserve_unknown", "properties", "raw", "required", "type", "unique_items")

    def __init__(self, d: dict[str, Any]) -> None:
        if not isinstance(d, dict):
            raise SchemaError([FieldError("", "must be an object")])
        self.raw = d
        self.type: str = d.get("type") or ""
        self.format: str = d.get("format") or ""
        props = d.get("properties") or {}
        self.properties: dict[str, Schema] = {k: Schema(v) for k, v in props.items()} \
            if isinstance(props, dict) else {}
        items = d.get("items")
        self.items: Schema | None = Schema(items) if isinstance(items, dict) else None
        ap = d.get("additionalProperties")
        self.additional: Schema | bool | None = Schema(ap) if isinstance(ap, dict) else ap \
            if isinstance(ap, bool) else None
        self.required: tuple[str, ...] = tuple(d.get("required") or ())
        self.enum: list[Any] | None = d.get("enum") if isinstance(d.get("enum"), list) else None
        self.nullable = bool(d.get("nullable", False))
        self.default: Any = d.get("default", _ABSENT)
        self.preserve_unknown = bool(d.get("x-kubernetes-preserve-unknown-fields", False))
        self.int_or_string = bool(d.get("x-kubernetes-int-or-string", False))
        self.embedded = bool(d.get("x-kubernetes-embedded-resource", False))
        self.list_type: str = d.get("x-kubernetes-list-type") or ""
        self.list_map_keys: tuple[str, ...] = tuple(d.get("x-kubernetes-list-map-keys") or ())
        self.maximum = d.get("maximum")
        self.minimum = d.get("minimum")
        self.exclusive_maximum = bool(d.get("exclusiveMaximum", False))
        self.exclusive_minimum = bool(d.get("exclusiveMinimum", False))
        self.multiple_of = d.get("multipleOf")
        self.max_length = d.get("maxLength")
        self.min_length = d.get("minLength")
        pat = d.get("pattern")
        try:
            self.pattern: re.Pattern[str] | None = re.compile(pat) if isinstance(pat, str) else None
        except re.error as e:
            raise SchemaError([FieldError("pattern", f"Invalid value: {_show(pat)}: {e}")]) from e
        self.max_items = d.get("maxItems")
        self.min_items = d.get("minItems")
        self.unique_items = bool(d.get("uniqueItems", False))
        self.max_properties = d.get("maxProperties")
        self.min_properties = d.get("minProperties")
        self.all_of = [Schema(s) for s in d.get("allOf") or () if isinstance(s, dict)]
        self.any_of = [Schema(s) for s in d.get("anyOf") or () if isinstance(s, dict)]
        self.one_of = [Schema(s) for s in d.get("oneOf") or () if isinstance(s, dict)]
        self.not_ = Schema(d["not"]) if isinstance(d.get("not"), dict) else None

    # ------------------------------------------------------------ structural check

    def check(self, path: Path, root: bool = True) -> list[FieldError]:
        """Why this schema is not structural (empty when it is); ``path`` names it in the CRD."""
        errs: list[FieldError] = []
        self._check(path, root, errs)
        if not errs and self.default is not _ABSENT and not root:
            errs.extend(self._check_default(path))
        return errs

    def _check(self, path: Path, root: bool, errs: list[FieldError]) -> None:
        if self.type and self.type not in _TYPES:
            errs.append(FieldError(str(path.child("type")), f"Unsupported value: {_show(self.type)}: supported "
                                   f"values: {', '.join(json.dumps(t) for t in _TYPES)}", "FieldValueNotSupported"))
        if root and self.type != "object":
            errs.append(FieldError(str(path.child("type")), "Invalid value: " + _show(self.type)
                                   + ": must be object at the root", "FieldValueInvalid"))
        if not self.type and not (self.int_or_string or self.preserve_unknown):
            errs.append(FieldError(str(path.child("type")), "Required value: must not be empty for specified "
                                   "object fields", "FieldValueRequired"))
        if self.type == "array" and self.items is None:
            errs.append(FieldError(str(path.child("items")), "Required value: must be specified",
                                   "FieldValueRequired"))
        if self.properties and isinstance(self.additional, Schema):
            errs.append(FieldError(str(path.child("additionalProperties")), "Forbidden: additionalProperties and "
                                   "properties are mutual exclusive", "FieldValueForbidden"))
        if root and "metadata" in self.properties:
            md = self.properties["metadata"]
            extra = set(md.raw) - {"type", "properties", "description"}
            extra_props = set(md.properties) - {"name", "generateName"}
            if extra or extra_props:
                errs.append(FieldError(str(path.child("properties").key("metadata")), "Forbidden: must not "
                                       "specify anything other than name and generateName, but metadata is "
                                       "implicitly specified", "FieldValueForbidden"))
        for name, sub in self.properties.items():
            sub._check(path.child("properties").key(name), False, errs)
            if sub.default is not _ABSENT:
                errs.extend(sub._check_default(path.child("properties").key(name)))
        if self.items is not None:
            self.items._check(path.child("items"), False, errs)
            if self.items.default is not _ABSENT:
                errs.extend(self.items._check_default(path.child("items")))
        if isinstance(self.additional, Schema):
            self.additional._check(path.child("additionalProperties"), False, errs)

    def _check_default(self, path: Path) -> list[FieldError]:
        """A default must be valid against its own schema once pruned and defaulted."""
        value = copy.deepcopy(self.default)
        pruned = self.prune(value)
        out: list[FieldError] = []
        if pruned:
            out.append(FieldError(str(path.child("default")), f"Invalid value: {_show(self.default)}: must not "
                                  f"have unknown fields: {', '.join(pruned)}"))
        self.default_in(value)
        for e in self.validate(value, Path("")):
            out.append(FieldError(str(path.child("default")) + (f".{e.path}" if e.path else ""), e.message,
                                  e.reason))
        return out

    # ------------------------------------------------------------ pruning

    def prune(self, value: Any, path: str = "", root: bool = False) -> list[str]:
        """Drop unknown fields and non-nullable nulls from ``value`` in place; the paths dropped."""
        dropped: list[str] = []
        self._prune(value, path, root, dropped)
        return dropped

    def _prune(self, value: Any, path: str, root: bool, dropped: list[str]) -> None:
        if isinstance(value, dict):
            keep_meta = root or self.embedded
            for k in list(value):
                sub_path = f"{path}.{k}" if path else k
                if keep_meta and k in ("apiVersion", "kind", "metadata"):
                    if k == "metadata" and self.embedded and isinstance(value[k], dict):
                        continue
                    continue
                sub = self.properties.get(k)
                if sub is None and isinstance(self.additional, Schema):
                    sub = self.additional
                if sub is None:
                    if self.preserve_unknown or self.additional is True:
                        continue
                    del value[k]
                    dropped.append(sub_path)
                    continue
                if value[k] is None and not sub.nullable:
                    del value[k]
                    continue
                sub._prune(value[k], sub_path, False, dropped)
        elif isinstance(value, list) and self.items is not None:
            for i, it in enumerate(value):
                self.items._prune(it, f"{path}[{i}]", False, dropped)

    # ------------------------------------------------------------ defaulting

    def default_in(self, value: Any) -> None:
        """Set ``default:`` values of absent fields, in place (arrays' items and maps' values too)."""
        if isinstance(value, dict):
            for k, sub in self.properties.items():
                if k not in value and sub.default is not _ABSENT:
                    value[k] = copy.deepcopy(sub.default)
            for k, v in value.items():
                sub = self.properties.get(k)
                if sub is None and isinstance(self.additional, Schema):
                    sub = self.additional
                if sub is not None:
                    sub.default_in(v)
        elif isinstance(value, list) and self.items is not None:
            for it in value:
                self.items.default_in(it)

    # ------------------------------------------------------------ validation

    def validate(self, value: Any, path: Path, root: bool = False) -> list[FieldError]:
        errs: list[FieldError] = []
        self._validate(value, path, root, errs)
        return errs

    def _invalid(self, errs: list[FieldError], path: Path, value: Any, msg: str) -> None:
        errs.append(FieldError(str(path), f"Invalid value: {_show(value)}: {msg}"))

    def _validate(self, value: Any, path: Path, root: bool, errs: list[FieldError]) -> None:
        p = str(path)
        where = f"{p} in body" if p else "body"
        if value is None:
            if not self.nullable and self.type:
                errs.append(FieldError(p, f'Invalid value: "null": {where} must be of type {self.type}: "null"'))
            return
        if self.int_or_string:
            if not (_is_type(value, "integer") or isinstance(value, str)):
                t = _type_of(value)
                errs.append(FieldError(p, f'Invalid value: "{t}": {where} must be of type integer,string: "{t}"'))
                return
        elif self.type and not _is_type(value, self.type):
            t = _type_of(value)
            errs.append(FieldError(p, f'Invalid value: "{t}": {where} must be of type {self.type}: "{t}"'))
            return
        if self.enum is not None and value not in self.enum:
            allowed = ", ".join(_show(e) for e in self.enum)
            errs.append(FieldError(p, f"Unsupported value: {_show(value)}: supported values: {allowed}",
                                   "FieldValueNotSupported"))
        if self.format and not _format_ok(self.format, value):
            errs.append(FieldError(p, f'Invalid value: {_show(value)}: {where} must be of type {self.format}: '
                                   f'{_show(value)}'))
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._numeric(value, path, where, errs)
        elif isinstance(value, str):
            self._string(value, path, where, errs)
        elif isinstance(value, list):
            self._array(value, path, where, errs)
        elif isinstance(value, dict):
            self._object(value, path, where, root, errs)
        for s in self.all_of:
            s._validate(value, path, root, errs)
        if self.any_of and not any(not s.validate(value, path, root) for s in self.any_of):
            self._invalid(errs, path, value, f"{where} must validate at least one schema (anyOf)")
        if self.one_of:
            n = sum(1 for s in self.one_of if not s.validate(value, path, root))
            if n != 1:
                self._invalid(errs, path, value, f"{where} must validate one and only one schema (oneOf)")
        if self.not_ is not None and not self.not_.validate(value, path, root):
            self._invalid(errs, path, value, f"{where} must not validate the schema (not)")

    def _numeric(self, v: float, path: Path, where: str, errs: list[FieldError]) -> None:
        if self.maximum is not None:
            if self.exclusive_maximum and v >= self.maximum:
                self._invalid(errs, path, v, f"{where} should be less than {_number(self.maximum)}")
            elif v > self.maximum:
                self._invalid(errs, path, v, f"{where} should be less than or equal to {_number(self.maximum)}")
        if self.minimum is not None:
            if self.exclusive_minimum and v <= self.minimum:
                self._invalid(errs, path, v, f"{where} should be greater than {_number(self.minimum)}")
            elif v < self.minimum:
                self._invalid(errs, path, v, f"{where} should be greater than or equal to {_number(self.minimum)}")
        if self.multiple_of and (v / self.multiple_of) % 1:
            self._invalid(errs, path, v, f"{where} should be a multiple of {_number(self.multiple_of)}")

    def _string(self, v: str, path: Path, where: str, errs: list[FieldError]) -> None:
        if self.max_length is not None and len(v) > self.max_length:
            errs.append(FieldError(str(path), f"Too long: may not be more than {self.max_length} bytes",
                                   "FieldValueTooLong"))
        if self.min_length is not None and len(v) < self.min_length:
            self._invalid(errs, path, v, f"{where} should be at least {self.min_length} chars long")
        if self.pattern is not None and not self.pattern.search(v):
            self._invalid(errs, path, v, f"{where} should match '{self.pattern.pattern}'")

    def _array(self, v: list[Any], path: Path, where: str, errs: list[FieldError]) -> None:
        if self.max_items is not None and len(v) > self.max_items:
            errs.append(FieldError(str(path), f"Too many: {len(v)}: must have at most {self.max_items} items",
                                   "FieldValueTooMany"))
        if self.min_items is not None and len(v) < self.min_items:
            self._invalid(errs, path, v, f"{where} should have at least {self.min_items} items")
        if self.unique_items or self.list_type == "set":
            seen: list[Any] = []
            for i, it in enumerate(v):
                if it in seen:
                    errs.append(FieldError(str(path.index(i)), f"Duplicate value: {_show(it)}",
                                           "FieldValueDuplicate"))
                else:
                    seen.append(it)
        if self.list_type == "map" and self.list_map_keys:
            keys: list[tuple[Any, ...]] = []
            for i, it in enumerate(v):
                if not isinstance(it, dict):
                    continue
                k = tuple(it.get(n) for n in self.list_map_keys)
                if k in keys:
                    shown = ", ".join(f"{n}: {_show(x)}" for n, x in zip(self.list_map_keys, k))
                    errs.append(FieldError(str(path.index(i)), f"Duplicate value: map[string]interface {{}}"
                                           f"{{{shown}}}", "FieldValueDuplicate"))
                else:
                    keys.append(k)
        if self.items is not None:
            for i, it in enumerate(v):
                self.items._validate(it, path.index(i), False, errs)

    def _object(self, v: dict[str, Any], path: Path, where: str, root: bool, errs: list[FieldError]) -> None:
        n = len(v) - (sum(1 for k in ("apiVersion", "kind", "metadata") if k in v) if root else 0)
        if self.max_properties is not None and n > self.max_properties:
            errs.append(FieldError(str(path), f"Too many: {n}: must have at most {self.max_properties} items",
                                   "FieldValueTooMany"))
        if self.min_properties is not None and n < self.min_properties:
            self._invalid(errs, path, v, f"{where} should have at least {self.min_properties} properties")
        for r in self.required:
            if r not in v:
                errs.append(FieldError(str(path.child(r)), "Required value", "FieldValueRequired"))
        for k, val in v.items():
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = self.properties.get(k)
            if sub is None and isinstance(self.additional, Schema):
                sub = self.additional
            if sub is not None:
                sub._validate(val, path.child(k), False, errs)
