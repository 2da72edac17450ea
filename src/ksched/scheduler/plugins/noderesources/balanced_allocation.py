"""NodeResourcesBalancedAllocation: favours nodes whose resource usage gets more balanced with
the pod on them. Upstream: pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go
(v1.36, after kubernetes/kubernetes#135573).

Real requests (not the non-zero ones). Per node, each configured resource's fraction
``min(requested / allocatable, 1)`` (resources with allocatable 0, and scalar resources the
pod does not request, are left out); their standard deviation ``std`` gives the balance
``int((1 - std) * 100)``. The score is the change the pod brings:
``50 + (50 + balance_with_pod - balance_without_pod) / 2`` (integer division), so an unchanged
balance scores 75. PreScore skips pods that request none of the resources (best-effort pods,
kubernetes/kubernetes#129138).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    NodeList,
    PreScorePlugin,
    RowLocal,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedScore,
)
from ksched.scheduler.framework.signers import RESOURCES_SIGNER_NAME
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    Column,
    gather_columns,
    node_values,
    parse_resources,
    pod_request_list,
    requests_row_key,
)

__all__ = [
    "NAME",
    "PRE_SCORE_STATE_KEY",
    "BalancedAllocation",
    "balanced_resource_score",
    "balanced_resource_score_any",
    "balanced_resource_scorer",
    "balanced_resource_vector_scorer",
]

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY = "PreScore" + NAME

_HALF = MAX_NODE_SCORE // 2


def _go_half(x: int) -> int:
    """x / 2 truncated toward zero (Go)."""
    return x // 2 if x >= 0 else -((-x) // 2)


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``int((1 - std) * 100)`` over the fractions of the resources with allocatable > 0: for
    two resources ``std = |f1 - f2| / 2``, for more the population standard deviation, else 0."""
    if len(requested) == 2:
        a0 = allocatable[0]
        a1 = allocatable[1]
        if a0 != 0 and a1 != 0:
            # Two resources, both allocatable (the default): the same operations as below.
            f0 = float(requested[0]) / float(a0)
            if f0 > 1:
                f0 = 1.0
            f1 = float(requested[1]) / float(a1)
            if f1 > 1:
                f1 = 1.0
            return int((1 - abs((f0 - f1) / 2)) * float(MAX_NODE_SCORE))
    return balanced_resource_score_any(requested, allocatable)


def balanced_resource_score_any(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balanced_resource_score`` for any number of resources (the reference of its shortcut)."""
    fractions: list[float] = []
    total = 0.0
    for i in range(len(requested)):
        a = allocatable[i]
        if a == 0:
            continue
        f = float(requested[i]) / float(a)
        if f > 1:
            f = 1.0
        total += f
        fractions.append(f)
    std = 0.0
    k = len(fractions)
    if k == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif k > 2:
        mean = total / float(k)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / float(k))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_resource_scorer(requested: Sequence[int], allocated: Sequence[int],
                             allocatable: Sequence[int]) -> int:
    """The 1.36 score: half the maximum plus half the balance improvement, in [50, 100]."""
    with_pod = balanced_resource_score(requested, allocatable)
    without = balanced_resource_score(allocated, allocatable)
    return _HALF + _go_half(_HALF + with_pod - without)


def _balance_vector(values: list[np.ndarray | None], allocs: list[np.ndarray | None], n: int) -> np.ndarray:
    """``balanced_resource_score`` for many rows, with the same floating-point operations in
    the same order (left-out resources contribute exact zeros)."""
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float64)
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    fracs: list[tuple[np.ndarray, np.ndarray]] = []
    for v, a in zip(values, allocs):
        if v is None or a is None:
            continue
        valid = a != 0
        f = v.astype(np.float64) / np.where(valid, a, 1).astype(np.float64)
        f = np.where(f > 1, 1.0, f)
        f = np.where(valid, f, 0.0)
        total = total + f
        first = np.where(valid & (count == 0), f, first)
        second = np.where(valid & (count == 1), f, second)
        count += valid
        fracs.append((f, valid))
    std = np.zeros(n, dtype=np.float64)
    two = count == 2
    if two.any():
        std = np.where(two, np.abs((first - second) / 2), std)
    many = count > 2
    if many.any():
        kf = np.maximum(count, 1).astype(np.float64)
        mean = total / kf
        acc = np.zeros(n, dtype=np.float64)
        for f, valid in fracs:
            d = f - mean
            acc = acc + np.where(valid, d * d, 0.0)
        std = np.where(many, np.sqrt(acc / kf), std)
    return np.trunc((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def _balance_two(x1: np.ndarray, x2: np.ndarray, a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
    """``balanced_resource_score`` for two resources with allocatable > 0 on every row."""
    f1 = np.minimum(x1 / a1, 1.0)
    f2 = np.minimum(x2 / a2, 1.0)
    return np.trunc((1 - np.abs((f1 - f2) / 2)) * float(MAX_NODE_SCORE)).astype(np.int64)


def _go_half_vec(d: np.ndarray) -> np.ndarray:
    return np.where(d >= 0, d // 2, -((-d) // 2))


def balanced_resource_vector_scorer(cols: list[Column], n: int) -> np.ndarray:
    present = [c for c in cols if c is not None]
    if len(present) == 2:
        (r1, w1, a1), (r2, w2, a2) = present  # type: ignore[misc]
        if a1.all() and a2.all():
            # The usual case (cpu and memory on every node): two fractions, no left-out rows.
            fa1 = a1.astype(np.float64)
            fa2 = a2.astype(np.float64)
            d = _HALF + _balance_two(r1, r2, fa1, fa2) - _balance_two(w1, w2, fa1, fa2)
            return _HALF + _go_half_vec(d)
    with_vals: list[np.ndarray | None] = []
    without_vals: list[np.ndarray | None] = []
    allocs: list[np.ndarray | None] = []
    for col in cols:
        if col is None:
            with_vals.append(None)
            without_vals.append(None)
            allocs.append(None)
        else:
            r, w, a = col
            with_vals.append(r)
            without_vals.append(w)
            allocs.append(a)
    d = _HALF + _balance_vector(with_vals, allocs, n) - _balance_vector(without_vals, allocs, n)
    return _HALF + _go_half_vec(d)


class BalancedAllocation(PreScorePlugin, ScorePlugin, RowLocal, VectorizedScore, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.resources = parse_resources(self.args.get("resources"), "resources", weight_must_be_one=True)

    def pre_score_skips(self, pod: Pod) -> bool:
        """PreScore skips a pod that requests none of the resources (its template and the
        plugin's arguments alone; the runtime's ``TEMPLATE_SKIPS``)."""
        return not any(pod_request_list(pod, self.resources, True))

    def pre_score_template_state(self, pod: Pod) -> tuple[str, Any] | None:
        """What PreScore writes for the other pods: a value of the template (``TEMPLATE_SKIPS``)."""
        reqs = pod_request_list(pod, self.resources, True)
        return (PRE_SCORE_STATE_KEY, reqs) if any(reqs) else None

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        reqs = pod_request_list(pod, self.resources, True)
        if not any(reqs):
            # Best-effort pods would pile onto the same nodes (kubernetes/kubernetes#129138).
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, reqs)
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        reqs = state.get(PRE_SCORE_STATE_KEY)
        if reqs is None:
            reqs = pod_request_list(pod, self.resources, True)
            if not any(reqs):
                return 0, None
        with_pod, without, alloc = node_values(node_info, self.resources, reqs, True)
        return balanced_resource_scorer(with_pod, without, alloc), None

    def row_local_key(self, pod: Pod) -> Any:
        """The raw score on a node depends only on the NodeInfo and the pod's requests."""
        return requests_row_key(pod)

    def row_local_key_templated(self, pod: Pod) -> bool:
        """The key is of the pod's requests: its template's."""
        return True

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The score depends on the pod's requests (the same fragment as NodeResourcesFit's)."""
        return [SignFragment(RESOURCES_SIGNER_NAME, requests_row_key(pod))], None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        reqs = state.get(PRE_SCORE_STATE_KEY)
        if reqs is None:
            reqs = pod_request_list(pod, self.resources, True)
            if not any(reqs):
                return np.zeros(len(rows), dtype=np.int64)
        cols = gather_columns(snapshot.table, rows, self.resources, reqs, True)
        return balanced_resource_vector_scorer(cols, len(rows))
