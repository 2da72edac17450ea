"""Pod resource math as upstream computes it: effective requests, non-zero requests for
scoring, and the QoS class."""

from __future__ import annotations

from collections.abc import Iterable

from ksched.api.pod import CPU, MEMORY, Container, Pod, resource_units

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "QOS_BEST_EFFORT",
    "QOS_BURSTABLE",
    "QOS_GUARANTEED",
    "is_extended_resource",
    "is_hugepages",
    "is_scalar_resource",
    "pod_container_requests",
    "pod_non_zero_requests",
    "pod_requests",
    "qos_class",
]

DEFAULT_MILLI_CPU_REQUEST = 100  # 0.1 core
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # 200 MiB

QOS_GUARANTEED = "Guaranteed"
QOS_BURSTABLE = "Burstable"
QOS_BEST_EFFORT = "BestEffort"

_NATIVE = frozenset(("cpu", "memory", "ephemeral-storage", "pods", "storage"))
_POD_LEVEL = frozenset(("cpu", "memory"))


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    """A resource in the ``kubernetes.io`` domain (no domain, or ``*.kubernetes.io/``)."""
    if "/" not in name:
        return True
    return name.split("/", 1)[0].endswith("kubernetes.io")


def is_extended_resource(name: str) -> bool:
    """``domain/name`` outside ``kubernetes.io`` and not ``requests.*`` (upstream's
    IsExtendedResourceName)."""
    return not (is_native(name) or name.startswith("requests."))


def is_scalar_resource(name: str) -> bool:
    """Tracked in NodeInfo's ScalarResources: hugepages, extended and attachable-volume resources."""
    return is_hugepages(name) or is_extended_resource(name) or name.startswith("attachable-volumes-")


def _add(into: dict[str, int], r: dict[str, int]) -> None:
    for k, v in r.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: dict[str, int], r: dict[str, int]) -> None:
    for k, v in r.items():
        if v > into.get(k, 0):
            into[k] = v


def _requests(containers: Iterable[Container], init_containers: Iterable[Container],
              per_container: object) -> dict[str, int]:
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, per_container(c))  # type: ignore[operator]
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in init_containers:
        r = per_container(c)  # type: ignore[operator]
        if c.is_sidecar:
            _add(reqs, r)
            _add(sidecars, r)
            use = dict(sidecars)
        else:
            use = dict(r)
            _add(use, sidecars)
        _max_into(init_max, use)
    _max_into(reqs, init_max)
    return reqs


def _plain(c: Container) -> dict[str, int]:
    return c.requests


_DEFAULTS = ((CPU, DEFAULT_MILLI_CPU_REQUEST), (MEMORY, DEFAULT_MEMORY_REQUEST))


def _non_zero_fn(defaults: dict[str, int]) -> object:
    def per_container(c: Container) -> dict[str, int]:
        r = c.requests
        return {CPU: r.get(CPU, defaults.get(CPU, 0)), MEMORY: r.get(MEMORY, defaults.get(MEMORY, 0))}
    return per_container


def _pod_level_set(pod: Pod) -> bool:
    """Pod-level resources name cpu, memory or hugepages (upstream's IsPodLevelResourcesSet)."""
    for k in pod.pod_level_requests:
        if k in _POD_LEVEL or is_hugepages(k):
            return True
    return False


def pod_requests(pod: Pod, cache: bool = True) -> dict[str, int]:
    """Effective requests: max(sum of containers + sidecars, each init container at its point in
    the sequence), pod-level requests where set, plus overhead. Cached on the pod object;
    ``cache=False``: computed but not kept where the pod has them not cached yet (a reader of
    every pod once, as the simulation's report, need not grow each of them by a dict)."""
    if not cache:
        c = pod._cache
        r = c.get("requests") if c is not None else None
        return r if r is not None else _pod_requests(pod)
    c = pod.cached()
    r = c.get("requests")
    if r is None:
        r = c["requests"] = _pod_requests(pod)
    return r


def _pod_requests(pod: Pod) -> dict[str, int]:
    if not pod.init_containers and not pod.pod_level_requests and not pod.overhead and len(pod.containers) == 1:
        # The common shape: one container and nothing else to add.
        return {k: v for k, v in pod.containers[0].requests.items() if v}
    r = _requests(pod.containers, pod.init_containers, _plain)
    for k, v in pod.pod_level_requests.items():
        if k in _POD_LEVEL or is_hugepages(k):
            r[k] = v
    _add(r, pod.overhead)
    return {k: v for k, v in r.items() if v}


def pod_non_zero_requests(pod: Pod) -> tuple[int, int]:
    """(milli-CPU, memory) with upstream's per-container defaults (100m, 200Mi) for containers
    that have no request key (an explicit 0 is kept); used for scoring and NonZeroRequested.
    With pod-level resources set, a default applies only where the pod level, every container and
    the overhead all lack the resource."""
    c = pod.cached()
    r = c.get("non_zero")
    if r is None:
        plr = pod.pod_level_requests
        if not plr and not pod.init_containers:
            # Containers only: each adds its request, or the default where it names none.
            cpu = mem = 0
            for ct in pod.containers:
                req = ct.requests
                cpu += req.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
                mem += req.get(MEMORY, DEFAULT_MEMORY_REQUEST)
            r = c["non_zero"] = (cpu + pod.overhead.get(CPU, 0), mem + pod.overhead.get(MEMORY, 0))
            return r
        if _pod_level_set(pod):
            # Upstream's getNonMissingContainerRequests: with pod-level resources, a default applies
            # only where neither the pod level nor any container (nor the overhead) names it.
            present = {k for k in plr if k in _POD_LEVEL or is_hugepages(k)}
            present.update(pod.overhead)
            for ct in (*pod.containers, *pod.init_containers):
                present.update(ct.requests)
            defaults = {k: d for k, d in _DEFAULTS if k not in present}
        else:
            defaults = dict(_DEFAULTS)
        nz = _requests(pod.containers, pod.init_containers, _non_zero_fn(defaults))
        cpu = nz.get(CPU, 0)
        mem = nz.get(MEMORY, 0)
        if CPU in plr:
            cpu = plr[CPU]
        if MEMORY in plr:
            mem = plr[MEMORY]
        cpu += pod.overhead.get(CPU, 0)
        mem += pod.overhead.get(MEMORY, 0)
        r = c["non_zero"] = (cpu, mem)
    return r


def pod_container_requests(pod: Pod) -> tuple[dict[str, int], tuple[int, int]]:
    """(requests, non-zero (milli-CPU, memory)) from the containers alone, pod-level resources
    ignored (overhead still added): upstream's PodRequests with SkipPodLevelResources, which is
    how NodeResourcesFit's scorer sees the incoming pod in 1.36 (its resourceAllocationScorer
    is built without the PodLevelResources gate). Equal to ``pod_requests`` /
    ``pod_non_zero_requests`` for pods without pod-level resources."""
    if not _pod_level_set(pod):
        return pod_requests(pod), pod_non_zero_requests(pod)
    c = pod.cached()
    r = c.get("container_requests")
    if r is None:
        reqs = _requests(pod.containers, pod.init_containers, _plain)
        _add(reqs, pod.overhead)
        nz = _requests(pod.containers, pod.init_containers, _non_zero_fn(dict(_DEFAULTS)))
        r = c["container_requests"] = ({k: v for k, v in reqs.items() if v},
                                       (nz.get(CPU, 0) + pod.overhead.get(CPU, 0),
                                        nz.get(MEMORY, 0) + pod.overhead.get(MEMORY, 0)))
    return r  # type: ignore[no-any-return]


def qos_class(pod: Pod) -> str:
    """Guaranteed, Burstable or BestEffort, from cpu and memory only (upstream's ComputePodQOS)."""
    c = pod.cached()
    q = c.get("qos")
    if q is not None:
        return q
    raw_res = ((pod.raw.get("spec") or {}).get("resources") or {})
    if _pod_level_set(pod):
        limits_raw = raw_res.get("limits") or {}
        groups: list[tuple[dict[str, int], dict[str, int]]] = [
            (pod.pod_level_requests, {k: resource_units(k, v) for k, v in limits_raw.items()})]
    else:
        groups = [(ct.requests, ct.limits) for ct in (*pod.containers, *pod.init_containers)]
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for reqs, lims in groups:
        for k in (CPU, MEMORY):
            if reqs.get(k, 0) > 0:
                requests[k] = requests.get(k, 0) + reqs[k]
            if lims.get(k, 0) > 0:
                limits[k] = limits.get(k, 0) + lims[k]
        if not (lims.get(CPU, 0) > 0 and lims.get(MEMORY, 0) > 0):
            guaranteed = False
    if not requests and not limits:
        q = QOS_BEST_EFFORT
    elif guaranteed and all(requests.get(k) == limits.get(k) for k in (CPU, MEMORY)):
        q = QOS_GUARANTEED
    else:
        q = QOS_BURSTABLE
    c["qos"] = q
    return q

