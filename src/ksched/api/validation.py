"""Validation as the API server does it, on the raw manifest, with field paths.

``validate(raw)`` returns every :class:`FieldError` it finds (an empty list means valid). It never
raises on malformed input: wrong types are reported as errors, so a manifest can be checked
before it is parsed into a typed object. Fast paths (each with its reference behind a flag):
``MEMO_VALID`` (values found valid are not checked again), ``FAST_METADATA`` (metadata of the
common valid shape recognised without building field paths).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from marshal import dumps as _marshal
from typing import Any
from urllib.parse import urlsplit

from ksched.api.apiextensions import validate_crd
from ksched.api.cron import CronError, load_location, parse_standard
from ksched.api.errors import FieldError, Path
from ksched.api.labels import LabelSelector
from ksched.api.quantity import QuantityError, parse_quantity
from ksched.api.resources import is_extended_resource, is_hugepages, is_native

__all__ = ["pod_spec_key", "register_validator", "validate", "validate_metadata", "validate_quantity",
           "validate_update"]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HUGEPAGE_SIZE = re.compile(r"^hugepages-[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPS = ("", "Equal", "Exists")
_NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_OVERCOMMIT_NATIVE = ("cpu", "memory", "ephemeral-storage")


class _V:
    """Collects errors."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, path: Path | str, message: str, reason: str = "FieldValueInvalid") -> None:
        self.errors.append(FieldError(str(path), message, reason))

    def required(self, path: Path | str) -> None:
        self.add(path, "Required value", "FieldValueRequired")

    def invalid(self, path: Path | str, value: Any, message: str) -> None:
        self.add(path, f"Invalid value: {_show(value)}: {message}")

    def unsupported(self, path: Path | str, value: Any, allowed: tuple[str, ...]) -> None:
        vals = ", ".join(f'"{a}"' for a in allowed if a)
        self.add(path, f"Unsupported value: {_show(value)}: supported values: {vals}", "FieldValueNotSupported")

    def forbidden(self, path: Path | str, message: str) -> None:
        self.add(path, f"Forbidden: {message}", "FieldValueForbidden")

    def mapping(self, path: Path, v: Any) -> dict[str, Any]:
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.invalid(path, v, "must be an object")
            return {}
        return v

    def sequence(self, path: Path, v: Any) -> list[Any]:
        if v is None:
            return []
        if not isinstance(v, list):
            self.invalid(path, v, "must be a list")
            return []
        return v

    def string(self, path: Path, v: Any, required: bool = False) -> str:
        if v is None or v == "":
            if required:
                self.required(path)
            return ""
        if not isinstance(v, str):
            self.invalid(path, v, "must be a string")
            return ""
        return v

    def integer(self, path: Path, v: Any, minimum: int | None = None, maximum: int | None = None,
                required: bool = False) -> int | None:
        if v is None:
            if required:
                self.required(path)
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v):
                v = int(v)
            else:
                self.invalid(path, v, "must be an integer")
                return None
        if minimum is not None and v < minimum:
            self.invalid(path, v, f"must be greater than or equal to {minimum}")
        if maximum is not None and v > maximum:
            self.invalid(path, v, f"must be less than or equal to {maximum}")
        return v


def _show(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, dict | list):
        return type(v).__name__
    return str(v)


def validate_quantity(v: Any, path: str = "") -> FieldError | None:
    """An error for a value that is not a valid quantity, else None."""
    try:
        parse_quantity(v)
    except QuantityError as e:
        return FieldError(path, f'invalid quantity "{e.text}"')
    return None


# ---------------------------------------------------------------- metadata


def _qualified_name_errors(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in name:
        return "a qualified name must consist of alphanumeric characters, '-', '_' or '.'"
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character")
    return None


# ---------------------------------------------------------------- memo of valid values
#
# Manifests repeat the same values many times (a generated directory: every pod of an app has
# the same labels and the same spec, every pod of a namespace the same namespace). A few
# checks remember the values they found valid, so an equal value is not checked again. Only a
# value with no error is remembered, and only under a key that equals exactly the values that
# validate alike (below), so an invalid value always goes through the full check and gets its
# errors, in order, with their paths. ``MEMO_VALID = False`` is the reference: every value
# checked in full (tests compare both).
MEMO_VALID = True
_MEMO_MAX = 4096


class _Unkeyable(Exception):
    pass


def _value_key(x: Any) -> bytes:
    """A key equal for two values exactly when they are the same tree of the same builtin
    types: ``marshal`` (format 2, which writes no back-references, so equal values give equal
    bytes) writes each value's exact type with it (``1``, ``1.0``, ``True`` and ``"1"`` differ,
    a list is not a tuple, a float is its bits) and refuses any other type, a subclass of a
    builtin one included, and a tree nested too deep: those raise :class:`_Unkeyable` (such a
    value is checked in full)."""
    try:
        return _marshal(x, 2)
    except ValueError:
        raise _Unkeyable from None


def _remember(memo: set[Any], key: Any) -> None:
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo.add(key)


# Label maps found valid, by their items (a map whose items equal one of these is a map of the
# same strings: a non-string key or value never validates, so it is never remembered).
_VALID_LABELS: set[tuple[tuple[Any, Any], ...]] = set()
# Label items (key, value) found valid.
_VALID_LABEL_ITEMS: set[tuple[Any, Any]] = set()
# Namespace names found valid.
_VALID_NAMESPACES: set[str] = set()
# Pod specs found valid by `_pod_spec`, by `_value_key`.
_VALID_POD_SPECS: set[bytes] = set()


def _labels(v: _V, path: Path, labels: Any) -> None:
    if MEMO_VALID and type(labels) is dict:
        key = tuple(labels.items())
        try:
            if key in _VALID_LABELS:
                return
        except TypeError:  # an unhashable value: checked in full (and refused)
            _labels_full(v, path, labels)
            return
        # Each item is checked on its own (the map's errors are its items' in order): a map
        # whose items were each found valid before, or are now, is valid (a node's labels:
        # the same but for its hostname). Any item with an error: the map checked in full.
        items = _VALID_LABEL_ITEMS
        new = [item for item in key if item not in items]
        if new:
            scratch = _V()
            _labels_full(scratch, path, dict(new))
            if scratch.errors:
                _labels_full(v, path, labels)
                return
            if len(items) + len(new) > _MEMO_MAX:
                items.clear()
            items.update(new)
        _remember(_VALID_LABELS, key)
        return
    _labels_full(v, path, labels)


def _labels_full(v: _V, path: Path, labels: Any) -> None:
    labels = v.mapping(path, labels)
    for k, val in labels.items():
        if not isinstance(k, str):
            v.invalid(path, k, "label keys must be strings")
            continue
        msg = _qualified_name_errors(k)
        if msg:
            v.invalid(path, k, msg)
        if not isinstance(val, str):
            v.invalid(path.key(k), val, "label values must be strings")
        elif len(val) > 63:
            v.invalid(path.key(k), val, "must be no more than 63 characters")
        elif not _LABEL_VALUE.match(val):
            v.invalid(path.key(k), val, "a valid label must be an empty string or consist of alphanumeric "
                                        "characters, '-', '_' or '.', and must start and end with an "
                                        "alphanumeric character")


# Most metadata validated is a pod's: a valid name, a namespace and labels found valid before
# (the memos above), no annotations. ``_metadata_valid`` recognises that case without building
# a field path (four ``Path`` objects a call, for errors that are not there); anything else
# takes the full check. False: every metadata checked in full (the reference; tests compare).
FAST_METADATA = True


def _metadata_valid(raw: dict[str, Any], namespaced: bool, name_rule: str) -> bool:
    """True only when :func:`_metadata` would find no error in ``raw``'s metadata (and would
    remember nothing new): a str name valid as a subdomain, no namespace or one found valid
    (``MEMO_VALID``), no labels or labels found valid, no annotations or an empty map."""
    md = raw.get("metadata")
    if type(md) is not dict:
        return False
    name = md.get("name")
    if type(name) is not str or not name or name_rule != "subdomain" or len(name) > 253 \
            or not _DNS1123_SUBDOMAIN.match(name):
        return False
    ns = md.get("namespace")
    if not (ns is None or ns == "" or (MEMO_VALID and namespaced and type(ns) is str and ns in _VALID_NAMESPACES)):
        return False
    labels = md.get("labels")
    if labels is not None:
        if not MEMO_VALID or type(labels) is not dict:
            return False
        try:
            if tuple(labels.items()) not in _VALID_LABELS:
                return False
        except TypeError:  # an unhashable value (refused by the full check)
            return False
    ann = md.get("annotations")
    return ann is None or (type(ann) is dict and not ann)


def _metadata(v: _V, raw: dict[str, Any], namespaced: bool, name_rule: str = "subdomain") -> None:
    if FAST_METADATA and _metadata_valid(raw, namespaced, name_rule):
        return
    p = Path("metadata")
    md = raw.get("metadata")
    if md is None:
        v.required(p.child("name"))
        return
    md = v.mapping(p, md)
    name = md.get("name")
    if name is None or name == "":
        if not md.get("generateName"):
            v.add(p.child("name"), "Required value: name or generateName is required", "FieldValueRequired")
    elif not isinstance(name, str):
        v.invalid(p.child("name"), name, "must be a string")
    else:
        _name(v, p.child("name"), name, name_rule)
    ns = md.get("namespace")
    if ns not in (None, "") and not (MEMO_VALID and namespaced and type(ns) is str and ns in _VALID_NAMESPACES):
        if not isinstance(ns, str) or not _DNS1123_LABEL.match(ns) or len(ns) > 63:
            v.invalid(p.child("namespace"), ns, "a lowercase RFC 1123 label must consist of lower case "
                                                "alphanumeric characters or '-'")
        elif not namespaced:
            v.forbidden(p.child("namespace"), "not allowed on this type")
        elif MEMO_VALID and type(ns) is str:
            _remember(_VALID_NAMESPACES, ns)
    _labels(v, p.child("labels"), md.get("labels"))
    ann = v.mapping(p.child("annotations"), md.get("annotations"))
    total = 0
    for k, val in ann.items():
        if not isinstance(val, str):
            v.invalid(p.child("annotations").key(str(k)), val, "annotation values must be strings")
            continue
        total += len(str(k)) + len(val)
    if total > 256 * 1024:
        v.add(p.child("annotations"), "Too long: must have at most 262144 bytes", "FieldValueTooLong")


def _name(v: _V, path: Path, name: str, rule: str) -> None:
    if rule == "path":
        # RBAC names are path segments (``system:controller:x`` is fine).
        if name in (".", ".."):
            v.invalid(path, name, f"may not be '{name}'")
        for bad in ("/", "%"):
            if bad in name:
                v.invalid(path, name, f"may not contain '{bad}'")
    elif rule == "dns1035":
        if len(name) > 63 or not _DNS1035_LABEL.match(name):
            v.invalid(path, name, "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                  "start with an alphabetic character, and end with an alphanumeric character")
    elif rule == "label":
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            v.invalid(path, name, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                  "characters or '-', and must start and end with an alphanumeric character")
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        v.invalid(path, name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                              "characters, '-' or '.', and must start and end with an alphanumeric character")


# ---------------------------------------------------------------- resources


def _resource_list(v: _V, path: Path, d: Any, allow_pods: bool = False) -> dict[str, Any]:
    """Check names and quantities of a ResourceList; returns the parsable entries."""
    d = v.mapping(path, d)
    out: dict[str, Any] = {}
    for name, q in d.items():
        p = path.child(str(name))
        if not isinstance(name, str) or not name:
            v.invalid(path, name, "resource names must be non-empty strings")
            continue
        if is_hugepages(name) and not _HUGEPAGE_SIZE.match(name):
            v.invalid(p, name, "must be a valid hugepages resource name (hugepages-<size>)")
            continue
        if "/" in name and _qualified_name_errors(name):
            v.invalid(p, name, "must be a standard resource type or fully qualified")
            continue
        try:
            qty = parse_quantity(q)
        except QuantityError as e:
            v.add(p, f'invalid quantity "{e.text}"')
            continue
        if qty.nanos < 0:
            v.invalid(p, str(qty), "must be greater than or equal to 0")
            continue
        if (is_extended_resource(name) or name == "pods") and qty.nanos % 10**9:
            v.invalid(p, str(qty), "must be an integer")
            continue
        out[name] = qty
    return out


def _container_resources(v: _V, path: Path, res: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    res = v.mapping(path, res)
    reqs = _resource_list(v, path.child("requests"), res.get("requests"))
    lims = _resource_list(v, path.child("limits"), res.get("limits"))
    for name, req in reqs.items():
        lim = lims.get(name)
        p = path.child("requests").child(name)
        overcommit = name in _OVERCOMMIT_NATIVE or (is_native(name) and not is_hugepages(name)
                                                    and name not in ("pods",))
        if lim is not None:
            if overcommit:
                if req.nanos > lim.nanos:
                    v.invalid(p, str(req), f"must be less than or equal to {name} limit of {lim}")
            elif req.nanos != lim.nanos:
                v.invalid(p, str(req), f"must be equal to {name} limit of {lim}")
        elif not overcommit:
            v.add(path.child("limits").child(name),
                  "Required value: Limit must be set for non overcommitable resources", "FieldValueRequired")
    return reqs, lims


def _container(v: _V, path: Path, c: Any, names: set[str], init: bool) -> None:
    c = v.mapping(path, c)
    name = v.string(path.child("name"), c.get("name"), required=True)
    if name:
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            v.invalid(path.child("name"), name, "a lowercase RFC 1123 label must consist of lower case "
                                                "alphanumeric characters or '-'")
        elif name in names:
            v.add(path.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
        names.add(name)
    v.string(path.child("image"), c.get("image"), required=True)
    reqs, lims = _container_resources(v, path.child("resources"), c.get("resources"))
    for i, port in enumerate(v.sequence(path.child("ports"), c.get("ports"))):
        pp = path.child("ports").index(i)
        port = v.mapping(pp, port)
        v.integer(pp.child("containerPort"), port.get("containerPort"), 1, 65535, required=True)
        v.integer(pp.child("hostPort"), port.get("hostPort"), 0, 65535)
        proto = port.get("protocol", "TCP")
        if proto not in _PROTOCOLS:
            v.unsupported(pp.child("protocol"), proto, _PROTOCOLS)
    rp = c.get("restartPolicy")
    if rp is not None:
        if not init:
            v.forbidden(path.child("restartPolicy"), "may not be set for non-init containers")
        elif rp != "Always":
            v.unsupported(path.child("restartPolicy"), rp, ("Always",))
    if any(is_hugepages(k) for k in (*reqs, *lims)) and not any(k in ("cpu", "memory") for k in (*reqs, *lims)):
        v.forbidden(path.child("resources"), "HugePages require cpu or memory")


def _tolerations(v: _V, path: Path, tols: Any) -> None:
    for i, t in enumerate(v.sequence(path, tols)):
        p = path.index(i)
        t = v.mapping(p, t)
        op = t.get("operator") or ""
        if op not in _TOLERATION_OPS:
            v.unsupported(p.child("operator"), op, ("Equal", "Exists"))
        key = t.get("key") or ""
        if key:
            msg = _qualified_name_errors(key) if isinstance(key, str) else "must be a string"
            if msg:
                v.invalid(p.child("key"), key, msg)
        elif op != "Exists":
            v.invalid(p.child("operator"), op, "operator must be Exists when `key` is empty, which means "
                                               '"match all values and all keys"')
        if op == "Exists" and t.get("value"):
            v.invalid(p.child("operator"), op, "value must be empty when `operator` is 'Exists'")
        eff = t.get("effect") or ""
        if eff and eff not in _TAINT_EFFECTS:
            v.unsupported(p.child("effect"), eff, _TAINT_EFFECTS)
        ts = t.get("tolerationSeconds")
        if ts is not None:
            v.integer(p.child("tolerationSeconds"), ts)
            if eff and eff != "NoExecute":
                v.invalid(p.child("effect"), eff, "effect must be 'NoExecute' when `tolerationSeconds` is set")


def _selector_requirement(v: _V, p: Path, e: Any, ops: tuple[str, ...]) -> tuple[str, Any, list[Any]]:
    """(key, operator, values) of one requirement of a label or node selector, with what both
    check: a key, an operator of ``ops``, values for In/NotIn and none for Exists/DoesNotExist."""
    e = v.mapping(p, e)
    key = v.string(p.child("key"), e.get("key"), required=True)
    op = e.get("operator")
    vals = v.sequence(p.child("values"), e.get("values"))
    if op not in ops:
        v.unsupported(p.child("operator"), op, ops)
    elif op in ("In", "NotIn") and not vals:
        v.required(p.child("values"))
    elif op in ("Exists", "DoesNotExist") and vals:
        v.forbidden(p.child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    return key, op, vals


def _node_selector_term(v: _V, path: Path, term: Any) -> None:
    term = v.mapping(path, term)
    for part in ("matchExpressions", "matchFields"):
        for i, e in enumerate(v.sequence(path.child(part), term.get(part))):
            p = path.child(part).index(i)
            key, op, vals = _selector_requirement(v, p, e, _NODE_SELECTOR_OPS)
            if op in ("Gt", "Lt"):
                if len(vals) != 1:
                    v.required(p.child("values"))
                else:
                    try:
                        int(str(vals[0]))
                    except (TypeError, ValueError):
                        v.invalid(p.child("values").index(0), vals[0], "must be an integer")
            if part == "matchFields" and key and key != "metadata.name":
                v.invalid(p.child("key"), key, "not a valid field selector key")


def _label_selector(v: _V, path: Path, sel: Any) -> None:
    if sel is None:
        return
    sel = v.mapping(path, sel)
    _labels(v, path.child("matchLabels"), sel.get("matchLabels"))
    for i, e in enumerate(v.sequence(path.child("matchExpressions"), sel.get("matchExpressions"))):
        p = path.child("matchExpressions").index(i)
        _, _, vals = _selector_requirement(v, p, e, _LABEL_SELECTOR_OPS)
        for j, val in enumerate(vals):
            if not isinstance(val, str) or len(val) > 63 or not _LABEL_VALUE.match(val):
                v.invalid(p.child("values").index(j), val, "a valid label must be an empty string or consist of "
                                                          "alphanumeric characters, '-', '_' or '.', and must "
                                                          "start and end with an alphanumeric character")


def _pod_affinity_term(v: _V, path: Path, term: Any) -> None:
    term = v.mapping(path, term)
    _label_selector(v, path.child("labelSelector"), term.get("labelSelector"))
    _label_selector(v, path.child("namespaceSelector"), term.get("namespaceSelector"))
    for i, ns in enumerate(v.sequence(path.child("namespaces"), term.get("namespaces"))):
        if not isinstance(ns, str) or not _DNS1123_LABEL.match(ns):
            v.invalid(path.child("namespaces").index(i), ns, "must be a valid namespace name")
    key = v.string(path.child("topologyKey"), term.get("topologyKey"))
    if not key:
        v.add(path.child("topologyKey"), "Required value: can not be empty", "FieldValueRequired")
    elif _qualified_name_errors(key):
        v.invalid(path.child("topologyKey"), key, _qualified_name_errors(key) or "")


def _affinity(v: _V, path: Path, aff: Any) -> None:
    aff = v.mapping(path, aff)
    na = aff.get("nodeAffinity")
    if na is not None:
        np_ = path.child("nodeAffinity")
        na = v.mapping(np_, na)
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is not None:
            rp = np_.child("requiredDuringSchedulingIgnoredDuringExecution")
            req = v.mapping(rp, req)
            terms = v.sequence(rp.child("nodeSelectorTerms"), req.get("nodeSelectorTerms"))
            if not terms:
                v.add(rp.child("nodeSelectorTerms"), "Required value: must have at least one node selector term",
                      "FieldValueRequired")
            for i, t in enumerate(terms):
                _node_selector_term(v, rp.child("nodeSelectorTerms").index(i), t)
        pp = np_.child("preferredDuringSchedulingIgnoredDuringExecution")
        for i, p in enumerate(v.sequence(pp, na.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            p = v.mapping(pp.index(i), p)
            v.integer(pp.index(i).child("weight"), p.get("weight"), 1, 100, required=True)
            _node_selector_term(v, pp.index(i).child("preference"), p.get("preference"))
    for kind in ("podAffinity", "podAntiAffinity"):
        pa = aff.get(kind)
        if pa is None:
            continue
        kp = path.child(kind)
        pa = v.mapping(kp, pa)
        rp = kp.child("requiredDuringSchedulingIgnoredDuringExecution")
        for i, t in enumerate(v.sequence(rp, pa.get("requiredDuringSchedulingIgnoredDuringExecution"))):
            _pod_affinity_term(v, rp.index(i), t)
        pp = kp.child("preferredDuringSchedulingIgnoredDuringExecution")
        for i, w in enumerate(v.sequence(pp, pa.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            w = v.mapping(pp.index(i), w)
            v.integer(pp.index(i).child("weight"), w.get("weight"), 1, 100, required=True)
            _pod_affinity_term(v, pp.index(i).child("podAffinityTerm"), w.get("podAffinityTerm"))


def _spread_constraints(v: _V, path: Path, cs: Any) -> None:
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(v.sequence(path, cs)):
        p = path.index(i)
        c = v.mapping(p, c)
        v.integer(p.child("maxSkew"), c.get("maxSkew"), 1, required=True)
        key = v.string(p.child("topologyKey"), c.get("topologyKey"), required=True)
        wu = c.get("whenUnsatisfiable")
        if wu not in ("DoNotSchedule", "ScheduleAnyway"):
            v.unsupported(p.child("whenUnsatisfiable"), wu, ("DoNotSchedule", "ScheduleAnyway"))
        md = c.get("minDomains")
        if md is not None:
            v.integer(p.child("minDomains"), md, 1)
            if wu != "DoNotSchedule":
                v.invalid(p.child("minDomains"), md, "can only use minDomains if whenUnsatisfiable=DoNotSchedule")
        for pol in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            pv = c.get(pol)
            if pv is not None and pv not in ("Honor", "Ignore"):
                v.unsupported(p.child(pol), pv, ("Honor", "Ignore"))
        _label_selector(v, p.child("labelSelector"), c.get("labelSelector"))
        if (key, str(wu)) in seen:
            v.add(p, f'Duplicate value: "{{{key}, {wu}}}"', "FieldValueDuplicate")
        seen.add((key, str(wu)))


def _pod(v: _V, raw: dict[str, Any]) -> None:
    global _last_pod_spec
    _last_pod_spec = (None, None)
    _metadata(v, raw, True)
    spec = raw.get("spec")
    key = None
    if MEMO_VALID and type(spec) is dict:
        # `_pod_spec` reads nothing but the spec: a spec equal to one found valid is valid.
        try:
            key = _value_key(spec)
        except _Unkeyable:
            key = None
    _last_pod_spec = (spec, key)
    if key is None:
        _pod_spec(v, Path("spec"), spec)
        return
    if key in _VALID_POD_SPECS:
        return
    n = len(v.errors)
    _pod_spec(v, Path("spec"), spec)
    if len(v.errors) == n:
        _remember(_VALID_POD_SPECS, key)


# The spec of the pod `_pod` validated last, and its key (None: not keyed), for what reads the
# same spec next: the pod's other validators (DRA claims) and the loader's parse.
_last_pod_spec: tuple[Any, Any] = (None, None)


# Where the loader keeps, on the typed pod it made (``Pod.cached()``), its spec and that spec's
# key (``pod_spec_key``): the store's admission keys the same spec by the same bytes
# (``admission.admission_key``), right while the spec is not changed, as a validated manifest
# handed over is not.
LOADED_SPEC_KEY = "loaded_spec_key"


def pod_spec_key(spec: Any) -> Any:
    """The key (`_value_key`) of a pod spec that the last validation of a pod computed, when
    ``spec`` is that very object (and the memo is on), else None: two specs with equal keys
    are the same values of the same types. Only right until the spec is changed: the caller
    asks right after validating it."""
    last, key = _last_pod_spec
    return key if last is spec and spec is not None else None


def _pod_spec(v: _V, sp: Path, spec: Any) -> None:
    if spec is None:
        v.required(sp)
        return
    spec = v.mapping(sp, spec)
    containers = v.sequence(sp.child("containers"), spec.get("containers"))
    if not containers and isinstance(spec.get("containers", []), list):
        v.required(sp.child("containers"))
    names: set[str] = set()
    for i, c in enumerate(v.sequence(sp.child("initContainers"), spec.get("initContainers"))):
        _container(v, sp.child("initContainers").index(i), c, names, True)
    for i, c in enumerate(containers):
        _container(v, sp.child("containers").index(i), c, names, False)
    _resource_list(v, sp.child("overhead"), spec.get("overhead"))
    if spec.get("resources") is not None:
        _container_resources(v, sp.child("resources"), spec.get("resources"))
    ns = v.mapping(sp.child("nodeSelector"), spec.get("nodeSelector"))
    _labels(v, sp.child("nodeSelector"), ns)
    _tolerations(v, sp.child("tolerations"), spec.get("tolerations"))
    if spec.get("affinity") is not None:
        _affinity(v, sp.child("affinity"), spec.get("affinity"))
    _spread_constraints(v, sp.child("topologySpreadConstraints"), spec.get("topologySpreadConstraints"))
    v.integer(sp.child("priority"), spec.get("priority"))
    pp = spec.get("preemptionPolicy")
    if pp is not None and pp not in ("PreemptLowerPriority", "Never"):
        v.unsupported(sp.child("preemptionPolicy"), pp, ("Never", "PreemptLowerPriority"))
    for i, g in enumerate(v.sequence(sp.child("schedulingGates"), spec.get("schedulingGates"))):
        g = v.mapping(sp.child("schedulingGates").index(i), g)
        gname = v.string(sp.child("schedulingGates").index(i).child("name"), g.get("name"), required=True)
        if gname and _qualified_name_errors(gname):
            v.invalid(sp.child("schedulingGates").index(i).child("name"), gname, _qualified_name_errors(gname) or "")
    v.integer(sp.child("terminationGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds"), 0)
    nn = spec.get("nodeName")
    if nn not in (None, "") and (not isinstance(nn, str) or not _DNS1123_SUBDOMAIN.match(nn)):
        v.invalid(sp.child("nodeName"), nn, "a lowercase RFC 1123 subdomain must consist of lower case "
                                            "alphanumeric characters, '-' or '.'")
    vnames: set[str] = set()
    for i, vol in enumerate(v.sequence(sp.child("volumes"), spec.get("volumes"))):
        p = sp.child("volumes").index(i)
        vol = v.mapping(p, vol)
        vn = v.string(p.child("name"), vol.get("name"), required=True)
        if vn in vnames:
            v.add(p.child("name"), f'Duplicate value: "{vn}"', "FieldValueDuplicate")
        vnames.add(vn)
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            v.string(p.child("persistentVolumeClaim").child("claimName"),
                     v.mapping(p.child("persistentVolumeClaim"), pvc).get("claimName"), required=True)


def _node(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    spec = v.mapping(Path("spec"), raw.get("spec"))
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(v.sequence(Path("spec.taints"), spec.get("taints"))):
        p = Path("spec.taints").index(i)
        t = v.mapping(p, t)
        key = v.string(p.child("key"), t.get("key"), required=True)
        if key and _qualified_name_errors(key):
            v.invalid(p.child("key"), key, _qualified_name_errors(key) or "")
        eff = t.get("effect")
        if eff not in _TAINT_EFFECTS:
            v.unsupported(p.child("effect"), eff, _TAINT_EFFECTS)
        if (key, str(eff)) in seen:
            v.add(p, f"Duplicate value: taints must be unique by key and effect pair ({key}:{eff})",
                  "FieldValueDuplicate")
        seen.add((key, str(eff)))
    status = v.mapping(Path("status"), raw.get("status"))
    _resource_list(v, Path("status.capacity"), status.get("capacity"), allow_pods=True)
    _resource_list(v, Path("status.allocatable"), status.get("allocatable"), allow_pods=True)


def _priority_class(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    val = v.integer(Path("value"), raw.get("value"), required=True)
    md = raw.get("metadata")
    name = (md.get("name") or "") if isinstance(md, dict) else ""
    if val is not None and not str(name).startswith("system-") and val > 1_000_000_000:
        v.forbidden(Path("value"), "maximum allowed value of a user defined priority is 1000000000")
    pp = raw.get("preemptionPolicy")
    if pp is not None and pp not in ("PreemptLowerPriority", "Never"):
        v.unsupported(Path("preemptionPolicy"), pp, ("Never", "PreemptLowerPriority"))


def _int_or_percent(v: _V, path: Path, x: Any) -> None:
    if x is None:
        return
    if isinstance(x, bool):
        v.invalid(path, x, "must be an integer or percentage")
    elif isinstance(x, int):
        if x < 0:
            v.invalid(path, x, "must be greater than or equal to 0")
    elif isinstance(x, str):
        m = re.fullmatch(r"([0-9]+)%", x)
        if not m:
            v.invalid(path, x, "a valid percent string must be a numeric string followed by an ending '%'")
        elif int(m.group(1)) > 100:
            v.invalid(path, x, "must not be greater than 100%")
    else:
        v.invalid(path, x, "must be an integer or percentage")


def _pdb(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        v.invalid(sp, "spec", "minAvailable and maxUnavailable cannot be both set")
    _int_or_percent(v, sp.child("minAvailable"), spec.get("minAvailable"))
    _int_or_percent(v, sp.child("maxUnavailable"), spec.get("maxUnavailable"))
    _label_selector(v, sp.child("selector"), spec.get("selector"))


def _access_modes(v: _V, path: Path, modes: Any) -> None:
    """A volume's or claim's accessModes: at least one, each a known mode."""
    modes = v.sequence(path, modes)
    if not modes:
        v.required(path)
    for i, m in enumerate(modes):
        if m not in _ACCESS_MODES:
            v.unsupported(path.index(i), m, _ACCESS_MODES)


def _pv(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    cap = v.mapping(sp.child("capacity"), spec.get("capacity"))
    if "storage" not in cap:
        v.required(sp.child("capacity").child("storage"))
    _resource_list(v, sp.child("capacity"), cap)
    _access_modes(v, sp.child("accessModes"), spec.get("accessModes"))
    na = spec.get("nodeAffinity")
    if na is not None:
        req = v.mapping(sp.child("nodeAffinity"), na).get("required")
        if req is not None:
            rp = sp.child("nodeAffinity").child("required")
            for i, t in enumerate(v.sequence(rp.child("nodeSelectorTerms"),
                                             v.mapping(rp, req).get("nodeSelectorTerms"))):
                _node_selector_term(v, rp.child("nodeSelectorTerms").index(i), t)


def _pvc(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    _pvc_spec(v, Path("spec"), raw.get("spec"))


def _pvc_spec(v: _V, sp: Path, spec: Any) -> None:
    spec = v.mapping(sp, spec)
    _access_modes(v, sp.child("accessModes"), spec.get("accessModes"))
    res = v.mapping(sp.child("resources"), spec.get("resources"))
    reqs = v.mapping(sp.child("resources").child("requests"), res.get("requests"))
    if "storage" not in reqs:
        v.required(sp.child("resources").child("requests").child("storage"))
    _resource_list(v, sp.child("resources").child("requests"), reqs)
    _label_selector(v, sp.child("selector"), spec.get("selector"))


def _storage_class(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    v.string(Path("provisioner"), raw.get("provisioner"), required=True)
    mode = raw.get("volumeBindingMode")
    if mode is not None and mode not in ("Immediate", "WaitForFirstConsumer"):
        v.unsupported(Path("volumeBindingMode"), mode, ("Immediate", "WaitForFirstConsumer"))


def _csinode(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    for i, d in enumerate(v.sequence(sp.child("drivers"), spec.get("drivers"))):
        p = sp.child("drivers").index(i)
        d = v.mapping(p, d)
        v.string(p.child("name"), d.get("name"), required=True)
        alloc = d.get("allocatable")
        if alloc is not None:
            v.integer(p.child("allocatable").child("count"), v.mapping(p.child("allocatable"), alloc).get("count"), 0)


def _namespace(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False, name_rule="label")


def _lease(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    spec = v.mapping(Path("spec"), raw.get("spec"))
    v.integer(Path("spec.leaseDurationSeconds"), spec.get("leaseDurationSeconds"), 1)


def _event(v: _V, raw: dict[str, Any]) -> None:
    md = v.mapping(Path("metadata"), raw.get("metadata"))
    if not md.get("name") and not md.get("generateName"):
        v.required(Path("metadata.name"))
    v.mapping(Path("involvedObject"), raw.get("involvedObject"))


# ---------------------------------------------------------------- services, configuration, RBAC, CRDs

_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_MAX_CONFIG_BYTES = 1024 * 1024


def _port_number(v: _V, path: Path, x: Any, required: bool = True) -> None:
    n = v.integer(path, x, required=required)
    if n is not None and not 1 <= n <= 65535:
        v.invalid(path, n, "must be between 1 and 65535, inclusive")


def _service(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True, name_rule="dns1035")
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    stype = spec.get("type") or "ClusterIP"
    if stype not in _SERVICE_TYPES:
        v.unsupported(sp.child("type"), stype, _SERVICE_TYPES)
    ports = v.sequence(sp.child("ports"), spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if stype == "ExternalName":
        v.string(sp.child("externalName"), spec.get("externalName"), required=True)
    elif not ports and not headless:
        v.required(sp.child("ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = sp.child("ports").index(i)
        port = v.mapping(p, port)
        name = port.get("name")
        if name in (None, ""):
            if len(ports) > 1:
                v.required(p.child("name"))
        elif not isinstance(name, str) or len(name) > 63 or not _DNS1123_LABEL.match(name):
            v.invalid(p.child("name"), name, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                             "characters or '-', and must start and end with an alphanumeric "
                                             "character")
        elif name in names:
            v.add(p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
        else:
            names.add(name)
        _port_number(v, p.child("port"), port.get("port"))
        proto = port.get("protocol")
        if proto is not None and proto not in _PROTOCOLS:
            v.unsupported(p.child("protocol"), proto, _PROTOCOLS)
        tp = port.get("targetPort")
        if isinstance(tp, int) and not isinstance(tp, bool):
            _port_number(v, p.child("targetPort"), tp)
        elif tp is not None and not (isinstance(tp, str) and tp and len(tp) <= 15
                                     and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", tp)):
            v.invalid(p.child("targetPort"), tp, "must contain only alpha-numeric characters (a-z, 0-9), and "
                                                 "hyphens (-)")
        np_ = port.get("nodePort")
        if np_ not in (None, 0):
            if stype not in ("NodePort", "LoadBalancer"):
                v.forbidden(p.child("nodePort"), f"may not be used when `type` is '{stype}'")
            else:
                _port_number(v, p.child("nodePort"), np_)
    sel = v.mapping(sp.child("selector"), spec.get("selector"))
    _labels(v, sp.child("selector"), sel)
    aff = spec.get("sessionAffinity")
    if aff is not None and aff not in ("ClientIP", "None"):
        v.unsupported(sp.child("sessionAffinity"), aff, ("ClientIP", "None"))
    ip = spec.get("clusterIP")
    if ip not in (None, "", "None") and (not isinstance(ip, str) or not _is_ip(ip)):
        v.invalid(sp.child("clusterIP"), ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")


def _is_ip(s: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return True


def _endpoint_slice(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    at = raw.get("addressType")
    if at not in ("IPv4", "IPv6", "FQDN"):
        if not at:
            v.required(Path("addressType"))
        else:
            v.unsupported(Path("addressType"), at, ("FQDN", "IPv4", "IPv6"))
    ep = Path("endpoints")
    for i, e in enumerate(v.sequence(ep, raw.get("endpoints"))):
        e = v.mapping(ep.index(i), e)
        addrs = v.sequence(ep.index(i).child("addresses"), e.get("addresses"))
        if not addrs:
            v.add(ep.index(i).child("addresses"), "Required value: must contain at least 1 address",
                  "FieldValueRequired")
        elif len(addrs) > 100:
            v.add(ep.index(i).child("addresses"), f"Too many: {len(addrs)}: must have at most 100 items",
                  "FieldValueTooMany")
    pp = Path("ports")
    for i, port in enumerate(v.sequence(pp, raw.get("ports"))):
        port = v.mapping(pp.index(i), port)
        if port.get("port") is not None:
            _port_number(v, pp.index(i).child("port"), port.get("port"))
        proto = port.get("protocol")
        if proto is not None and proto not in _PROTOCOLS:
            v.unsupported(pp.index(i).child("protocol"), proto, _PROTOCOLS)


def _config_keys(v: _V, raw: dict[str, Any], fields: tuple[str, ...], base64_fields: tuple[str, ...] = ()) -> int:
    """Check data keys (and base64 values); returns the total size of the values."""
    import base64
    import binascii

    total = 0
    seen: dict[str, str] = {}
    for f in fields:
        d = v.mapping(Path(f), raw.get(f))
        for k, val in d.items():
            p = Path(f).key(str(k))
            if not isinstance(k, str) or not _CONFIG_KEY.match(k) or len(k) > 253:
                v.invalid(p, k, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                                "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                                "'[-._a-zA-Z0-9]+')")
            if k in seen:
                v.invalid(p, k, f"duplicate of key present in {seen[k]}")
            seen[str(k)] = f
            if not isinstance(val, str):
                v.invalid(p, val, "must be a string")
                continue
            if f in base64_fields:
                try:
                    total += len(base64.b64decode(val, validate=True))
                except (binascii.Error, ValueError):
                    v.invalid(p, "<value omitted>", "illegal base64 data")
            else:
                total += len(val.encode())
    return total


def _config_map(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    if _config_keys(v, raw, ("data", "binaryData"), ("binaryData",)) > _MAX_CONFIG_BYTES:
        v.add("", f"Too long: must have at most {_MAX_CONFIG_BYTES} bytes", "FieldValueTooLong")


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def _secret(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    if _config_keys(v, raw, ("data", "stringData"), ("data",)) > _MAX_CONFIG_BYTES:
        v.add("data", f"Too long: must have at most {_MAX_CONFIG_BYTES} bytes", "FieldValueTooLong")
    stype = raw.get("type") or "Opaque"
    if not isinstance(stype, str):
        v.invalid(Path("type"), stype, "must be a string")
        stype = "Opaque"
    keys = {*(raw.get("data") or {}), *(raw.get("stringData") or {})} if isinstance(raw.get("data") or {}, dict) \
        and isinstance(raw.get("stringData") or {}, dict) else set()
    for k in _SECRET_REQUIRED_KEYS.get(stype, ()):
        if k not in keys:
            v.required(Path("data").key(k))
    if stype == "kubernetes.io/basic-auth" and not keys & {"username", "password"}:
        v.add("data", 'Required value: must contain at least one of "username" or "password"', "FieldValueRequired")
    if stype == "kubernetes.io/service-account-token":
        md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        if not (md.get("annotations") or {}).get("kubernetes.io/service-account.name"):
            v.required(Path("metadata.annotations").key("kubernetes.io/service-account.name"))


def _service_account(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)


_LIMIT_TYPES = ("Container", "Pod", "PersistentVolumeClaim")


def _limit_range(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    lp = Path("spec.limits")
    spec = v.mapping(Path("spec"), raw.get("spec"))
    for i, item in enumerate(v.sequence(lp, spec.get("limits"))):
        p = lp.index(i)
        item = v.mapping(p, item)
        ltype = item.get("type")
        if not ltype:
            v.required(p.child("type"))
        lists = {f: _resource_list(v, p.child(f), item.get(f)) for f in
                 ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
        if ltype == "Pod":
            for f in ("default", "defaultRequest"):
                if item.get(f):
                    v.forbidden(p.child(f), "may not be specified when `type` is 'Pod'")
        if ltype == "PersistentVolumeClaim" and "storage" not in lists["min"] and "storage" not in lists["max"]:
            v.add(p.child("min"), "Required value: either minimum or maximum storage value is required, but "
                                      "neither was provided", "FieldValueRequired")
        mx, mn, df, dr, ratio = (lists[f] for f in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"))
        for k in sorted({*mx, *mn, *df, *dr, *ratio}):
            if k in mn and k in mx and mn[k].nanos > mx[k].nanos:
                v.invalid(p.child("min").key(k), str(mn[k]), f"min value {mn[k]} is greater than max value {mx[k]}")
            if k in dr and k in mn and mn[k].nanos > dr[k].nanos:
                v.invalid(p.child("defaultRequest").key(k), str(dr[k]),
                          f"min value {mn[k]} is greater than default request value {dr[k]}")
            if k in dr and k in mx and dr[k].nanos > mx[k].nanos:
                v.invalid(p.child("defaultRequest").key(k), str(dr[k]),
                          f"default request value {dr[k]} is greater than max value {mx[k]}")
            if k in dr and k in df and dr[k].nanos > df[k].nanos:
                v.invalid(p.child("defaultRequest").key(k), str(dr[k]),
                          f"default request value {dr[k]} is greater than default limit value {df[k]}")
            if k in df and k in mx and df[k].nanos > mx[k].nanos:
                v.invalid(p.child("default").key(k), str(df[k]), f"default value {df[k]} is greater than max value "
                                                                 f"{mx[k]}")
            if k in df and k in mn and mn[k].nanos > df[k].nanos:
                v.invalid(p.child("default").key(k), str(df[k]), f"min value {mn[k]} is greater than default value "
                                                                 f"{df[k]}")
            if k in ratio and ratio[k].nanos < 10**9:
                v.invalid(p.child("maxLimitRequestRatio").key(k), str(ratio[k]), f"ratio {ratio[k]} is less than 1")


_QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                 "CrossNamespacePodAffinity", "VolumeAttributesClass")
_QUOTA_STANDARD = frozenset(("pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
                             "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu",
                             "memory", "ephemeral-storage", "storage"))


def _resource_quota(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    hard = v.mapping(sp.child("hard"), spec.get("hard"))
    for k in hard:
        if not isinstance(k, str):
            continue
        if not (k in _QUOTA_STANDARD or k.startswith(("requests.", "limits.", "count/", "hugepages-"))
                or "/" in k):
            v.invalid(sp.child("hard").key(k), k, "must be a standard resource type or fully qualified")
    _resource_list(v, sp.child("hard"), {k: q for k, q in hard.items()
                                         if isinstance(k, str) and not k.startswith("count/")})
    for k, q in hard.items():
        if isinstance(k, str) and k.startswith("count/"):
            fe = validate_quantity(q, str(sp.child("hard").key(k)))
            if fe is not None:
                v.errors.append(fe)
    scopes = v.sequence(sp.child("scopes"), spec.get("scopes"))
    for i, sc in enumerate(scopes):
        if sc not in _QUOTA_SCOPES:
            v.invalid(sp.child("scopes").index(i), sc, "unsupported scope")
    for a, b in (("Terminating", "NotTerminating"), ("BestEffort", "NotBestEffort")):
        if a in scopes and b in scopes:
            v.invalid(sp.child("scopes"), scopes, "conflicting scopes")
    ssp = sp.child("scopeSelector").child("matchExpressions")
    sel = v.mapping(sp.child("scopeSelector"), spec.get("scopeSelector"))
    for i, e in enumerate(v.sequence(ssp, sel.get("matchExpressions"))):
        p = ssp.index(i)
        e = v.mapping(p, e)
        if e.get("scopeName") not in _QUOTA_SCOPES:
            v.invalid(p.child("scopeName"), e.get("scopeName"), "unsupported scope")
        op = e.get("operator")
        vals = e.get("values") or []
        if op not in _LABEL_SELECTOR_OPS:
            v.unsupported(p.child("operator"), op, _LABEL_SELECTOR_OPS)
        elif op in ("In", "NotIn") and not vals:
            v.add(p.child("values"), "Required value: must be at least one value when `operator` is 'In' or "
                                     "'NotIn' for scope selector", "FieldValueRequired")
        elif op in ("Exists", "DoesNotExist") and vals:
            v.invalid(p.child("values"), vals, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for "
                                               "scope selector")


def _runtime_class(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    h = raw.get("handler")
    if not h:
        v.required(Path("handler"))
    elif not isinstance(h, str) or len(h) > 63 or not _DNS1123_LABEL.match(h):
        v.invalid(Path("handler"), h, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                      "characters or '-', and must start and end with an alphanumeric character")
    overhead = v.mapping(Path("overhead"), raw.get("overhead"))
    _resource_list(v, Path("overhead.podFixed"), overhead.get("podFixed"))
    sched = v.mapping(Path("scheduling"), raw.get("scheduling"))
    _labels(v, Path("scheduling.nodeSelector"), sched.get("nodeSelector"))
    _tolerations(v, Path("scheduling.tolerations"), sched.get("tolerations"))


_RBAC_GROUP = "rbac.authorization.k8s.io"


def _policy_rules(v: _V, raw: dict[str, Any], namespaced: bool) -> None:
    rp = Path("rules")
    rules = v.sequence(rp, raw.get("rules"))
    for i, r in enumerate(rules):
        p = rp.index(i)
        r = v.mapping(p, r)
        if not r.get("verbs"):
            v.add(p.child("verbs"), "Required value: verbs must contain at least one value", "FieldValueRequired")
        urls = r.get("nonResourceURLs")
        if urls:
            if namespaced:
                v.invalid(p.child("nonResourceURLs"), urls, "namespaced rules cannot apply to non-resource URLs")
            if r.get("apiGroups") or r.get("resources") or r.get("resourceNames"):
                v.invalid(p.child("nonResourceURLs"), urls, "rules cannot apply to both regular resources and "
                                                            "non-resource URLs")
            continue
        if not r.get("apiGroups"):
            v.add(p.child("apiGroups"), "Required value: resource rules must supply at least one api group",
                  "FieldValueRequired")
        if not r.get("resources"):
            v.add(p.child("resources"), "Required value: resource rules must supply at least one resource",
                  "FieldValueRequired")


def _role(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True, name_rule="path")
    _policy_rules(v, raw, True)


def _cluster_role(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False, name_rule="path")
    if raw.get("aggregationRule") is None:
        _policy_rules(v, raw, False)


def _binding(v: _V, raw: dict[str, Any], cluster: bool) -> None:
    _metadata(v, raw, not cluster, name_rule="path")
    rr = Path("roleRef")
    ref = v.mapping(rr, raw.get("roleRef"))
    if ref.get("apiGroup") != _RBAC_GROUP:
        v.unsupported(rr.child("apiGroup"), ref.get("apiGroup") or "", (_RBAC_GROUP,))
    kinds = ("ClusterRole",) if cluster else ("ClusterRole", "Role")
    if ref.get("kind") not in kinds:
        v.unsupported(rr.child("kind"), ref.get("kind") or "", kinds)
    if not ref.get("name"):
        v.required(rr.child("name"))
    sp = Path("subjects")
    for i, s in enumerate(v.sequence(sp, raw.get("subjects"))):
        p = sp.index(i)
        s = v.mapping(p, s)
        if not s.get("name"):
            v.required(p.child("name"))
        kind = s.get("kind")
        if kind == "ServiceAccount":
            if s.get("apiGroup"):
                v.unsupported(p.child("apiGroup"), s.get("apiGroup"), ("",))
            if cluster and not s.get("namespace"):
                v.required(p.child("namespace"))
        elif kind in ("User", "Group"):
            if s.get("apiGroup") != _RBAC_GROUP:
                v.unsupported(p.child("apiGroup"), s.get("apiGroup") or "", (_RBAC_GROUP,))
        else:
            v.unsupported(p.child("kind"), kind or "", ("Group", "ServiceAccount", "User"))


def _role_binding(v: _V, raw: dict[str, Any]) -> None:
    _binding(v, raw, False)


def _cluster_role_binding(v: _V, raw: dict[str, Any]) -> None:
    _binding(v, raw, True)


def _crd(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    v.errors.extend(validate_crd(raw))


def validate_metadata(raw: dict[str, Any], namespaced: bool) -> list[FieldError]:
    """The errors of an object's metadata alone (names as DNS subdomains), for kinds validated
    elsewhere (custom resources)."""
    v = _V()
    _metadata(v, raw, namespaced)
    return v.errors
# ---------------------------------------------------------------- batch/v1 (pkg/apis/batch/validation)

_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_MAX_INDEXED_COMPLETIONS = 100_000


def _pod_template(v: _V, path: Path, tpl: Any) -> dict[str, Any]:
    """A PodTemplateSpec: its metadata's labels and annotations, and its spec as a pod's."""
    tpl = v.mapping(path, tpl)
    md = tpl.get("metadata")
    inner = _V()
    _pod(inner, {"metadata": {**(md if isinstance(md, dict) else {}), "name": "template"},
                 "spec": tpl.get("spec")})
    for e in inner.errors:
        v.errors.append(FieldError(f"{path}.{e.path}" if e.path else str(path), e.message, e.reason))
    return tpl


def _pod_failure_policy(v: _V, path: Path, pfp: Any, per_index: bool) -> None:
    pfp = v.mapping(path, pfp)
    rules = v.sequence(path.child("rules"), pfp.get("rules"))
    if len(rules) > 20:
        v.add(path.child("rules"), f"Too many: {len(rules)}: must have at most 20 items", "FieldValueTooMany")
    for i, r in enumerate(rules):
        rp = path.child("rules").index(i)
        r = v.mapping(rp, r)
        action = r.get("action")
        if action not in _POD_FAILURE_ACTIONS:
            v.unsupported(rp.child("action"), action, _POD_FAILURE_ACTIONS)
        elif action == "FailIndex" and not per_index:
            v.forbidden(rp.child("action"), "requires the backoffLimitPerIndex to be set")
        codes, conds = r.get("onExitCodes"), r.get("onPodConditions")
        if codes is not None and conds is not None:
            v.invalid(rp, "rule", "specifying both OnExitCodes and OnPodConditions is not supported")
        elif codes is None and conds is None:
            v.add(rp, "Required value: specifying one of OnExitCodes and OnPodConditions is required",
                  "FieldValueRequired")
        if codes is not None:
            cp = rp.child("onExitCodes")
            codes = v.mapping(cp, codes)
            op = codes.get("operator")
            if op not in ("In", "NotIn"):
                v.unsupported(cp.child("operator"), op, ("In", "NotIn"))
            values = v.sequence(cp.child("values"), codes.get("values"))
            if not values:
                v.add(cp.child("values"), "Required value: at least one value is required", "FieldValueRequired")
            if len(values) > 255:
                v.add(cp.child("values"), f"Too many: {len(values)}: must have at most 255 items",
                      "FieldValueTooMany")
            prev: int | None = None
            seen: set[int] = set()
            for j, x in enumerate(values):
                xp = cp.child("values").index(j)
                if isinstance(x, bool) or not isinstance(x, int):
                    v.invalid(xp, x, "must be an integer")
                    continue
                if x in seen:
                    v.add(xp, f"Duplicate value: {x}", "FieldValueDuplicate")
                elif prev is not None and x < prev:
                    v.invalid(xp, x, "must be ordered")
                if op == "In" and x == 0:
                    v.invalid(xp, x, "must not be 0 for the In operator")
                seen.add(x)
                prev = x
        for j, c in enumerate(v.sequence(rp.child("onPodConditions"), conds)):
            cp = rp.child("onPodConditions").index(j)
            c = v.mapping(cp, c)
            v.string(cp.child("type"), c.get("type"), required=True)
            st = c.get("status", "True")
            if st not in ("True", "False", "Unknown"):
                v.unsupported(cp.child("status"), st, ("True", "False", "Unknown"))


def _job_spec(v: _V, sp: Path, spec: dict[str, Any]) -> None:
    """validateJobSpec: what a Job's spec and a CronJob's jobTemplate.spec share."""
    v.integer(sp.child("parallelism"), spec.get("parallelism"), 0)
    completions = v.integer(sp.child("completions"), spec.get("completions"), 0)
    v.integer(sp.child("activeDeadlineSeconds"), spec.get("activeDeadlineSeconds"), 0)
    v.integer(sp.child("backoffLimit"), spec.get("backoffLimit"), 0)
    v.integer(sp.child("ttlSecondsAfterFinished"), spec.get("ttlSecondsAfterFinished"), 0)
    per_index = v.integer(sp.child("backoffLimitPerIndex"), spec.get("backoffLimitPerIndex"), 0)
    max_failed = v.integer(sp.child("maxFailedIndexes"), spec.get("maxFailedIndexes"), 0)
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        v.unsupported(sp.child("completionMode"), mode, ("NonIndexed", "Indexed"))
    indexed = mode == "Indexed"
    if indexed:
        if spec.get("completions") is None:
            v.add(sp.child("completions"), "Required value: when completion mode is Indexed", "FieldValueRequired")
        elif completions is not None and completions > _MAX_INDEXED_COMPLETIONS:
            v.invalid(sp.child("completions"), completions,
                      f"must be less than or equal to {_MAX_INDEXED_COMPLETIONS} when completion mode is Indexed")
        par = spec.get("parallelism")
        if isinstance(par, int) and par > _MAX_INDEXED_COMPLETIONS:
            v.invalid(sp.child("parallelism"), par,
                      f"must be less than or equal to {_MAX_INDEXED_COMPLETIONS} when completion mode is Indexed")
    if per_index is not None and not indexed:
        v.add(sp.child("backoffLimitPerIndex"), "Forbidden: requires indexed completion mode", "FieldValueForbidden")
    if max_failed is not None and per_index is None:
        v.add(sp.child("backoffLimitPerIndex"), "Required value: when maxFailedIndexes is specified",
              "FieldValueRequired")
    prp = spec.get("podReplacementPolicy")
    if prp is not None:
        if prp not in ("Failed", "TerminatingOrFailed"):
            v.unsupported(sp.child("podReplacementPolicy"), prp, ("Failed", "TerminatingOrFailed"))
        elif prp != "Failed" and spec.get("podFailurePolicy") is not None:
            v.unsupported(sp.child("podReplacementPolicy"), prp, ("Failed",))
    if spec.get("podFailurePolicy") is not None:
        _pod_failure_policy(v, sp.child("podFailurePolicy"), spec["podFailurePolicy"], per_index is not None)
    if spec.get("template") is None:
        v.required(sp.child("template"))
        return
    tpl = _pod_template(v, sp.child("template"), spec.get("template"))
    tspec = tpl.get("spec") if isinstance(tpl.get("spec"), dict) else {}
    rp = tspec.get("restartPolicy") or "Always"
    rpp = sp.child("template").child("spec").child("restartPolicy")
    if rp not in _JOB_RESTART_POLICIES:
        v.unsupported(rpp, rp, _JOB_RESTART_POLICIES)
    elif rp == "OnFailure" and spec.get("podFailurePolicy") is not None:
        v.invalid(rpp, rp, 'only "Never" is supported when podFailurePolicy is specified')


def _job(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = raw.get("spec")
    if spec is None:
        v.required(sp)
        return
    spec = v.mapping(sp, spec)
    _job_spec(v, sp, spec)
    sel = spec.get("selector")
    if sel is None:
        # Without manualSelector the API server generates it (a manifest has none yet).
        if spec.get("manualSelector"):
            v.required(sp.child("selector"))
        return
    _label_selector(v, sp.child("selector"), sel)
    tpl = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    tmd = tpl.get("metadata") if isinstance(tpl.get("metadata"), dict) else {}
    labels = tmd.get("labels") if isinstance(tmd.get("labels"), dict) else {}
    if isinstance(sel, dict) and not _selector_matches(sel, labels):
        v.invalid(sp.child("template").child("metadata").child("labels"), labels,
                  "`selector` does not match template `labels`")
    md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    mode = spec.get("completionMode")
    completions = spec.get("completions")
    if mode == "Indexed" and isinstance(completions, int) and completions > 0 and md.get("name"):
        host = f"{md['name']}-{completions - 1}"
        if len(host) > 63 or not _DNS1123_LABEL.match(host):
            v.invalid(Path("metadata.name"), md["name"],
                      f"will not able to create pod with invalid DNS label: {host}")


def _selector_matches(sel: dict[str, Any], labels: dict[str, Any]) -> bool:
    """metav1.LabelSelectorAsSelector(sel).Matches(labels); a malformed selector matches (its own
    errors are reported where it is validated)."""
    try:
        return LabelSelector.from_dict(sel).matches(labels)
    except (TypeError, ValueError, AttributeError):
        return True


def _cronjob(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    name = md.get("name")
    if isinstance(name, str) and len(name) > 52:
        v.invalid(Path("metadata.name"), name, "must be no more than 52 characters")
    sp = Path("spec")
    spec = raw.get("spec")
    if spec is None:
        v.required(sp)
        return
    spec = v.mapping(sp, spec)
    schedule = v.string(sp.child("schedule"), spec.get("schedule"), required=True)
    if schedule:
        try:
            parse_standard(schedule)
        except CronError as e:
            v.invalid(sp.child("schedule"), schedule, str(e))
        if "TZ" in schedule:
            v.invalid(sp.child("schedule"), schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field "
                                                      "instead")
    tz = spec.get("timeZone")
    if tz is not None:
        tzp = sp.child("timeZone")
        if not isinstance(tz, str) or tz == "":
            v.invalid(tzp, tz, "timeZone must be nil or non-empty string")
        elif tz.lower() == "local":
            v.invalid(tzp, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")
        elif any(p in (".", "..") or p.startswith("-") or not re.fullmatch(r"[A-Za-z.\-_0-9+]{1,14}", p)
                 for p in tz.split("/")):
            v.invalid(tzp, tz, f"unknown time zone {tz}")
        else:
            try:
                load_location(tz)
            except CronError as e:
                v.invalid(tzp, tz, str(e))
    v.integer(sp.child("startingDeadlineSeconds"), spec.get("startingDeadlineSeconds"), 0)
    cp = spec.get("concurrencyPolicy", "Allow")
    if cp in ("", None):
        v.required(sp.child("concurrencyPolicy"))
    elif cp not in ("Allow", "Forbid", "Replace"):
        v.unsupported(sp.child("concurrencyPolicy"), cp, ("Allow", "Forbid", "Replace"))
    v.integer(sp.child("successfulJobsHistoryLimit"), spec.get("successfulJobsHistoryLimit"), 0)
    v.integer(sp.child("failedJobsHistoryLimit"), spec.get("failedJobsHistoryLimit"), 0)
    jt = sp.child("jobTemplate")
    if spec.get("jobTemplate") is None:
        v.required(jt)
        return
    tmpl = v.mapping(jt, spec.get("jobTemplate"))
    tmd = tmpl.get("metadata")
    if tmd is not None:
        tmd = v.mapping(jt.child("metadata"), tmd)
        _labels(v, jt.child("metadata").child("labels"), tmd.get("labels"))
    jsp = jt.child("spec")
    jspec = v.mapping(jsp, tmpl.get("spec"))
    _job_spec(v, jsp, jspec)
    if jspec.get("selector") is not None:
        v.invalid(jsp.child("selector"), jspec["selector"], "`selector` will be auto-generated")
    if jspec.get("manualSelector"):
        v.unsupported(jsp.child("manualSelector"), jspec["manualSelector"], ("nil", "false"))
# ---------------------------------------------------------------- apps/v1 (pkg/apis/apps/validation)

_PERCENT_MSG = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
                "'93%', regex used for validation is '[0-9]+%')")


def _positive_int_or_percent(v: _V, path: Path, x: Any) -> int | None:
    """ValidatePositiveIntOrPercent; the value (a percentage's number), or None when invalid/absent."""
    if x is None:
        return None
    if isinstance(x, bool):
        v.invalid(path, x, "must be an integer or percentage")
        return None
    if isinstance(x, int):
        if x < 0:
            v.invalid(path, x, "must be greater than or equal to 0")
            return None
        return x
    if isinstance(x, str):
        m = re.fullmatch(r"([0-9]+)%", x)
        if not m:
            v.invalid(path, x, _PERCENT_MSG)
            return None
        return int(m.group(1))
    v.invalid(path, x, "must be an integer or percentage")
    return None


def _not_more_than_100_percent(v: _V, path: Path, x: Any) -> None:
    if isinstance(x, str):
        m = re.fullmatch(r"([0-9]+)%", x)
        if m and int(m.group(1)) > 100:
            v.invalid(path, x, "must not be greater than 100%")


def _workload_selector(v: _V, sp: Path, spec: dict[str, Any], what: str) -> dict[str, Any] | None:
    """spec.selector: required, valid, not empty; the selector when it can be matched."""
    sel = spec.get("selector")
    if sel is None:
        v.required(sp.child("selector"))
        return None
    if not isinstance(sel, dict):
        v.invalid(sp.child("selector"), sel, "must be an object")
        return None
    before = len(v.errors)
    _label_selector(v, sp.child("selector"), sel)
    if not (sel.get("matchLabels") or sel.get("matchExpressions")):
        v.invalid(sp.child("selector"), sel, f"empty selector is invalid for {what}")
        return None
    return sel if len(v.errors) == before else None


def _selector_matches(sel: dict[str, Any], labels: dict[str, Any]) -> bool:
    for k, val in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != val:
            return False
    for e in sel.get("matchExpressions") or ():
        key, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _workload_template(v: _V, sp: Path, spec: dict[str, Any], sel: dict[str, Any] | None, what: str) -> None:
    """The pod template of a workload (ValidatePodTemplateSpecForReplicaSet and the like): labels
    matching the selector, a valid pod spec, restartPolicy Always, no activeDeadlineSeconds."""
    tp = sp.child("template")
    tpl = spec.get("template")
    if tpl is None:
        v.required(tp)
        return
    tpl = v.mapping(tp, tpl)
    md = v.mapping(tp.child("metadata"), tpl.get("metadata"))
    labels = md.get("labels")
    _labels(v, tp.child("metadata").child("labels"), labels)
    if sel is not None and not _selector_matches(sel, labels if isinstance(labels, dict) else {}):
        v.invalid(tp.child("metadata").child("labels"), labels if isinstance(labels, dict) else {},
                  "`selector` does not match template `labels`")
    ann = v.mapping(tp.child("metadata").child("annotations"), md.get("annotations"))
    for k, val in ann.items():
        if not isinstance(val, str):
            v.invalid(tp.child("metadata").child("annotations").key(str(k)), val, "annotation values must be strings")
    _pod_spec(v, tp.child("spec"), tpl.get("spec"))
    pspec = tpl.get("spec")
    if isinstance(pspec, dict):
        rp = pspec.get("restartPolicy")
        if rp is not None and rp != "Always":
            v.unsupported(tp.child("spec").child("restartPolicy"), rp, ("Always",))
        if pspec.get("activeDeadlineSeconds") is not None:
            v.forbidden(tp.child("spec").child("activeDeadlineSeconds"),
                        f"activeDeadlineSeconds in {what} is not Supported")


def _deployment(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    v.integer(sp.child("replicas"), spec.get("replicas"), 0)
    sel = _workload_selector(v, sp, spec, "deployment")
    _workload_template(v, sp, spec, sel, "ReplicaSet")
    stp = sp.child("strategy")
    strategy = v.mapping(stp, spec.get("strategy"))
    stype = strategy.get("type", "RollingUpdate")
    ru = strategy.get("rollingUpdate")
    if stype == "Recreate":
        if ru is not None:
            v.forbidden(stp.child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")
    elif stype == "RollingUpdate":
        rp = stp.child("rollingUpdate")
        ru = v.mapping(rp, ru)
        mu = _positive_int_or_percent(v, rp.child("maxUnavailable"), ru.get("maxUnavailable"))
        ms = _positive_int_or_percent(v, rp.child("maxSurge"), ru.get("maxSurge"))
        if "maxUnavailable" in ru and "maxSurge" in ru and mu == 0 and ms == 0:
            v.invalid(rp.child("maxUnavailable"), ru.get("maxUnavailable"), "may not be 0 when `maxSurge` is 0")
        _not_more_than_100_percent(v, rp.child("maxUnavailable"), ru.get("maxUnavailable"))
    else:
        v.unsupported(stp.child("type"), stype, ("Recreate", "RollingUpdate"))
    mrs = v.integer(sp.child("minReadySeconds"), spec.get("minReadySeconds"), 0)
    v.integer(sp.child("revisionHistoryLimit"), spec.get("revisionHistoryLimit"), 0)
    pds = v.integer(sp.child("progressDeadlineSeconds"), spec.get("progressDeadlineSeconds"), 0)
    if pds is not None and pds <= (mrs or 0):
        v.invalid(sp.child("progressDeadlineSeconds"), pds, "must be greater than minReadySeconds")


def _replicaset(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    v.integer(sp.child("replicas"), spec.get("replicas"), 0)
    v.integer(sp.child("minReadySeconds"), spec.get("minReadySeconds"), 0)
    sel = _workload_selector(v, sp, spec, "replicaset")
    _workload_template(v, sp, spec, sel, "ReplicaSet")


def _statefulset(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    pmp = spec.get("podManagementPolicy")
    if pmp is not None and pmp not in ("OrderedReady", "Parallel"):
        v.invalid(sp.child("podManagementPolicy"), pmp, "must be 'OrderedReady' or 'Parallel'")
    usp = sp.child("updateStrategy")
    us = v.mapping(usp, spec.get("updateStrategy"))
    utype = us.get("type", "RollingUpdate")
    if utype == "OnDelete":
        if us.get("rollingUpdate") is not None:
            v.invalid(usp.child("rollingUpdate"), us.get("rollingUpdate"), "only allowed for updateStrategy 'RollingUpdate'")
    elif utype == "RollingUpdate":
        ru = v.mapping(usp.child("rollingUpdate"), us.get("rollingUpdate"))
        v.integer(usp.child("rollingUpdate").child("partition"), ru.get("partition"), 0)
        if ru.get("maxUnavailable") is not None:
            mu = _positive_int_or_percent(v, usp.child("rollingUpdate").child("maxUnavailable"), ru["maxUnavailable"])
            if mu == 0:
                v.invalid(usp.child("rollingUpdate").child("maxUnavailable"), ru["maxUnavailable"],
                          "must be greater than 0")
            _not_more_than_100_percent(v, usp.child("rollingUpdate").child("maxUnavailable"), ru["maxUnavailable"])
    else:
        v.invalid(usp, utype, "must be 'RollingUpdate' or 'OnDelete'")
    pp = sp.child("persistentVolumeClaimRetentionPolicy")
    policy = v.mapping(pp, spec.get("persistentVolumeClaimRetentionPolicy"))
    for f in ("whenDeleted", "whenScaled"):
        pv = policy.get(f)
        if pv is not None and pv not in ("Retain", "Delete"):
            v.unsupported(pp.child(f), pv, ("Retain", "Delete"))
    ordinals = v.mapping(sp.child("ordinals"), spec.get("ordinals"))
    v.integer(sp.child("ordinals.start"), ordinals.get("start"), 0)
    v.integer(sp.child("replicas"), spec.get("replicas"), 0)
    v.integer(sp.child("minReadySeconds"), spec.get("minReadySeconds"), 0)
    v.integer(sp.child("revisionHistoryLimit"), spec.get("revisionHistoryLimit"), 0)
    sel = _workload_selector(v, sp, spec, "statefulset")
    _workload_template(v, sp, spec, sel, "StatefulSet")
    sn = spec.get("serviceName")
    if sn not in (None, "") and (not isinstance(sn, str) or len(sn) > 63 or not _DNS1123_LABEL.match(sn)):
        v.invalid(sp.child("serviceName"), sn, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                               "characters or '-', and must start and end with an alphanumeric "
                                               "character")
    vp = sp.child("volumeClaimTemplates")
    seen: set[str] = set()
    for i, t in enumerate(v.sequence(vp, spec.get("volumeClaimTemplates"))):
        tp = vp.index(i)
        t = v.mapping(tp, t)
        tmd = v.mapping(tp.child("metadata"), t.get("metadata"))
        tname = v.string(tp.child("metadata").child("name"), tmd.get("name"), required=True)
        if tname:
            if len(tname) > 253 or not _DNS1123_SUBDOMAIN.match(tname):
                v.invalid(tp.child("metadata").child("name"), tname, "a lowercase RFC 1123 subdomain must consist "
                                                                     "of lower case alphanumeric characters, '-' or "
                                                                     "'.', and must start and end with an "
                                                                     "alphanumeric character")
            if tname in seen:
                v.add(tp.child("metadata").child("name"), f'Duplicate value: "{tname}"', "FieldValueDuplicate")
            seen.add(tname)
        _labels(v, tp.child("metadata").child("labels"), tmd.get("labels"))
        _pvc_spec(v, tp.child("spec"), t.get("spec"))


def _daemonset(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    sp = Path("spec")
    spec = v.mapping(sp, raw.get("spec"))
    sel = _workload_selector(v, sp, spec, "daemonset")
    _workload_template(v, sp, spec, sel, "DaemonSet")
    v.integer(sp.child("minReadySeconds"), spec.get("minReadySeconds"), 0)
    v.integer(sp.child("revisionHistoryLimit"), spec.get("revisionHistoryLimit"), 0)
    usp = sp.child("updateStrategy")
    us = v.mapping(usp, spec.get("updateStrategy"))
    utype = us.get("type", "RollingUpdate")
    if utype == "RollingUpdate":
        rp = usp.child("rollingUpdate")
        ru = v.mapping(rp, us.get("rollingUpdate"))
        mu = _positive_int_or_percent(v, rp.child("maxUnavailable"), ru.get("maxUnavailable", 1))
        ms = _positive_int_or_percent(v, rp.child("maxSurge"), ru.get("maxSurge", 0))
        _not_more_than_100_percent(v, rp.child("maxUnavailable"), ru.get("maxUnavailable"))
        _not_more_than_100_percent(v, rp.child("maxSurge"), ru.get("maxSurge"))
        if mu and ms:
            v.invalid(rp.child("maxSurge"), ru.get("maxSurge"), "may not be set when maxUnavailable is non-zero")
        elif mu == 0 and ms == 0:
            v.add(rp.child("maxUnavailable"), "Required value: cannot be 0 when maxSurge is 0", "FieldValueRequired")
    elif utype != "OnDelete":
        v.unsupported(usp.child("type"), utype, ("OnDelete", "RollingUpdate"))


def _controller_revision(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    v.integer(Path("revision"), raw.get("revision"), 0)


# ------------------------------------------ admissionregistration.k8s.io/v1 (pkg/apis/admissionregistration/validation)
# ValidateValidatingWebhookConfiguration as on create; allowed values sorted as upstream lists them.

_WEBHOOK_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_WEBHOOK_SCOPES = ("*", "Cluster", "Namespaced")
_WEBHOOK_FAILURE_POLICIES = ("Fail", "Ignore")
_WEBHOOK_MATCH_POLICIES = ("Equivalent", "Exact")
_WEBHOOK_NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_ADMISSION_REVIEW_VERSIONS = ("v1", "v1beta1")
_URL_FORM = "; desired format: https://host[/path]"


def _strings(v: _V, path: Path, x: Any) -> list[str]:
    out = []
    for i, s in enumerate(v.sequence(path, x)):
        if isinstance(s, str):
            out.append(s)
        else:
            v.invalid(path.index(i), s, "must be a string")
    return out


def _webhook_resources(v: _V, path: Path, resources: list[str]) -> None:
    if not resources:
        v.required(path)
    wildcard_sub: set[str] = set()  # x/*
    wildcard_res: set[str] = set()  # */x
    double = single = plain = False
    for i, rs in enumerate(resources):
        if rs == "":
            v.required(path.index(i))
            continue
        double = double or rs == "*/*"
        single = single or rs == "*"
        res, slash, sub = rs.partition("/")
        if not slash:
            plain = rs != "*"
            continue
        if res in wildcard_sub:
            v.invalid(path.index(i), rs, f"if '{res}/*' is present, must not specify {rs}")
        if sub in wildcard_res:
            v.invalid(path.index(i), rs, f"if '*/{sub}' is present, must not specify {rs}")
        if sub == "*":
            wildcard_sub.add(res)
        if res == "*":
            wildcard_res.add(sub)
    if len(resources) > 1 and double:
        v.invalid(path, resources, "if '*/*' is present, must not specify other resources")
    if single and plain:
        v.invalid(path, resources, "if '*' is present, must not specify other resources without subresources")


def _webhook_rule(v: _V, path: Path, rule: Any) -> None:
    rule = v.mapping(path, rule)
    ops = _strings(v, path.child("operations"), rule.get("operations"))
    if not ops:
        v.required(path.child("operations"))
    if len(ops) > 1 and "*" in ops:
        v.invalid(path.child("operations"), ops, "if '*' is present, must not specify other operations")
    for i, op in enumerate(ops):
        if op not in _WEBHOOK_OPERATIONS:
            v.unsupported(path.child("operations").index(i), op, _WEBHOOK_OPERATIONS)
    versions: list[str] = []
    for field, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        vals = _strings(v, path.child(field), rule.get(field))
        if not vals:
            v.required(path.child(field))
        if len(vals) > 1 and "*" in vals:
            v.invalid(path.child(field), vals, f"if '*' is present, must not specify other {what}")
        versions = vals
    for i, ver in enumerate(versions):
        if ver == "":
            v.required(path.child("apiVersions").index(i))
    _webhook_resources(v, path.child("resources"), _strings(v, path.child("resources"), rule.get("resources")))
    scope = rule.get("scope")
    if scope is not None and scope not in _WEBHOOK_SCOPES:
        v.unsupported(path.child("scope"), scope, _WEBHOOK_SCOPES)


def _webhook_url(v: _V, path: Path, url: Any) -> None:
    if not isinstance(url, str):
        v.invalid(path, url, "must be a string")
        return
    try:
        u = urlsplit(url)
        host = u.hostname
    except ValueError as e:
        v.add(path, f"Required value: url must be a valid URL: {e}{_URL_FORM}", "FieldValueRequired")
        return
    if u.scheme != "https":
        v.invalid(path, u.scheme, "'https' is the only allowed URL scheme" + _URL_FORM)
    if not u.netloc.rpartition("@")[2] or host is None:
        v.invalid(path, u.netloc.rpartition("@")[2], "host must be provided" + _URL_FORM)
    if "@" in u.netloc:
        v.invalid(path, u.netloc.rpartition("@")[0], "user information is not permitted in the URL")
    if u.fragment:
        v.invalid(path, u.fragment, "fragments are not permitted in the URL")
    if u.query:
        v.invalid(path, u.query, "query parameters are not permitted in the URL")


def _webhook_service(v: _V, path: Path, svc: Any) -> None:
    svc = v.mapping(path, svc)
    for field in ("name", "namespace"):
        if not svc.get(field):
            v.add(path.child(field), f"Required value: service {field} is required", "FieldValueRequired")
        elif not isinstance(svc[field], str):
            v.invalid(path.child(field), svc[field], "must be a string")
    port = v.integer(path.child("port"), svc.get("port"))
    if port is not None and not 1 <= port <= 65535:
        v.invalid(path.child("port"), port, "port is not valid: must be between 1 and 65535, inclusive")
    url_path = svc.get("path")
    if url_path is None or url_path in ("", "/"):
        return
    if not isinstance(url_path, str):
        v.invalid(path.child("path"), url_path, "must be a string")
        return
    if url_path == "//":
        v.invalid(path.child("path"), url_path, "segment[0] may not be empty")
        return
    if not url_path.startswith("/"):
        v.invalid(path.child("path"), url_path, "must start with a '/'")
    check = url_path[1:]
    if check.endswith("/"):
        check = check[:-1]
    for i, step in enumerate(check.split("/")):
        if not step:
            v.invalid(path.child("path"), url_path, f"segment[{i}] may not be empty")
        elif len(step) > 253 or not _DNS1123_SUBDOMAIN.match(step):
            v.invalid(path.child("path"), url_path, f"segment[{i}]: a lowercase RFC 1123 subdomain must consist of "
                                                    "lower case alphanumeric characters, '-' or '.', and must start "
                                                    "and end with an alphanumeric character")


def _validating_webhook(v: _V, path: Path, hook: dict[str, Any]) -> None:
    name = hook.get("name")
    if not name:
        v.required(path.child("name"))
    elif not isinstance(name, str):
        v.invalid(path.child("name"), name, "must be a string")
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        _name(v, path.child("name"), name, "subdomain")
    elif len(name.split(".")) < 3:
        v.invalid(path.child("name"), name, "should be a domain with at least three segments separated by dots")
    for i, rule in enumerate(v.sequence(path.child("rules"), hook.get("rules"))):
        _webhook_rule(v, path.child("rules").index(i), rule)
    for field, allowed in (("failurePolicy", _WEBHOOK_FAILURE_POLICIES), ("matchPolicy", _WEBHOOK_MATCH_POLICIES)):
        if hook.get(field) is not None and hook[field] not in allowed:
            v.unsupported(path.child(field), hook[field], allowed)
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        v.add(path.child("sideEffects"), "Required value: must specify one of None, NoneOnDryRun", "FieldValueRequired")
    elif side_effects not in _WEBHOOK_NO_SIDE_EFFECTS:
        v.unsupported(path.child("sideEffects"), side_effects, _WEBHOOK_NO_SIDE_EFFECTS)
    timeout = v.integer(path.child("timeoutSeconds"), hook.get("timeoutSeconds"))
    if timeout is not None and not 1 <= timeout <= 30:
        v.invalid(path.child("timeoutSeconds"), timeout, "the timeout value must be between 1 and 30 seconds")
    _label_selector(v, path.child("namespaceSelector"), hook.get("namespaceSelector"))
    _label_selector(v, path.child("objectSelector"), hook.get("objectSelector"))
    cp = path.child("clientConfig")
    cc = v.mapping(cp, hook.get("clientConfig"))
    if (cc.get("url") is None) == (cc.get("service") is None):
        v.add(cp, "Required value: exactly one of url or service is required", "FieldValueRequired")
    elif cc.get("url") is not None:
        _webhook_url(v, cp.child("url"), cc["url"])
    else:
        _webhook_service(v, cp.child("service"), cc["service"])
    mp = path.child("matchConditions")
    conditions = v.sequence(mp, hook.get("matchConditions"))
    if len(conditions) > 64:
        v.add(mp, f"Too many: {len(conditions)}: must have at most 64 items", "FieldValueTooMany")
    seen: set[str] = set()
    for i, mc in enumerate(conditions):
        p = mp.index(i)
        mc = v.mapping(p, mc)
        cname = mc.get("name")
        if not cname:
            v.required(p.child("name"))
        elif not isinstance(cname, str) or (msg := _qualified_name_errors(cname)):
            v.invalid(p.child("name"), cname, msg if isinstance(cname, str) and msg else "must be a string")
        elif cname in seen:
            v.add(p.child("name"), f'Duplicate value: "{cname}"', "FieldValueDuplicate")
        else:
            seen.add(cname)
        if not mc.get("expression"):
            v.required(p.child("expression"))


def _admission_review_versions(v: _V, path: Path, versions: Any) -> None:
    vals = _strings(v, path, versions)
    if not vals:
        v.add(path, "Required value: must specify one of v1, v1beta1", "FieldValueRequired")
        return
    seen: set[str] = set()
    for i, ver in enumerate(vals):
        if ver in seen:
            v.invalid(path.index(i), ver, "duplicate version")
            continue
        seen.add(ver)
        _name(v, path.index(i), ver, "dns1035")
    if not seen & set(_ADMISSION_REVIEW_VERSIONS):
        v.invalid(path, vals, "must include at least one of v1, v1beta1")


def _validating_webhook_configuration(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    names: set[str] = set()
    wp = Path("webhooks")
    for i, hook in enumerate(v.sequence(wp, raw.get("webhooks"))):
        p = wp.index(i)
        hook = v.mapping(p, hook)
        _validating_webhook(v, p, hook)
        _admission_review_versions(v, p.child("admissionReviewVersions"), hook.get("admissionReviewVersions"))
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in names:
                v.add(p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
            names.add(name)


_VALIDATORS: dict[str, Callable[[_V, dict[str, Any]], None]] = {
    "Pod": _pod,
    "Node": _node,
    "Namespace": _namespace,
    "PriorityClass": _priority_class,
    "PodDisruptionBudget": _pdb,
    "PersistentVolume": _pv,
    "PersistentVolumeClaim": _pvc,
    "StorageClass": _storage_class,
    "CSINode": _csinode,
    "Lease": _lease,
    "Event": _event,
    "Job": _job,
    "CronJob": _cronjob,
    "Deployment": _deployment,
    "ReplicaSet": _replicaset,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
    "ControllerRevision": _controller_revision,
}
_VALIDATORS.update({
    "Service": _service,
    "EndpointSlice": _endpoint_slice,
    "ConfigMap": _config_map,
    "Secret": _secret,
    "ServiceAccount": _service_account,
    "LimitRange": _limit_range,
    "ResourceQuota": _resource_quota,
    "RuntimeClass": _runtime_class,
    "Role": _role,
    "ClusterRole": _cluster_role,
    "RoleBinding": _role_binding,
    "ClusterRoleBinding": _cluster_role_binding,
    "CustomResourceDefinition": _crd,
    "ValidatingWebhookConfiguration": _validating_webhook_configuration,
})


def register_validator(kind: str, fn: Callable[[_V, dict[str, Any]], None]) -> None:
    """Add a kind's validator (a second one for a kind runs after the first: the pod's DRA
    fields are checked by :mod:`ksched.api.resource_validation`)."""
    prev = _VALIDATORS.get(kind)
    if prev is None:
        _VALIDATORS[kind] = fn
        return

    def both(v: _V, raw: dict[str, Any]) -> None:
        prev(v, raw)
        fn(v, raw)

    _VALIDATORS[kind] = both


def validate(raw: Any) -> list[FieldError]:
    """Every validation error in a manifest (empty when valid)."""
    v = _V()
    if not isinstance(raw, dict):
        v.add("", f"expected an object, got {type(raw).__name__}")
        return v.errors
    kind = raw.get("kind")
    if not kind:
        v.required("kind")
        return v.errors
    fn = _VALIDATORS.get(kind) if isinstance(kind, str) else None
    if fn is None:
        v.add("kind", f"Unsupported value: {_show(kind)}", "FieldValueNotSupported")
        return v.errors
    try:
        fn(v, raw)
    except Exception as e:  # a validator must never crash on odd input; report instead
        v.add("", f"internal validation error: {type(e).__name__}: {e}")
    return v.errors


_SELECTOR_IMMUTABLE = ("Deployment", "ReplicaSet", "DaemonSet")
_STATEFULSET_MUTABLE_SPEC = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                             "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def validate_update(raw: Any, old_raw: dict[str, Any]) -> list[FieldError]:
    """What an update may not change (upstream's ``Validate*Update`` beyond the object's own
    validation): the selectors of apps/v1 workloads, a StatefulSet's spec other than its mutable
    fields, a ControllerRevision's data."""
    v = _V()
    if not isinstance(raw, dict):
        return v.errors
    kind = raw.get("kind")
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
    old_spec = old_raw.get("spec") if isinstance(old_raw.get("spec"), dict) else {}
    if kind in _SELECTOR_IMMUTABLE and spec.get("selector") != old_spec.get("selector"):
        v.invalid(Path("spec.selector"), spec.get("selector"), "field is immutable")
    elif kind == "StatefulSet":
        rest = {k: val for k, val in spec.items() if k not in _STATEFULSET_MUTABLE_SPEC}
        old_rest = {k: val for k, val in old_spec.items() if k not in _STATEFULSET_MUTABLE_SPEC}
        if rest != old_rest:
            v.forbidden(Path("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                      "'template', 'updateStrategy', 'revisionHistoryLimit', "
                                      "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")
    elif kind == "ControllerRevision" and raw.get("data") != old_raw.get("data"):
        v.invalid(Path("data"), raw.get("data"), "field is immutable")
    return v.errors
