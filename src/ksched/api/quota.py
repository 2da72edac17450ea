"""Quota accounting, as upstream's ``pkg/quota/v1`` (``evaluator/core/pods.go``, ``services.go``,
``persistent_volume_claims.go``, ``generic/evaluator.go`` and the ResourceList helpers of
``resources.go``): what an object uses of each quota resource, which quotas cover it (scopes),
which resources a pod must state, and the message forms quota admission prints.

Shared by quota admission (``ksched.apiserver.resourcequota``), which checks and charges a new
object, and the resourcequota controller, which keeps ``status.used`` current.

Usage is exact (``Quantity``); a sum keeps the format of its first term, as upstream's
``quota.Add``. Divergence: usage is measured on creation only (upstream also charges service and
claim updates); the controller recomputes ``status.used`` after any change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.quantity import Quantity, QuantityError, parse_quantity
from ksched.api.resourcequota import ResourceQuota
from ksched.api.resources import QOS_BEST_EFFORT, is_extended_resource, qos_class

__all__ = [
    "ResourceList",
    "add",
    "constraints",
    "count_resource_name",
    "less_than_or_equal",
    "mask",
    "matches",
    "matching_resources",
    "parse_resource_list",
    "pretty_print",
    "pretty_print_names",
    "usage",
]

ResourceList = dict[str, Quantity]

_ONE = Quantity.from_int(1)
_ZERO = Quantity(0)
_REQ = "requests."
_LIM = "limits."
_HUGEPAGES = "hugepages-"
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"

# Names the core evaluators answer for besides count/<resource> (the pre-1.9 object counts).
_LEGACY_COUNTS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets",
                  "ResourceQuota": "resourcequotas", "ReplicationController": "replicationcontrollers",
                  "PersistentVolumeClaim": "persistentvolumeclaims"}
_POD_RESOURCES = frozenset(("count/pods", "pods", "cpu", "memory", "ephemeral-storage", "requests.cpu",
                            "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
                            "limits.ephemeral-storage"))
# Pod resources a container must state when a quota limits them (pods.go validationSet).
_CONTAINER_VALIDATION = frozenset(("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                                   "limits.memory"))
_SERVICE_RESOURCES = frozenset(("services", "count/services", "services.loadbalancers", "services.nodeports"))
# Kinds quota never counts (upstream's default ignored resources).
_IGNORED = frozenset(("Event",))


# ---------------------------------------------------------------- ResourceList helpers


def parse_resource_list(d: Mapping[str, Any] | None) -> ResourceList:
    """The parsable entries of a manifest's ResourceList."""
    out: ResourceList = {}
    for k, v in (d or {}).items():
        try:
            out[str(k)] = parse_quantity(v)
        except QuantityError:
            continue
    return out


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out: ResourceList = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def _max_into(into: ResourceList, b: Mapping[str, Quantity]) -> None:
    for k, v in b.items():
        if k not in into or v.nanos > into[k].nanos:
            into[k] = v


def mask(rl: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {k: v for k, v in rl.items() if k in keep}


def less_than_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """Whether every entry of ``a`` present in ``b`` is at most ``b``'s, and the ones exceeding."""
    exceeded = [k for k, v in a.items() if k in b and v.nanos > b[k].nanos]
    return not exceeded, exceeded


def pretty_print(rl: Mapping[str, Quantity]) -> str:
    """``name=qty`` sorted by name, comma-joined (quota admission's prettyPrint)."""
    return ",".join(f"{k}={rl[k]}" for k in sorted(rl))


def pretty_print_names(names: Iterable[str]) -> str:
    return ",".join(sorted(names))


# ---------------------------------------------------------------- names


def count_resource_name(cls: type[KubeObject]) -> str:
    """``count/<resource>[.<group>]``: the object count of a kind."""
    group = cls.API_VERSION.rpartition("/")[0]
    return f"count/{cls.PLURAL}.{group}" if group else f"count/{cls.PLURAL}"


def _is_pod_resource(name: str) -> bool:
    if name in _POD_RESOURCES or name.startswith(_HUGEPAGES) or name.startswith(_REQ + _HUGEPAGES):
        return True
    return name.startswith(_REQ) and is_extended_resource(name[len(_REQ):])


def matching_resources(cls: type[KubeObject], names: Iterable[str]) -> list[str]:
    """The quota resources among ``names`` that objects of ``cls`` use."""
    kind = cls.KIND_KEY
    if kind in _IGNORED:
        return []
    count = count_resource_name(cls)
    legacy = _LEGACY_COUNTS.get(kind)
    out = []
    for n in names:
        if n in (count, legacy):
            ok = True
        elif kind == "Pod":
            ok = _is_pod_resource(n)
        elif kind == "Service":
            ok = n in _SERVICE_RESOURCES
        elif kind == "PersistentVolumeClaim":
            ok = n == "requests.storage" or (_STORAGE_CLASS_SUFFIX in n and n.endswith(
                ("/requests.storage", "/persistentvolumeclaims")))
        else:
            ok = False
        if ok:
            out.append(n)
    return out


# ---------------------------------------------------------------- scopes


def _is_terminating(pod: Pod) -> bool:
    ads = (pod.raw.get("spec") or {}).get("activeDeadlineSeconds")
    return isinstance(ads, int) and ads >= 0


def _cross_namespace_affinity(pod: Pod) -> bool:
    aff = (pod.raw.get("spec") or {}).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = aff.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        terms += [w.get("podAffinityTerm") or {} for w in a.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
        for t in terms:
            if t.get("namespaces") or t.get("namespaceSelector") is not None:
                return True
    return False


def _selector_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """A scope requirement over a single-valued attribute (None: absent)."""
    op = req.get("operator") or ""
    values = req.get("values") or ()
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    return False


def _pod_scope_matches(req: Mapping[str, Any], pod: Pod) -> bool:
    scope = req.get("scopeName")
    if scope == "Terminating":
        return _is_terminating(pod)
    if scope == "NotTerminating":
        return not _is_terminating(pod)
    if scope == "BestEffort":
        return qos_class(pod) == QOS_BEST_EFFORT
    if scope == "NotBestEffort":
        return qos_class(pod) != QOS_BEST_EFFORT
    if scope == "PriorityClass":
        if req.get("operator") == "Exists":
            return bool(pod.priority_class_name)
        return _selector_matches(req, pod.priority_class_name)
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(pod)
    return False


def matches(quota: ResourceQuota, obj: KubeObject) -> bool:
    """Whether ``quota`` covers ``obj``: it limits something the object uses (per
    ``status.hard``) and every scope matches (scopes only narrow pods; other kinds ignore them)."""
    if quota.namespace != obj.namespace:
        return False
    if not matching_resources(type(obj), quota.status_hard):
        return False
    if isinstance(obj, Pod):
        return all(_pod_scope_matches(r, obj) for r in quota.scope_requirements())
    return True


# ---------------------------------------------------------------- usage


def _container_lists(c: Mapping[str, Any]) -> tuple[ResourceList, ResourceList]:
    res = c.get("resources") or {}
    return parse_resource_list(res.get("requests")), parse_resource_list(res.get("limits"))


def _aggregate(spec: Mapping[str, Any], which: int) -> ResourceList:
    """Upstream's AggregateContainerRequests/Limits: the containers' sum, restartable init
    containers added, max with each init container at its point in the sequence."""
    total: ResourceList = {}
    for c in spec.get("containers") or ():
        total = add(total, _container_lists(c)[which])
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for c in spec.get("initContainers") or ():
        r = _container_lists(c)[which]
        if c.get("restartPolicy") == "Always":
            total = add(total, r)
            sidecars = add(sidecars, r)
            use = sidecars
        else:
            use = add(r, sidecars)
        _max_into(init_max, use)
    _max_into(total, init_max)
    return total


def pod_requests_limits(pod: Pod) -> tuple[ResourceList, ResourceList]:
    """The pod's requests and limits as quota and LimitRanger see them: aggregated containers,
    pod-level cpu/memory/hugepages where set, overhead added (to every request, to the limits
    present)."""
    spec = pod.raw.get("spec") or {}
    reqs = _aggregate(spec, 0)
    lims = _aggregate(spec, 1)
    pod_level = spec.get("resources") or {}
    for which, out in (("requests", reqs), ("limits", lims)):
        for k, v in parse_resource_list(pod_level.get(which)).items():
            if k in ("cpu", "memory") or k.startswith(_HUGEPAGES):
                out[k] = v
    overhead = parse_resource_list(spec.get("overhead"))
    if overhead:
        reqs = add(reqs, overhead)
        for k, v in overhead.items():
            if k in lims:
                lims[k] = lims[k] + v
    return reqs, lims


def _compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """Upstream's podComputeUsageHelper."""
    out: ResourceList = {"pods": _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = requests[name]
            out[_REQ + name] = requests[name]
        if name in limits:
            out[_LIM + name] = limits[name]
    for name, q in requests.items():
        if name.startswith(_HUGEPAGES):
            out[name] = q
            out[_REQ + name] = q
        if is_extended_resource(name):
            out[_REQ + name] = q
    return out


def _pod_counts(pod: Pod, now: float) -> bool:
    """Upstream's QuotaV1Pod: terminal pods and pods past their deletion grace use no compute."""
    if pod.phase in ("Succeeded", "Failed"):
        return False
    if pod.deletion_timestamp is not None and pod.deletion_grace_period_seconds is not None:
        return now <= pod.deletion_timestamp + pod.deletion_grace_period_seconds
    return True


def usage(obj: KubeObject, now: float) -> ResourceList:
    """What ``obj`` uses of every quota resource that applies to its kind."""
    cls = type(obj)
    if cls.KIND_KEY in _IGNORED:
        return {}
    out: ResourceList = {count_resource_name(cls): _ONE}
    legacy = _LEGACY_COUNTS.get(cls.KIND_KEY)
    if isinstance(obj, Pod):
        if _pod_counts(obj, now):
            out.update(_compute_usage(*pod_requests_limits(obj)))
        return out
    if legacy:
        out[legacy] = _ONE
    spec = obj.raw.get("spec") or {}
    if cls.KIND_KEY == "Service":
        ports = len(spec.get("ports") or ())
        stype = spec.get("type") or "ClusterIP"
        if stype == "NodePort":
            out["services.nodeports"] = Quantity.from_int(ports)
        elif stype == "LoadBalancer":
            alloc = spec.get("allocateLoadBalancerNodePorts")
            out["services.nodeports"] = Quantity.from_int(0 if alloc is False else ports)
            out["services.loadbalancers"] = _ONE
    elif cls.KIND_KEY == "PersistentVolumeClaim":
        storage = parse_resource_list((spec.get("resources") or {}).get("requests")).get("storage")
        sc = spec.get("storageClassName") or ""
        if storage is not None:
            out["requests.storage"] = storage
        if sc:
            out[f"{sc}{_STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = _ONE
            if storage is not None:
                out[f"{sc}{_STORAGE_CLASS_SUFFIX}requests.storage"] = storage
    return out


# ---------------------------------------------------------------- constraints


def constraints(obj: KubeObject, required: Iterable[str]) -> str | None:
    """Why ``obj`` cannot be charged to a quota limiting ``required`` (None when it can): a pod
    whose containers do not each state every limited cpu/memory request and limit."""
    if not isinstance(obj, Pod):
        return None
    req_set = set(required) & _CONTAINER_VALIDATION
    if not req_set:
        return None
    missing: dict[str, list[str]] = {}
    spec = obj.raw.get("spec") or {}
    for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        reqs, lims = _container_lists(c)
        have = set(_compute_usage(reqs, lims))
        for name in req_set - have:
            names = missing.setdefault(name, [])
            if c.get("name", "") not in names:
                names.append(str(c.get("name", "")))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))
