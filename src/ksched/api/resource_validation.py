"""Validation of the ``resource.k8s.io/v1`` kinds and of the pod's DRA fields, as the apiserver
does it (``pkg/apis/resource/validation/validation.go``, ``pkg/apis/core/validation``'s
``validatePodResourceClaims``), with upstream's limits and field paths.

Registered with :func:`ksched.api.validation.register_validator` when :mod:`ksched.api.resource`
is imported.

Known divergences: messages name the rule in ksched's words where upstream's are long; update
rules (immutability of a claim's spec, of an allocation once set) are not checked; CEL
expressions are compiled with ksched's environment (:mod:`ksched.api.dracel`), whose compile
errors read differently from cel-go's, and no cost estimate is made.
"""

from __future__ import annotations

import re
from typing import Any

from ksched.api import validation
from ksched.api.dracel import MAX_EXPRESSION_LENGTH, CelError, compile_selector
from ksched.api.errors import Path
from ksched.api.quantity import QuantityError, parse_quantity
from ksched.api.validation import (
    _V,
    _metadata,
    _node_selector_term,
    _qualified_name_errors,
    _remember,
    pod_spec_key,
    register_validator,
)

__all__ = ["register"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_SUBREQUESTS = 8
MAX_TOLERATIONS = 16
MAX_RESULTS = 32
MAX_RESERVED_FOR = 256
MAX_DEVICES = 128
MAX_DEVICES_WITH_EXTRAS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMES_COUNTERS = 2
MAX_BINDING_CONDITIONS = 4
MAX_VALID_VALUES = 10
MAX_DRIVER_NAME = 63
MAX_ID = 32
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_TOLERATION_EFFECTS = ("NoSchedule", "NoExecute")


def _too_many(v: _V, path: Path, n: int, limit: int) -> None:
    v.add(path, f"Too many: {n}: must have at most {limit} items", "FieldValueTooMany")


def _dns_label(v: _V, path: Path, s: str) -> None:
    if len(s) > 63 or not _DNS_LABEL.match(s):
        v.invalid(path, s, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                           "'-', and must start and end with an alphanumeric character")


def _dns_subdomain(v: _V, path: Path, s: str, limit: int = 253) -> None:
    if len(s) > limit or not _DNS_SUBDOMAIN.match(s):
        v.invalid(path, s, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                           "'-' or '.', and must start and end with an alphanumeric character")


def _quantity(v: _V, path: Path, q: Any) -> int | None:
    try:
        return parse_quantity(q).nanos
    except QuantityError as e:
        v.add(path, f'invalid quantity "{e.text}"')
        return None


def _qualified_attribute(v: _V, path: Path, name: Any, full: bool) -> None:
    """A QualifiedName: ``id`` or ``domain/id`` (``full``: the domain is required)."""
    if not isinstance(name, str) or not name:
        v.required(path)
        return
    domain, sep, ident = name.rpartition("/")
    if full and not sep:
        v.invalid(path, name, "must include a domain")
        return
    if sep:
        if not domain:
            v.invalid(path, name, "the domain must not be empty")
        elif len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain):
            v.invalid(path, name, "the domain must be a DNS subdomain of at most 63 characters")
    if not ident:
        v.invalid(path, name, "the ID must not be empty")
    elif len(ident) > MAX_ID or not _C_IDENTIFIER.match(ident):
        v.invalid(path, name, f"the ID must be a C identifier of at most {MAX_ID} characters")


def _selectors(v: _V, path: Path, sels: Any) -> None:
    sels = v.sequence(path, sels)
    if len(sels) > MAX_SELECTORS:
        _too_many(v, path, len(sels), MAX_SELECTORS)
    for i, s in enumerate(sels):
        p = path.index(i)
        cel = v.mapping(p.child("cel"), v.mapping(p, s).get("cel"))
        if not cel:
            v.required(p.child("cel"))
            continue
        ep = p.child("cel").child("expression")
        expr = v.string(ep, cel.get("expression"), required=True)
        if not expr:
            continue
        if len(expr) > MAX_EXPRESSION_LENGTH:
            v.add(ep, f"Too long: may not be more than {MAX_EXPRESSION_LENGTH} bytes", "FieldValueTooLong")
            continue
        try:
            compile_selector(expr)
        except CelError as e:
            v.invalid(ep, expr, f"compilation failed: {e}")


def _opaque_configs(v: _V, path: Path, configs: Any, request_names: set[str] | None) -> None:
    configs = v.sequence(path, configs)
    if len(configs) > MAX_CONFIGS:
        _too_many(v, path, len(configs), MAX_CONFIGS)
    for i, c in enumerate(configs):
        p = path.index(i)
        c = v.mapping(p, c)
        if request_names is not None:
            for j, r in enumerate(v.sequence(p.child("requests"), c.get("requests"))):
                if r not in request_names:
                    v.invalid(p.child("requests").index(j), r, "must be the name of a request in the claim or "
                                                               "the name of a request and a subrequest separated by '/'")
        op = c.get("opaque")
        if op is None:
            v.required(p.child("opaque"))
            continue
        op = v.mapping(p.child("opaque"), op)
        drv = v.string(p.child("opaque").child("driver"), op.get("driver"), required=True)
        if drv:
            _dns_subdomain(v, p.child("opaque").child("driver"), drv, MAX_DRIVER_NAME)
        if op.get("parameters") is None:
            v.required(p.child("opaque").child("parameters"))


def _device_tolerations(v: _V, path: Path, tols: Any) -> None:
    tols = v.sequence(path, tols)
    if len(tols) > MAX_TOLERATIONS:
        _too_many(v, path, len(tols), MAX_TOLERATIONS)
    for i, t in enumerate(tols):
        p = path.index(i)
        t = v.mapping(p, t)
        key = t.get("key") or ""
        if key:
            msg = _qualified_name_errors(key) if isinstance(key, str) else "must be a string"
            if msg:
                v.invalid(p.child("key"), key, msg)
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            v.unsupported(p.child("operator"), op, ("Equal", "Exists"))
        elif op == "Exists" and t.get("value"):
            v.invalid(p.child("value"), t.get("value"), "must be empty for operator `Exists`")
        eff = t.get("effect") or ""
        if eff and eff not in _TOLERATION_EFFECTS:
            v.unsupported(p.child("effect"), eff, _TOLERATION_EFFECTS)
        if t.get("tolerationSeconds") is not None:
            v.integer(p.child("tolerationSeconds"), t.get("tolerationSeconds"))


def _exact_request(v: _V, path: Path, d: Any, sub: bool) -> None:
    d = v.mapping(path, d)
    cls = v.string(path.child("deviceClassName"), d.get("deviceClassName"), required=True)
    if cls:
        _dns_subdomain(v, path.child("deviceClassName"), cls)
    _selectors(v, path.child("selectors"), d.get("selectors"))
    mode = d.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        v.unsupported(path.child("allocationMode"), mode, ("All", "ExactCount"))
    count = d.get("count")
    if count is not None:
        n = v.integer(path.child("count"), count)
        if n is not None and mode == "ExactCount" and n <= 0:
            v.invalid(path.child("count"), n, "must be greater than zero")
        elif n is not None and mode == "All":
            v.invalid(path.child("count"), n, "must not be specified when allocationMode is All")
    if sub and d.get("adminAccess") is not None:
        v.forbidden(path.child("adminAccess"), "not supported in subrequests")
    _device_tolerations(v, path.child("tolerations"), d.get("tolerations"))
    cap = v.mapping(path.child("capacity"), d.get("capacity"))
    for k, q in v.mapping(path.child("capacity").child("requests"), cap.get("requests")).items():
        _qualified_attribute(v, path.child("capacity").child("requests").key(str(k)), k, False)
        n = _quantity(v, path.child("capacity").child("requests").key(str(k)), q)
        if n is not None and n < 0:
            v.invalid(path.child("capacity").child("requests").key(str(k)), q, "must be greater than or equal to 0")


def _claim_spec(v: _V, path: Path, spec: Any) -> None:
    spec = v.mapping(path, spec)
    dp = path.child("devices")
    devices = v.mapping(dp, spec.get("devices"))
    requests = v.sequence(dp.child("requests"), devices.get("requests"))
    if len(requests) > MAX_REQUESTS:
        _too_many(v, dp.child("requests"), len(requests), MAX_REQUESTS)
    names: set[str] = set()
    refs: set[str] = set()
    for i, r in enumerate(requests):
        p = dp.child("requests").index(i)
        r = v.mapping(p, r)
        name = v.string(p.child("name"), r.get("name"), required=True)
        if name:
            _dns_label(v, p.child("name"), name)
            if name in names:
                v.add(p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
            names.add(name)
            refs.add(name)
        ex, fa = r.get("exactly"), r.get("firstAvailable")
        if (ex is None) == (not fa):
            v.add(p, "Required value: exactly one of `exactly` or `firstAvailable` is required"
                  if ex is None else "Invalid value: exactly one of `exactly` or `firstAvailable` may be set",
                  "FieldValueRequired" if ex is None else "FieldValueInvalid")
            continue
        if ex is not None:
            _exact_request(v, p.child("exactly"), ex, False)
            continue
        fa = v.sequence(p.child("firstAvailable"), fa)
        if len(fa) > MAX_SUBREQUESTS:
            _too_many(v, p.child("firstAvailable"), len(fa), MAX_SUBREQUESTS)
        subnames: set[str] = set()
        for j, s in enumerate(fa):
            sp = p.child("firstAvailable").index(j)
            s = v.mapping(sp, s)
            sn = v.string(sp.child("name"), s.get("name"), required=True)
            if sn:
                _dns_label(v, sp.child("name"), sn)
                if sn in subnames:
                    v.add(sp.child("name"), f'Duplicate value: "{sn}"', "FieldValueDuplicate")
                subnames.add(sn)
                refs.add(f"{name}/{sn}")
            _exact_request(v, sp, s, True)
    constraints = v.sequence(dp.child("constraints"), devices.get("constraints"))
    if len(constraints) > MAX_CONSTRAINTS:
        _too_many(v, dp.child("constraints"), len(constraints), MAX_CONSTRAINTS)
    for i, c in enumerate(constraints):
        p = dp.child("constraints").index(i)
        c = v.mapping(p, c)
        for j, r in enumerate(v.sequence(p.child("requests"), c.get("requests"))):
            if r not in refs:
                v.invalid(p.child("requests").index(j), r, "must be the name of a request in the claim or the name "
                                                           "of a request and a subrequest separated by '/'")
        ma, da = c.get("matchAttribute"), c.get("distinctAttribute")
        if (ma is None) == (da is None):
            v.add(p, "Required value: exactly one of `matchAttribute` or `distinctAttribute` is required",
                  "FieldValueRequired")
        else:
            _qualified_attribute(v, p.child("matchAttribute" if ma is not None else "distinctAttribute"),
                                 ma if ma is not None else da, True)
    _opaque_configs(v, dp.child("config"), devices.get("config"), refs)


def _claim_status(v: _V, raw: dict[str, Any]) -> None:
    sp = Path("status")
    st = v.mapping(sp, raw.get("status"))
    alloc = st.get("allocation")
    if alloc:
        alloc = v.mapping(sp.child("allocation"), alloc)
        res = v.sequence(sp.child("allocation").child("devices").child("results"),
                         v.mapping(sp.child("allocation").child("devices"), alloc.get("devices")).get("results"))
        if len(res) > MAX_RESULTS:
            _too_many(v, sp.child("allocation").child("devices").child("results"), len(res), MAX_RESULTS)
        for i, r in enumerate(res):
            p = sp.child("allocation").child("devices").child("results").index(i)
            r = v.mapping(p, r)
            for f in ("request", "driver", "pool", "device"):
                v.string(p.child(f), r.get(f), required=True)
    rf = v.sequence(sp.child("reservedFor"), st.get("reservedFor"))
    if len(rf) > MAX_RESERVED_FOR:
        _too_many(v, sp.child("reservedFor"), len(rf), MAX_RESERVED_FOR)
    uids: set[str] = set()
    for i, r in enumerate(rf):
        p = sp.child("reservedFor").index(i)
        r = v.mapping(p, r)
        uid = v.string(p.child("uid"), r.get("uid"), required=True)
        v.string(p.child("resource"), r.get("resource"), required=True)
        v.string(p.child("name"), r.get("name"), required=True)
        if uid in uids:
            v.add(p.child("uid"), f'Duplicate value: "{uid}"', "FieldValueDuplicate")
        uids.add(uid)
    if rf and not alloc:
        v.forbidden(sp.child("reservedFor"), "may not be specified when `allocated` is not set")


def _resource_claim(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    _claim_spec(v, Path("spec"), raw.get("spec"))
    _claim_status(v, raw)


def _resource_claim_template(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, True)
    spec = v.mapping(Path("spec"), raw.get("spec"))
    _claim_spec(v, Path("spec.spec"), spec.get("spec"))


def _device_class(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    spec = v.mapping(Path("spec"), raw.get("spec"))
    _selectors(v, Path("spec.selectors"), spec.get("selectors"))
    _opaque_configs(v, Path("spec.config"), spec.get("config"), None)
    ern = spec.get("extendedResourceName")
    if ern and (not isinstance(ern, str) or "/" not in ern or _qualified_name_errors(ern) or \
                ern.startswith("kubernetes.io/") or ern.startswith("requests.")):
        v.invalid(Path("spec.extendedResourceName"), ern, "must be a valid extended resource name")


def _capacity(v: _V, path: Path, c: Any, multi: bool) -> None:
    c = v.mapping(path, c)
    value = _quantity(v, path.child("value"), c.get("value")) if c.get("value") is not None else None
    if c.get("value") is None:
        v.required(path.child("value"))
    pol = c.get("requestPolicy")
    if pol is None:
        return
    pp = path.child("requestPolicy")
    if not multi:
        v.forbidden(pp, "allowMultipleAllocations must be true")
        return
    pol = v.mapping(pp, pol)
    default = _quantity(v, pp.child("default"), pol["default"]) if pol.get("default") is not None else None
    vv = v.sequence(pp.child("validValues"), pol.get("validValues"))
    vr = pol.get("validRange")
    if vv and vr is not None:
        v.add(pp, "Invalid value: exactly one of `validValues` or `validRange` may be set")
    if vv:
        if len(vv) > MAX_VALID_VALUES:
            _too_many(v, pp.child("validValues"), len(vv), MAX_VALID_VALUES)
        prev = None
        nums = []
        for i, q in enumerate(vv):
            n = _quantity(v, pp.child("validValues").index(i), q)
            if n is None:
                continue
            if prev is not None and n <= prev:
                v.invalid(pp.child("validValues").index(i), q, "values must be sorted in ascending order")
            prev = n
            nums.append(n)
        if default is not None and default not in nums:
            v.invalid(pp.child("default"), pol.get("default"), "default value must be one of the valid values")
    if vr is not None:
        vr = v.mapping(pp.child("validRange"), vr)
        lo = _quantity(v, pp.child("validRange").child("min"), vr.get("min")) if vr.get("min") is not None else None
        if vr.get("min") is None:
            v.required(pp.child("validRange").child("min"))
        hi = _quantity(v, pp.child("validRange").child("max"), vr["max"]) if vr.get("max") is not None else None
        step = _quantity(v, pp.child("validRange").child("step"), vr["step"]) if vr.get("step") is not None \
            else None
        if lo is not None and hi is not None and hi < lo:
            v.invalid(pp.child("validRange").child("max"), vr.get("max"), "must be greater than or equal to min")
        if value is not None and hi is not None and hi > value:
            v.invalid(pp.child("validRange").child("max"), vr.get("max"), "must be less than or equal to the "
                                                                         "capacity value")
        if step is not None and step <= 0:
            v.invalid(pp.child("validRange").child("step"), vr.get("step"), "must be greater than zero")
        if default is not None and lo is not None and default < lo:
            v.invalid(pp.child("default"), pol.get("default"), "must be within the valid range")
    if default is not None and value is not None and default > value:
        v.invalid(pp.child("default"), pol.get("default"), "must be less than or equal to the capacity value")


def _device(v: _V, path: Path, d: Any, names: set[str], per_device: bool) -> bool:
    """Validate one device; True if it uses taints or counters (the 64-device limit)."""
    d = v.mapping(path, d)
    name = v.string(path.child("name"), d.get("name"), required=True)
    if name:
        _dns_label(v, path.child("name"), name)
        if name in names:
            v.add(path.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
        names.add(name)
    attrs = v.mapping(path.child("attributes"), d.get("attributes"))
    for k, a in attrs.items():
        p = path.child("attributes").key(str(k))
        _qualified_attribute(v, p, k, False)
        a = v.mapping(p, a)
        set_ = [f for f in ("int", "bool", "string", "version") if a.get(f) is not None]
        if len(set_) != 1:
            v.add(p, "Invalid value: exactly one value must be specified")
            continue
        f = set_[0]
        val = a[f]
        if f == "int" and (isinstance(val, bool) or not isinstance(val, int)):
            v.invalid(p.child("int"), val, "must be an integer")
        elif f == "bool" and not isinstance(val, bool):
            v.invalid(p.child("bool"), val, "must be a boolean")
        elif f == "string" and (not isinstance(val, str) or len(val) > 64):
            v.invalid(p.child("string"), val, "must be a string of at most 64 characters")
        elif f == "version":
            from ksched.api.dracel import semver_value
            try:
                semver_value(str(val))
            except ValueError:
                v.invalid(p.child("version"), val, "must be a string compatible with semver.org spec 2.0.0")
    multi = bool(d.get("allowMultipleAllocations"))
    caps = v.mapping(path.child("capacity"), d.get("capacity"))
    for k, c in caps.items():
        _qualified_attribute(v, path.child("capacity").key(str(k)), k, False)
        _capacity(v, path.child("capacity").key(str(k)), c, multi)
    if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITIES:
        v.add(path, f"Too many: {len(attrs) + len(caps)}: the total number of attributes and capacities must not "
                    f"exceed {MAX_ATTRIBUTES_AND_CAPACITIES}", "FieldValueTooMany")
    cc = v.sequence(path.child("consumesCounters"), d.get("consumesCounters"))
    if len(cc) > MAX_CONSUMES_COUNTERS:
        _too_many(v, path.child("consumesCounters"), len(cc), MAX_CONSUMES_COUNTERS)
    for i, c in enumerate(cc):
        p = path.child("consumesCounters").index(i)
        c = v.mapping(p, c)
        v.string(p.child("counterSet"), c.get("counterSet"), required=True)
        counters = v.mapping(p.child("counters"), c.get("counters"))
        if not counters:
            v.required(p.child("counters"))
        if len(counters) > MAX_COUNTERS:
            _too_many(v, p.child("counters"), len(counters), MAX_COUNTERS)
        for cn, cv in counters.items():
            _quantity(v, p.child("counters").key(str(cn)).child("value"), v.mapping(
                p.child("counters").key(str(cn)), cv).get("value"))
    taints = v.sequence(path.child("taints"), d.get("taints"))
    if len(taints) > MAX_TAINTS:
        _too_many(v, path.child("taints"), len(taints), MAX_TAINTS)
    for i, t in enumerate(taints):
        p = path.child("taints").index(i)
        t = v.mapping(p, t)
        key = v.string(p.child("key"), t.get("key"), required=True)
        if key and _qualified_name_errors(key):
            v.invalid(p.child("key"), key, _qualified_name_errors(key) or "")
        eff = t.get("effect")
        if not eff:
            v.required(p.child("effect"))
        elif eff not in _TAINT_EFFECTS:
            v.unsupported(p.child("effect"), eff, _TAINT_EFFECTS)
    for f in ("bindingConditions", "bindingFailureConditions"):
        conds = v.sequence(path.child(f), d.get(f))
        if len(conds) > MAX_BINDING_CONDITIONS:
            _too_many(v, path.child(f), len(conds), MAX_BINDING_CONDITIONS)
    if (d.get("bindingConditions") or d.get("bindingFailureConditions")) and not d.get("bindingConditions"):
        v.required(path.child("bindingConditions"))
    sel = [f for f in ("nodeName", "nodeSelector", "allNodes") if d.get(f)]
    if per_device:
        if len(sel) != 1:
            v.add(path, "Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required "
                        "when `perDeviceNodeSelection` is set to true in the ResourceSliceSpec",
                  "FieldValueRequired")
        elif sel[0] == "nodeSelector":
            _node_selector(v, path.child("nodeSelector"), d.get("nodeSelector"))
    elif sel:
        v.forbidden(path.child(sel[0]), "`nodeName`, `nodeSelector` and `allNodes` can only be set when "
                                        "`perDeviceNodeSelection` is set to true in the ResourceSliceSpec")
    return bool(taints or cc)


def _node_selector(v: _V, path: Path, ns: Any) -> None:
    ns = v.mapping(path, ns)
    terms = v.sequence(path.child("nodeSelectorTerms"), ns.get("nodeSelectorTerms"))
    if len(terms) != 1:
        v.invalid(path.child("nodeSelectorTerms"), terms, "must have exactly one node selector term")
    for i, t in enumerate(terms):
        _node_selector_term(v, path.child("nodeSelectorTerms").index(i), t)


def _resource_slice(v: _V, raw: dict[str, Any]) -> None:
    _metadata(v, raw, False)
    sp = Path("spec")
    spec = raw.get("spec")
    if spec is None:
        v.required(sp)
        return
    spec = v.mapping(sp, spec)
    drv = v.string(sp.child("driver"), spec.get("driver"), required=True)
    if drv:
        _dns_subdomain(v, sp.child("driver"), drv, MAX_DRIVER_NAME)
    pool = spec.get("pool")
    if pool is None:
        v.required(sp.child("pool"))
    pool = v.mapping(sp.child("pool"), pool)
    if pool or spec.get("pool") is not None:
        pname = v.string(sp.child("pool").child("name"), pool.get("name"), required=True)
        if pname:
            for seg in pname.split("/"):
                if not seg or len(seg) > 63 or not _DNS_SUBDOMAIN.match(seg):
                    v.invalid(sp.child("pool").child("name"), pname, "must consist of DNS subdomains separated by "
                                                                     "'/'")
                    break
        v.integer(sp.child("pool").child("generation"), pool.get("generation"), 0)
        n = v.integer(sp.child("pool").child("resourceSliceCount"), pool.get("resourceSliceCount"), required=True)
        if n is not None and n <= 0:
            v.invalid(sp.child("pool").child("resourceSliceCount"), n, "must be greater than zero")
    sel = [f for f in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(f)]
    if len(sel) != 1:
        v.add(sp, "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                  "`perDeviceNodeSelection` is required" if not sel else
                  "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
                  "is required", "FieldValueRequired" if not sel else "FieldValueInvalid")
    if spec.get("nodeName"):
        nn = spec["nodeName"]
        if not isinstance(nn, str) or not _DNS_SUBDOMAIN.match(nn):
            v.invalid(sp.child("nodeName"), nn, "a lowercase RFC 1123 subdomain must consist of lower case "
                                                "alphanumeric characters, '-' or '.'")
    if spec.get("nodeSelector"):
        _node_selector(v, sp.child("nodeSelector"), spec["nodeSelector"])
    devices = v.sequence(sp.child("devices"), spec.get("devices"))
    counters = v.sequence(sp.child("sharedCounters"), spec.get("sharedCounters"))
    if devices and counters:
        v.add(sp, "Invalid value: only one of `devices` or `sharedCounters` may be set")
    per_device = bool(spec.get("perDeviceNodeSelection"))
    names: set[str] = set()
    extras = False
    for i, d in enumerate(devices):
        extras = _device(v, sp.child("devices").index(i), d, names, per_device) or extras
    limit = MAX_DEVICES_WITH_EXTRAS if extras else MAX_DEVICES
    if len(devices) > limit:
        _too_many(v, sp.child("devices"), len(devices), limit)
    if len(counters) > MAX_COUNTER_SETS:
        _too_many(v, sp.child("sharedCounters"), len(counters), MAX_COUNTER_SETS)
    set_names: set[str] = set()
    for i, cs in enumerate(counters):
        p = sp.child("sharedCounters").index(i)
        cs = v.mapping(p, cs)
        name = v.string(p.child("name"), cs.get("name"), required=True)
        if name:
            _dns_label(v, p.child("name"), name)
            if name in set_names:
                v.add(p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
            set_names.add(name)
        cmap = v.mapping(p.child("counters"), cs.get("counters"))
        if not cmap:
            v.required(p.child("counters"))
        if len(cmap) > MAX_COUNTERS:
            _too_many(v, p.child("counters"), len(cmap), MAX_COUNTERS)
        for cn, cv in cmap.items():
            cvm = v.mapping(p.child("counters").key(str(cn)), cv)
            if cvm.get("value") is None:
                v.required(p.child("counters").key(str(cn)).child("value"))
            else:
                _quantity(v, p.child("counters").key(str(cn)).child("value"), cvm.get("value"))


# Pod specs `_pod_claims_full` found valid, by the key the pod's validation just computed
# (`validation.pod_spec_key`; `validation.MEMO_VALID = False` is the reference).
_VALID_CLAIM_SPECS: set[bytes] = set()


def _pod_claims(v: _V, raw: dict[str, Any]) -> None:
    """``spec.resourceClaims`` and the containers' ``resources.claims``: it reads only the
    spec, so a spec equal to one found valid is valid."""
    spec = raw.get("spec")
    key = pod_spec_key(spec) if validation.MEMO_VALID else None
    if key is None:
        _pod_claims_full(v, spec)
        return
    if key in _VALID_CLAIM_SPECS:
        return
    n = len(v.errors)
    _pod_claims_full(v, spec)
    if len(v.errors) == n:
        _remember(_VALID_CLAIM_SPECS, key)


def _pod_claims_full(v: _V, spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    sp = Path("spec")
    names: set[str] = set()
    for i, rc in enumerate(v.sequence(sp.child("resourceClaims"), spec.get("resourceClaims"))):
        p = sp.child("resourceClaims").index(i)
        rc = v.mapping(p, rc)
        name = v.string(p.child("name"), rc.get("name"), required=True)
        if name:
            _dns_label(v, p.child("name"), name)
            if name in names:
                v.add(p.child("name"), f'Duplicate value: "{name}"', "FieldValueDuplicate")
            names.add(name)
        a, b = rc.get("resourceClaimName"), rc.get("resourceClaimTemplateName")
        if bool(a) == bool(b):
            v.add(p, "Invalid value: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be "
                     "specified" if a else "Required value: at least one of `resourceClaimName` or "
                     "`resourceClaimTemplateName`", "FieldValueInvalid" if a else "FieldValueRequired")
        for f, val in (("resourceClaimName", a), ("resourceClaimTemplateName", b)):
            if val:
                _dns_subdomain(v, p.child(f), str(val))
    for part in ("initContainers", "containers"):
        cs = spec.get(part)
        if not isinstance(cs, list):
            continue
        for i, c in enumerate(cs):
            if not isinstance(c, dict):
                continue
            res = c.get("resources")
            if not isinstance(res, dict) or not res.get("claims"):
                continue
            cp = sp.child(part).index(i).child("resources").child("claims")
            seen: set[tuple[str, str]] = set()
            for j, cl in enumerate(v.sequence(cp, res.get("claims"))):
                cl = v.mapping(cp.index(j), cl)
                n = v.string(cp.index(j).child("name"), cl.get("name"), required=True)
                if n and n not in names:
                    v.add(cp.index(j), f'Not found: "{n}"', "FieldValueNotFound")
                key = (n, cl.get("request") or "")
                if key in seen:
                    v.add(cp.index(j), f'Duplicate value: "{n}"', "FieldValueDuplicate")
                seen.add(key)


def register() -> None:
    register_validator("DeviceClass", _device_class)
    register_validator("ResourceSlice", _resource_slice)
    register_validator("ResourceClaim", _resource_claim)
    register_validator("ResourceClaimTemplate", _resource_claim_template)
    register_validator("Pod", _pod_claims)
