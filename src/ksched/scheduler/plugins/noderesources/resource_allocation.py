"""Shared scoring machinery of the resource plugins (upstream's resource_allocation.go).

A scorer sees, per configured resource ``i``, three integers for a node:

- ``requested[i]``: what the node would have requested with the pod on it,
- ``allocated[i]``: what it has requested now (without the pod),
- ``allocatable[i]``: the node's allocatable; 0 means "leave this resource out".

Upstream's rules for building them (``calculateResourceAllocatableRequest``):

- cpu and memory use the node's non-zero requested and the pod's non-zero request (100m /
  200Mi per container without a request) for NodeResourcesFit, real requests for
  NodeResourcesBalancedAllocation (``use_requested``);
- ephemeral-storage always uses real requests;
- a scalar resource (extended, hugepages, ``*kubernetes.io/*``, attachable volumes) the pod does
  not request is left out, otherwise it is scored against the node's allocatable of it;
- any other name (``pods``, ``storage``, ...) is left out.

Every scorer exists twice: on Python ints for one node (``score`` of a plugin) and on NumPy
columns for many rows of the node table (``score_nodes``). Both follow upstream's integer and
floating-point operations in the same order, so they agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.api.resources import (
    is_extended_resource,
    is_hugepages,
    pod_container_requests,
    pod_non_zero_requests,
    pod_requests,
)
from ksched.boundedcache import BoundedCache
from ksched.scheduler.cache.node_table import CPU, EPHEMERAL, MEMORY, NodeTable
from ksched.scheduler.framework.interface import MAX_NODE_SCORE
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo

__all__ = [
    "DEFAULT_RESOURCES",
    "Column",
    "ResourceSpec",
    "ScalarScorer",
    "VectorScorer",
    "weighted_mean_scorer",
    "weighted_mean_vector_scorer",
    "gather_columns",
    "is_scalar_resource_name",
    "node_values",
    "node_values_any",
    "parse_resources",
    "pod_request_list",
    "requests_row_key",
    "safe_den",
    "scaled",
]

R_CPU = "cpu"
R_MEMORY = "memory"
R_EPHEMERAL = "ephemeral-storage"

DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((R_CPU, 1), (R_MEMORY, 1))

# Largest value v with v * MAX_NODE_SCORE inside int64.
_SAFE_MUL = (2**63 - 1) // MAX_NODE_SCORE

_scalar_cache: BoundedCache[str, bool] = BoundedCache()


def is_scalar_resource_name(name: str) -> bool:
    """Upstream's schedutil.IsScalarResourceName: extended resources, hugepages, names in the
    ``kubernetes.io/`` namespace (prefixed native) and attachable-volume counts. These are the
    resources NodeInfo tracks in ScalarResources."""
    r = _scalar_cache.get(name)
    if r is None:
        r = _scalar_cache.put(name, is_extended_resource(name) or is_hugepages(name) or "kubernetes.io/" in name
                              or name.startswith("attachable-volumes-"))
    return r


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """The configured resources of a scorer: names and weights in configuration order."""

    names: tuple[str, ...]
    weights: tuple[int, ...]
    scalar: tuple[bool, ...]
    # Keys of the pod's request lists in ``pod.cached()``.
    cache_key_requested: str
    cache_key_non_zero: str

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, int]]) -> ResourceSpec:
        names = tuple(n for n, _ in pairs)
        joined = ",".join(names)
        return cls(names, tuple(w for _, w in pairs), tuple(is_scalar_resource_name(n) for n in names),
                   f"noderesources.requested:{joined}", f"noderesources.nonzero:{joined}")

    def __len__(self) -> int:
        return len(self.names)


def parse_resources(raw: Any, path: str, *, weight_must_be_one: bool = False) -> ResourceSpec:
    """``[{"name", "weight"}]`` as the v1 API defaults it: no resources means cpu and memory,
    a missing or zero weight means 1. Then validated as upstream: weights in [1, 100] (exactly 1
    for BalancedAllocation), names unique."""
    items = list(raw or [])
    if not items:
        return ResourceSpec.of(DEFAULT_RESOURCES)
    pairs: list[tuple[str, int]] = []
    seen: set[str] = set()
    errors: list[str] = []
    for i, it in enumerate(items):
        if not isinstance(it, Mapping) or not isinstance(it.get("name"), str) or not it.get("name"):
            errors.append(f"{path}[{i}].name: Required value")
            continue
        name = it["name"]
        w = it.get("weight") or 0
        if isinstance(w, bool) or not isinstance(w, int):
            errors.append(f"{path}[{i}].weight: Invalid value: {w!r}: must be an integer")
            continue
        if w == 0:
            w = 1
        if name in seen:
            errors.append(f'{path}[{i}].name: Duplicate value: "{name}"')
        seen.add(name)
        if weight_must_be_one:
            if w != 1:
                errors.append(f"{path}[{i}].weight: Invalid value: {w}: must be 1")
        elif not 1 <= w <= MAX_NODE_SCORE:
            errors.append(f"{path}[{i}].weight: Invalid value: {w}: resource weight of {name} should be in "
                          f"the range of [1, {MAX_NODE_SCORE}]")
        pairs.append((name, w))
    if errors:
        raise ValueError("; ".join(errors))
    return ResourceSpec.of(pairs)


def pod_request_list(pod: Pod, spec: ResourceSpec, use_requested: bool, pod_level: bool = True) -> tuple[int, ...]:
    """The pod's request of each configured resource (upstream's calculatePodResourceRequestList):
    non-zero cpu/memory unless ``use_requested``; real requests for everything else; pod-level
    resources counted unless ``pod_level`` is False (NodeResourcesFit's scorer, see
    ``pod_container_requests``). Cached per resource list, for the pod's template."""
    cache = template_cache(pod)
    key = spec.cache_key_requested if use_requested else spec.cache_key_non_zero
    if not pod_level:
        key += ":containers"
    r = cache.get(key)
    if r is not None:
        return r  # type: ignore[no-any-return]
    if pod_level:
        reqs = pod_requests(pod)
        nz = None if use_requested else pod_non_zero_requests(pod)
    else:
        reqs, nz0 = pod_container_requests(pod)
        nz = None if use_requested else nz0
    out: list[int] = []
    for name in spec.names:
        if nz is not None and name == R_CPU:
            out.append(nz[0])
        elif nz is not None and name == R_MEMORY:
            out.append(nz[1])
        else:
            out.append(reqs.get(name, 0))
    r = tuple(out)
    cache[key] = r
    return r


def requests_row_key(pod: Pod) -> Any:
    """The ``row_local_key`` of the resource plugins whose Filter and raw Score on a node depend
    only on the NodeInfo and the pod's requests (real and non-zero, with pod-level resources,
    and from the containers alone where they differ); cached on the pod, one key for all of
    them."""
    c = template_cache(pod)
    k = c.get("rowkey:requests")
    if k is None:
        reqs, nz = pod_requests(pod), pod_non_zero_requests(pod)
        creqs, cnz = pod_container_requests(pod)
        k = (tuple(sorted(reqs.items())), nz)
        if creqs is not reqs or cnz != nz:
            k += (tuple(sorted(creqs.items())), cnz)
        c["rowkey:requests"] = k
    return k


# ---------------------------------------------------------------- per node (Python ints)

_CPU_MEMORY = (R_CPU, R_MEMORY)


def node_values(ni: NodeInfo, spec: ResourceSpec, pod_reqs: Sequence[int],
                use_requested: bool) -> tuple[list[int], list[int], list[int]]:
    """(requested with the pod, requested without it, allocatable) of one node, one entry per
    configured resource; left-out resources are (0, 0, 0)."""
    if spec.names == _CPU_MEMORY:
        # The default resources (neither is scalar): ``node_values_any`` unrolled.
        alloc = ni.allocatable
        a0 = alloc.get(R_CPU, 0)
        a1 = alloc.get(R_MEMORY, 0)
        if use_requested:
            req = ni.requested
            w0 = req.get(R_CPU, 0)
            w1 = req.get(R_MEMORY, 0)
        else:
            nz = ni.non_zero_requested
            w0 = nz[0]
            w1 = nz[1]
        if a0 == 0:
            w0 = p0 = 0
        else:
            p0 = w0 + pod_reqs[0]
        if a1 == 0:
            w1 = p1 = 0
        else:
            p1 = w1 + pod_reqs[1]
        return [p0, p1], [w0, w1], [a0, a1]
    return node_values_any(ni, spec, pod_reqs, use_requested)


def node_values_any(ni: NodeInfo, spec: ResourceSpec, pod_reqs: Sequence[int],
                    use_requested: bool) -> tuple[list[int], list[int], list[int]]:
    """``node_values`` for any configured resources (the reference of its shortcut)."""
    alloc = ni.allocatable
    req = ni.requested
    nz = ni.non_zero_requested
    n = len(spec.names)
    with_pod = [0] * n
    without = [0] * n
    capacity = [0] * n
    for i, name in enumerate(spec.names):
        p = pod_reqs[i]
        scalar = spec.scalar[i]
        if p == 0 and scalar:
            continue
        if name == R_CPU:
            a = alloc.get(R_CPU, 0)
            w = req.get(R_CPU, 0) if use_requested else nz[0]
        elif name == R_MEMORY:
            a = alloc.get(R_MEMORY, 0)
            w = req.get(R_MEMORY, 0) if use_requested else nz[1]
        elif name == R_EPHEMERAL:
            a = alloc.get(R_EPHEMERAL, 0)
            w = req.get(R_EPHEMERAL, 0)
        elif scalar:
            a = alloc.get(name, 0)
            w = req.get(name, 0)
        else:
            continue
        if a == 0:
            continue
        capacity[i] = a
        without[i] = w
        with_pod[i] = w + p
    return with_pod, without, capacity


ScalarScorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]
"""``fn(requested, allocated, allocatable) -> score`` for one node."""


# ---------------------------------------------------------------- many rows (NumPy)

Column = tuple[np.ndarray, np.ndarray, np.ndarray] | None
"""(requested with the pod, requested without it, allocatable) over rows; None if left out
everywhere. Entries with allocatable 0 are left out on that row."""

VectorScorer = Callable[[list[Column], int], np.ndarray]
"""``fn(columns, n) -> int64 scores`` for ``n`` rows."""


def gather_columns(table: NodeTable, rows: np.ndarray, spec: ResourceSpec, pod_reqs: Sequence[int],
                   use_requested: bool) -> list[Column]:
    """``node_values`` for many rows of the node table at once."""
    idx = table.cols.index
    width = table.alloc.shape[1]
    out: list[Column] = []
    for i, name in enumerate(spec.names):
        p = pod_reqs[i]
        scalar = spec.scalar[i]
        if p == 0 and scalar:
            out.append(None)
            continue
        if name == R_CPU:
            a = table.alloc[rows, CPU]
            w = table.req[rows, CPU] if use_requested else table.nz[rows, 0]
        elif name == R_MEMORY:
            a = table.alloc[rows, MEMORY]
            w = table.req[rows, MEMORY] if use_requested else table.nz[rows, 1]
        elif name == R_EPHEMERAL:
            a = table.alloc[rows, EPHEMERAL]
            w = table.req[rows, EPHEMERAL]
        elif scalar:
            c = idx.get(name)
            if c is None or c >= width:
                out.append(None)  # no node has it: allocatable 0 everywhere
                continue
            a = table.alloc[rows, c]
            w = table.req[rows, c]
        else:
            out.append(None)
            continue
        out.append((w + p, w, a))
    return out


def scaled(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num * 100 // den`` elementwise for non-negative ``num`` and positive ``den``, exact
    (Python integers for the rare entries whose product would leave int64)."""
    if len(num) == 0 or int(num.max()) <= _SAFE_MUL:
        return num * MAX_NODE_SCORE // den
    out = np.empty(len(num), dtype=np.int64)
    for k, (x, d) in enumerate(zip(num.tolist(), den.tolist())):
        out[k] = x * MAX_NODE_SCORE // d
    return out


def safe_den(a: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(mask of rows where ``a`` is non-zero, or None if it is non-zero everywhere; ``a`` with
    zeros replaced by 1)."""
    valid = a != 0
    if valid.all():
        return None, a
    return valid, np.where(valid, a, 1)


def weighted_mean_scorer(weights: Sequence[int], resource_score: Callable[[int, int], int]) -> ScalarScorer:
    """The scorer of LeastAllocated and MostAllocated: ``resource_score(requested,
    allocatable)`` per resource, weighted mean with integer division over the resources the
    node has (allocatable not 0); 0 without any."""

    def score(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i in range(len(requested)):
            a = allocatable[i]
            if a == 0:
                continue
            w = weights[i]
            node_score += resource_score(requested[i], a) * w
            weight_sum += w
        if weight_sum == 0:
            return 0
        return node_score // weight_sum

    return score


def weighted_mean_vector_scorer(weights: Sequence[int],
                                resource_numerator: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> VectorScorer:
    """``weighted_mean_scorer`` over many rows: per resource ``scaled(resource_numerator(r, a),
    a)`` (the non-negative numerator of ``resource_score * allocatable / 100``)."""

    def score(cols: list[Column], n: int) -> np.ndarray:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for i, col in enumerate(cols):
            if col is None:
                continue
            r, _, a = col
            valid, den = safe_den(a)
            s = scaled(resource_numerator(r, a), den)
            w = weights[i]
            if valid is None:
                node_score += s * w
                weight_sum += w
            else:
                node_score += np.where(valid, s * w, 0)
                weight_sum += valid * w
        return node_score // np.maximum(weight_sum, 1)  # no resource: 0 // 1

    return score
