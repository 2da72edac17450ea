"""The LimitRanger admission plugin (``plugin/pkg/admission/limitranger/admission.go``): a new
pod's containers get the namespace's LimitRange defaults for the requests and limits they do not
state (recorded in the ``kubernetes.io/limit-ranger`` annotation), then every container, the pod
as a whole and every new claim must respect the LimitRanges' min, max and limit/request ratio.

The defaulting runs before the scheduler ever sees the pod, so it changes where pods fit. Pod
updates are not checked (their containers cannot change), as upstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ksched.api.errors import aggregate_error_message
from ksched.api.limitrange import LIMIT_TYPE_CONTAINER, LIMIT_TYPE_POD, LIMIT_TYPE_PVC, LimitRange
from ksched.api.pod import Pod
from ksched.api.quantity import Quantity, QuantityError, parse_quantity
from ksched.api.quota import parse_resource_list, pod_requests_limits

__all__ = ["LIMIT_RANGER_ANNOTATION", "mutate_pod", "validate_claim", "validate_pod"]

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
_MAX_MILLI = (1 << 63) // 1000  # resource.MaxMilliValue


def _defaults(ranges: Iterable[LimitRange]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(default requests, default limits) of the Container items; a later item overrides."""
    reqs: dict[str, Any] = {}
    lims: dict[str, Any] = {}
    for lr in ranges:
        for item in lr.limits:
            if item.type == LIMIT_TYPE_CONTAINER:
                reqs.update(item.default_request)
                lims.update(item.default)
    return reqs, lims


def mutate_pod(raw: dict[str, Any], ranges: list[LimitRange]) -> None:
    """Fill in missing container requests and limits from each LimitRange (in place)."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    for lr in ranges:
        d_reqs, d_lims = _defaults([lr])
        if not d_reqs and not d_lims:
            continue
        notes: list[str] = []
        for field, what in (("containers", "container"), ("initContainers", "init container")):
            for c in spec.get(field) or ():
                if not isinstance(c, dict):
                    continue
                res = c.get("resources")
                if not isinstance(res, dict):
                    res = c["resources"] = {}
                limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
                requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
                set_limits = sorted(k for k in d_lims if k not in limits)
                set_requests = sorted(k for k in d_reqs if k not in requests)
                for k in set_limits:
                    limits[k] = d_lims[k]
                for k in set_requests:
                    requests[k] = d_reqs[k]
                if limits:
                    res["limits"] = limits
                if requests:
                    res["requests"] = requests
                name = c.get("name", "")
                if set_requests:
                    notes.append(f"{', '.join(set_requests)} request for {what} {name}")
                if set_limits:
                    notes.append(f"{', '.join(set_limits)} limit for {what} {name}")
        if notes:
            md = raw.setdefault("metadata", {})
            ann = md.get("annotations") if isinstance(md.get("annotations"), dict) else {}
            md["annotations"] = {**ann, LIMIT_RANGER_ANNOTATION: "LimitRanger plugin set: " + "; ".join(notes)}


# ---------------------------------------------------------------- constraints


def _values(req: Quantity | None, lim: Quantity | None, enforced: Quantity) -> tuple[int, int, int]:
    """Upstream's requestLimitEnforcedValues: milli-units when nothing overflows, else units."""
    r = req.value() if req is not None else 0
    li = lim.value() if lim is not None else 0
    e = enforced.value()
    if r <= _MAX_MILLI and li <= _MAX_MILLI and e <= _MAX_MILLI:
        return (req.milli_value() if req is not None else 0, lim.milli_value() if lim is not None else 0,
                enforced.milli_value())
    return r, li, e


def _min(ltype: str, name: str, enforced: Quantity, reqs: Mapping[str, Quantity],
         lims: Mapping[str, Quantity]) -> str | None:
    req, lim = reqs.get(name), lims.get(name)
    r, li, e = _values(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {ltype} is {enforced}.  No request is specified"
    if r < e:
        return f"minimum {name} usage per {ltype} is {enforced}, but request is {req}"
    if lim is not None and li < e:
        return f"minimum {name} usage per {ltype} is {enforced}, but limit is {lim}"
    return None


def _max(ltype: str, name: str, enforced: Quantity, reqs: Mapping[str, Quantity],
         lims: Mapping[str, Quantity]) -> str | None:
    req, lim = reqs.get(name), lims.get(name)
    r, li, e = _values(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {ltype} is {enforced}.  No limit is specified"
    if li > e:
        return f"maximum {name} usage per {ltype} is {enforced}, but limit is {lim}"
    if req is not None and r > e:
        return f"maximum {name} usage per {ltype} is {enforced}, but request is {req}"
    return None


def _max_request(ltype: str, name: str, enforced: Quantity, reqs: Mapping[str, Quantity]) -> str | None:
    req = reqs.get(name)
    r, _, e = _values(req, None, enforced)
    if req is None:
        return f"maximum {name} usage per {ltype} is {enforced}.  No request is specified"
    if r > e:
        return f"maximum {name} usage per {ltype} is {enforced}, but request is {req}"
    return None


def _ratio(ltype: str, name: str, enforced: Quantity, reqs: Mapping[str, Quantity],
           lims: Mapping[str, Quantity]) -> str | None:
    req, lim = reqs.get(name), lims.get(name)
    r, li, _ = _values(req, lim, enforced)
    if req is None or r == 0:
        return f"{name} max limit to request ratio per {ltype} is {enforced}, but no request is specified or request is 0"
    if lim is None or li == 0:
        return f"{name} max limit to request ratio per {ltype} is {enforced}, but no limit is specified or limit is 0"
    observed = li / r
    shown = observed
    max_ratio = float(enforced.value())
    if enforced.value() <= _MAX_MILLI:
        observed *= 1000
        max_ratio = float(enforced.milli_value())
    if observed > max_ratio:
        return f"{name} max limit to request ratio per {ltype} is {enforced}, but provided ratio is {shown:f}"
    return None


def _q(d: Mapping[str, Any]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for k, v in sorted(d.items()):
        try:
            out[k] = parse_quantity(v)
        except QuantityError:
            continue
    return out


def _check(errs: list[str], ltype: str, item: Any, reqs: Mapping[str, Quantity], lims: Mapping[str, Quantity]) -> None:
    for k, v in _q(item.min).items():
        e = _min(ltype, k, v, reqs, lims)
        if e:
            errs.append(e)
    for k, v in _q(item.max).items():
        e = _max(ltype, k, v, reqs, lims)
        if e:
            errs.append(e)
    for k, v in _q(item.max_limit_request_ratio).items():
        e = _ratio(ltype, k, v, reqs, lims)
        if e:
            errs.append(e)


def validate_pod(pod: Pod, ranges: list[LimitRange]) -> str | None:
    """Why the pod breaks a LimitRange (None when it does not); one range at a time, as upstream
    stops at the first range that refuses."""
    spec = pod.raw.get("spec") or {}
    containers = [c for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
                  if isinstance(c, dict)]
    for lr in ranges:
        errs: list[str] = []
        for item in lr.limits:
            if item.type == LIMIT_TYPE_CONTAINER:
                for c in containers:
                    res = c.get("resources") or {}
                    _check(errs, LIMIT_TYPE_CONTAINER, item, parse_resource_list(res.get("requests")),
                           parse_resource_list(res.get("limits")))
            elif item.type == LIMIT_TYPE_POD:
                reqs, lims = _pod_totals(pod)
                _check(errs, LIMIT_TYPE_POD, item, reqs, lims)
        if errs:
            return aggregate_error_message(errs)
    return None


def _pod_totals(pod: Pod) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """The pod's requests and limits without its overhead (upstream's local podRequests)."""
    spec = dict(pod.raw.get("spec") or {})
    spec.pop("overhead", None)
    return pod_requests_limits(Pod.from_dict({**pod.raw, "spec": spec}))


def validate_claim(raw: dict[str, Any], ranges: list[LimitRange]) -> str | None:
    """Why a new claim's storage request breaks a PersistentVolumeClaim item (None when fine)."""
    reqs = parse_resource_list(((raw.get("spec") or {}).get("resources") or {}).get("requests"))
    for lr in ranges:
        errs: list[str] = []
        for item in lr.limits:
            if item.type != LIMIT_TYPE_PVC:
                continue
            for k, v in _q(item.min).items():
                e = _min(LIMIT_TYPE_PVC, k, v, reqs, {})
                if e:
                    errs.append(e)
            for k, v in _q(item.max).items():
                e = _max_request(LIMIT_TYPE_PVC, k, v, reqs)
                if e:
                    errs.append(e)
        if errs:
            return aggregate_error_message(errs)
    return None
