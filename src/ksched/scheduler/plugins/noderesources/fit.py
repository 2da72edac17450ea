"""NodeResourcesFit: a node must have room for the pod's requests; scoring by one of three
strategies (LeastAllocated, MostAllocated, RequestedToCapacityRatio). Upstream:
pkg/scheduler/framework/plugins/noderesources/fit.go (v1.36).

Filter (real requests, not the non-zero ones):

- "Too many pods" if the node already holds ``allocatable.pods`` pods;
- for cpu, memory, ephemeral-storage and every scalar resource the pod requests (> 0):
  "Insufficient <name>" if the request exceeds ``allocatable - requested``. Extended resources
  listed in ``ignoredResources`` or whose domain is in ``ignoredResourceGroups`` are not checked;
- the status is UnschedulableAndUnresolvable if some request alone exceeds the node's
  allocatable (preemption cannot help), Unschedulable otherwise;
- DRAExtendedResource (beta, on in 1.36; ``shouldDelegateResourceToDRA``): a resource some
  DeviceClass stands for (``extendedResourceName`` or ``deviceclass.resource.kubernetes.io/<class>``)
  is not checked on a node whose allocatable for it is 0: DynamicResources allocates devices
  for it there. Only with the DRA manager (a profile of the scheduler has DynamicResources).
  Known divergence: Score does not count DRA devices for such a resource when it is among the
  ``scoringStrategy.resources`` (upstream's ``draPreScoreState``); the default strategy scores
  cpu and memory only.

:func:`fits_request` exposes the check for preemption and other callers.

Score, an upstream quirk kept on purpose: the incoming pod is scored by its containers' requests
(with the non-zero defaults), its pod-level ``spec.resources`` ignored -- in 1.36 the scorer is
built without the PodLevelResources gate -- while Filter and every node's requested totals
(bound pods included) count pod-level resources. Scores and chosen nodes for pods with
pod-level resources therefore match kube-scheduler's, not what the spec would suggest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resource import is_dra_extended_resource_name
from ksched.api.resources import is_extended_resource, pod_requests
from ksched.boundedcache import BoundedCache
from ksched.scheduler.cache.node_table import PODS
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    RowLocal,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
    VectorizedFilterStatuses,
    VectorizedScore,
)
from ksched.scheduler.framework.signers import RESOURCES_SIGNER_NAME
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.dynamicresources.manager import existing_manager
from ksched.scheduler.plugins.noderesources.least_allocated import (
    least_resource_scorer,
    least_resource_vector_scorer,
)
from ksched.scheduler.plugins.noderesources.most_allocated import (
    most_resource_scorer,
    most_resource_vector_scorer,
)
from ksched.scheduler.plugins.noderesources.requested_to_capacity_ratio import (
    parse_shape,
    requested_to_capacity_ratio_scorer,
    requested_to_capacity_ratio_vector_scorer,
)
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    R_CPU,
    R_EPHEMERAL,
    R_MEMORY,
    ScalarScorer,
    VectorScorer,
    gather_columns,
    is_scalar_resource_name,
    node_values,
    parse_resources,
    pod_request_list,
    requests_row_key,
)

__all__ = [
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "NAME",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "REQUESTED_TO_CAPACITY_RATIO",
    "Fit",
    "InsufficientResource",
    "fits",
    "fits_request",
    "have_any_requested_resources_increased",
    "insufficient_resources",
    "is_fit",
    "request_checks",
]

NAME = "NodeResourcesFit"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

ERR_TOO_MANY_PODS = "Too many pods"
R_PODS = "pods"
_CORE = (R_CPU, R_MEMORY, R_EPHEMERAL)

_reasons: BoundedCache[str, str] = BoundedCache()


def _reason(name: str) -> str:
    r = _reasons.get(name)
    if r is None:
        r = _reasons.put(name, f"Insufficient {name}")
    return r


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    """A resource the node lacks for the pod: what the pod asks, what the node's pods already
    request, the node's allocatable, and whether the request alone exceeds the allocatable."""

    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool = False


Checks = tuple[tuple[str, int], ...]


def request_checks(requests: Mapping[str, int], ignored_resources: Iterable[str] = (),
                   ignored_resource_groups: Iterable[str] = ()) -> Checks:
    """The (resource, quantity) pairs Filter checks, in upstream's order: cpu, memory,
    ephemeral-storage, then the scalar resources (extended, hugepages, ``kubernetes.io/``
    names). Zero requests and ignored extended resources are left out; other names (``pods``,
    ``storage``, ...) are not checked, as upstream."""
    ignored = ignored_resources if isinstance(ignored_resources, frozenset) else frozenset(ignored_resources)
    groups = (ignored_resource_groups if isinstance(ignored_resource_groups, frozenset)
              else frozenset(ignored_resource_groups))
    out: list[tuple[str, int]] = []
    for name in _CORE:
        q = requests.get(name, 0)
        if q > 0:
            out.append((name, q))
    for name, q in requests.items():
        if q <= 0 or name in _CORE or not is_scalar_resource_name(name):
            continue
        if is_extended_resource(name) and (
                name in ignored or (groups and name.split("/", 1)[0] in groups)):
            continue
        out.append((name, q))
    return tuple(out)


def insufficient_resources(checks: Checks, node_info: NodeInfo,
                           delegable: frozenset[str] = frozenset()) -> list[InsufficientResource]:
    """What ``node_info`` lacks for a pod with these checks (upstream's fitsRequest);
    ``delegable``: resources DRA provides where the node's allocatable for them is 0."""
    alloc = node_info.allocatable
    allowed = alloc.get(R_PODS, 0)
    n = len(node_info.pods)
    out: list[InsufficientResource] = []
    if n + 1 > allowed:
        out.append(InsufficientResource(R_PODS, ERR_TOO_MANY_PODS, 1, n, allowed))
    if not checks:
        return out
    req = node_info.requested
    for name, q in checks:
        a = alloc.get(name, 0)
        if a <= 0 and name in delegable:
            continue
        used = req.get(name, 0)
        if q > a - used:
            out.append(InsufficientResource(name, _reason(name), q, used, a, q > a))
    return out


def fits_request(pod_request: PodInfo | Mapping[str, int], node_info: NodeInfo,
                 ignored_resources: Iterable[str] = (),
                 ignored_resource_groups: Iterable[str] = ()) -> list[InsufficientResource]:
    """The resources ``node_info`` lacks for a pod (a PodInfo, or the pod's effective requests
    as from ``pod_requests``); empty if it fits. The check NodeResourcesFit's Filter makes."""
    requests = pod_request.requests if isinstance(pod_request, PodInfo) else pod_request
    return insufficient_resources(request_checks(requests, ignored_resources, ignored_resource_groups),
                                  node_info)


def fits(pod: Pod, node_info: NodeInfo) -> list[InsufficientResource]:
    """Upstream's Fits: ``fits_request`` with the pod's requests and nothing ignored."""
    return fits_request(pod_requests(pod), node_info)


def is_fit(pod: Pod, node: Node | None) -> bool:
    """Whether the pod fits an empty node (upstream's isFit, used by the queueing hint)."""
    if node is None:
        return False
    return not fits(pod, NodeInfo(node))


def have_any_requested_resources_increased(pod: Pod, original: Node, modified: Node) -> bool:
    """Whether the node's allowed pod count, or the allocatable of any resource the pod
    requests, went up."""
    old = original.allocatable
    new = modified.allocatable
    if new.get(R_PODS, 0) > old.get(R_PODS, 0):
        return True
    for name, q in pod_requests(pod).items():
        if q <= 0 or not (name in _CORE or is_scalar_resource_name(name)):
            continue
        if new.get(name, 0) > old.get(name, 0):
            return True
    return False


def _is_schedulable_after_pod_scale_down(target: Pod, original: Pod | None, modified: Pod) -> bool:
    """A scale-down of the pod itself, or of a scheduled pod in a resource the target requests."""
    if modified.uid == target.uid:
        return True
    if modified.node_name == "":
        return False
    before = pod_requests(original) if original is not None else {}
    after = pod_requests(modified)
    for name, q in pod_requests(target).items():
        if q == 0 or not (name in _CORE or is_scalar_resource_name(name)):
            continue
        if before.get(name, 0) > after.get(name, 0):
            return True
    return False


def _as(kind: type, old: Any, new: Any) -> None:
    for obj in (old, new):
        if obj is not None and not isinstance(obj, kind):
            raise TypeError(f"unexpected object type {type(obj).__name__}, want {kind.__name__}")
    if old is None and new is None:
        raise TypeError(f"no {kind.__name__} in the event")


class _PreFilterState(StateData):
    __slots__ = ("checks", "core_only", "delegable", "requests")

    def __init__(self, requests: Mapping[str, int], checks: Checks,
                 delegable: frozenset[str] = frozenset()) -> None:
        self.requests = requests
        self.checks = checks
        self.delegable = delegable
        # Only cpu, memory, ephemeral-storage checked: no DeviceClass can stand for them.
        self.core_only = all(n in _CORE for n, _ in checks)


_NOTHING: frozenset[str] = frozenset()


class Fit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions, RowLocal,
        VectorizedFilter, VectorizedFilterStatuses, VectorizedScore, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        a = self.args
        self.ignored_resources: frozenset[str] = frozenset(a.get("ignoredResources") or ())
        self.ignored_resource_groups: frozenset[str] = frozenset(a.get("ignoredResourceGroups") or ())
        for i, g in enumerate(sorted(self.ignored_resource_groups)):
            if "/" in g:
                raise ValueError(f'ignoredResourceGroups[{i}]: Invalid value: "{g}": '
                                 "resource group name can't contain '/'")
        ss = a.get("scoringStrategy") or {}
        self.strategy: str = ss.get("type") or LEAST_ALLOCATED
        self.resources = parse_resources(ss.get("resources"), "scoringStrategy.resources")
        weights = self.resources.weights
        self._scorer: ScalarScorer
        self._vector: VectorScorer
        if self.strategy == LEAST_ALLOCATED:
            self._scorer = least_resource_scorer(weights)
            self._vector = least_resource_vector_scorer(weights)
        elif self.strategy == MOST_ALLOCATED:
            self._scorer = most_resource_scorer(weights)
            self._vector = most_resource_vector_scorer(weights)
        elif self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            shape = parse_shape((ss.get("requestedToCapacityRatio") or {}).get("shape"),
                                "scoringStrategy.requestedToCapacityRatio.shape")
            self._scorer = requested_to_capacity_ratio_scorer(weights, shape)
            self._vector = requested_to_capacity_ratio_vector_scorer(weights, shape)
        else:
            raise ValueError(f"scoring strategy {self.strategy} is not supported")
        self._state_key = (f"{NAME}.preFilter:{','.join(sorted(self.ignored_resources))}"
                           f"|{','.join(sorted(self.ignored_resource_groups))}")

    # ---------------------------------------------------------------- PreFilter / Filter

    def _pre_filter_state(self, pod: Pod) -> _PreFilterState:
        cache = template_cache(pod)
        s = cache.get(self._state_key)
        if s is None:
            reqs = pod_requests(pod)
            s = cache[self._state_key] = _PreFilterState(
                reqs, request_checks(reqs, self.ignored_resources, self.ignored_resource_groups))
        return s  # type: ignore[no-any-return]

    def _delegable(self, pod: Pod, checks: Checks) -> frozenset[str]:
        """The checked resources a DeviceClass stands for (DRA may provide them)."""
        if all(n in _CORE for n, _ in checks):
            return _NOTHING
        m = existing_manager(getattr(self.handle, "informers", None))
        if m is None:
            return _NOTHING
        resolver = m.resolver()
        if not resolver:
            return _NOTHING
        cache = pod.cached()
        hit = cache.get("dra.delegable")
        if hit is not None and hit[0] is resolver and hit[1] is checks:
            return hit[2]  # type: ignore[no-any-return]
        out = frozenset(n for n, _ in checks if is_dra_extended_resource_name(n) and resolver.get(n) is not None)
        cache["dra.delegable"] = (resolver, checks, out or _NOTHING)
        return out or _NOTHING

    def pre_filter_template_state(self, pod: Pod) -> tuple[str, Any] | None:
        """What PreFilter writes for a pod whose checked resources are all core ones (no
        DeviceClass can stand for them): a value of its template and the plugin's arguments
        (the runtime's ``TEMPLATE_SKIPS``); None for the others (their state reads DRA's)."""
        s = self._pre_filter_state(pod)
        return (PRE_FILTER_STATE_KEY, s) if s.core_only else None

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        s = self._pre_filter_state(pod)
        delegable = _NOTHING if s.core_only else self._delegable(pod, s.checks)
        if delegable:
            s = _PreFilterState(s.requests, s.checks, delegable)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        ins = insufficient_resources(s.checks, node_info, s.delegable)
        if not ins:
            return None
        code = Code.UNSCHEDULABLE
        for r in ins:
            if r.unresolvable:
                code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                break
        return Status(code, *(r.reason for r in ins))

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return np.zeros(len(rows), dtype=bool)
        table = snapshot.table
        ok: np.ndarray = table.req[rows, PODS] < table.alloc[rows, PODS]
        if not s.checks:
            return ok
        idx = table.cols.index
        width = table.alloc.shape[1]
        for name, q in s.checks:
            c = idx.get(name)
            if c is None or c >= width:
                # No node has (or requests) this resource: allocatable 0 everywhere.
                if name in s.delegable:
                    continue
                return np.zeros(len(rows), dtype=bool)
            if name in s.delegable:
                ok &= (table.alloc[rows, c] - table.req[rows, c] >= q) | (table.alloc[rows, c] <= 0)
            else:
                ok &= table.alloc[rows, c] - table.req[rows, c] >= q
        return ok

    def filter_statuses(self, state: CycleState, pod: Pod, snapshot: Snapshot,
                        rows: np.ndarray) -> tuple[np.ndarray, list[Status]] | None:
        """Filter's status on many nodes at once, for diagnosing a pod that fits nowhere: per
        row an index into the distinct statuses (-1: fits). The same reasons, in the same
        order, and the same codes as ``filter`` on each node."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if s is None or len(s.checks) > 30 or s.delegable:
            return None
        table = snapshot.table
        idx = table.cols.index
        width = table.alloc.shape[1]
        bits = (table.req[rows, PODS] + 1 > table.alloc[rows, PODS]).astype(np.int64)
        for i, (name, q) in enumerate(s.checks):
            c = idx.get(name)
            if c is None or c >= width:
                alloc = np.zeros(len(rows), dtype=np.int64)
                used = alloc
            else:
                alloc = table.alloc[rows, c]
                used = table.req[rows, c]
            bits |= (q > alloc - used).astype(np.int64) << (1 + 2 * i)
            bits |= (q > alloc).astype(np.int64) << (2 + 2 * i)
        uniq, which = np.unique(bits, return_inverse=True)
        distinct: list[Status] = []
        remap = np.empty(len(uniq), dtype=np.int64)
        for k, b in enumerate(uniq.tolist()):
            if b == 0:
                remap[k] = -1
                continue
            reasons = [ERR_TOO_MANY_PODS] if b & 1 else []
            unresolvable = False
            for i, (name, _q) in enumerate(s.checks):
                if b >> (1 + 2 * i) & 1:
                    reasons.append(_reason(name))
                    unresolvable = unresolvable or bool(b >> (2 + 2 * i) & 1)
            remap[k] = len(distinct)
            distinct.append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE,
                                   *reasons))
        return remap[which.reshape(-1)], distinct

    def row_local_key(self, pod: Pod) -> Any:
        """Filter and raw Score on a node depend only on the NodeInfo and the pod's requests (and
        which of them DRA may provide)."""
        key = requests_row_key(pod)
        s = self._pre_filter_state(pod)
        delegable = _NOTHING if s.core_only else self._delegable(pod, s.checks)
        return (key, delegable) if delegable else key

    def row_local_key_templated(self, pod: Pod) -> bool:
        """The key is of the pod's requests (its template's) when it checks core resources only;
        otherwise it also holds which resources a DeviceClass stands for right now."""
        return self._pre_filter_state(pod).core_only

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """Filter and Score depend on the pod's requests (as upstream, whose value is the
        requests PreFilter computes; ksched's is the row-local key, which also holds the
        non-zero requests Score uses and the container-level requests where they differ)."""
        return [SignFragment(RESOURCES_SIGNER_NAME, requests_row_key(pod))], None

    # ---------------------------------------------------------------- PreScore / Score

    def _pod_requests(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        r = state.get(PRE_SCORE_STATE_KEY)
        if r is None:
            r = pod_request_list(pod, self.resources, False, pod_level=False)
        return r  # type: ignore[no-any-return]

    def pre_score_template_state(self, pod: Pod) -> tuple[str, Any] | None:
        """What PreScore writes: a value of the pod's template and the plugin's arguments (the
        runtime's ``TEMPLATE_SKIPS``)."""
        return PRE_SCORE_STATE_KEY, pod_request_list(pod, self.resources, False, pod_level=False)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        # Upstream quirk (1.36): Fit's scorer is built without the PodLevelResources gate, so the
        # incoming pod is scored by its containers (with the non-zero defaults), pod-level
        # resources ignored, while Filter and the nodes' requested totals count them.
        state.write(PRE_SCORE_STATE_KEY, pod_request_list(pod, self.resources, False, pod_level=False))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        reqs = self._pod_requests(state, pod)
        with_pod, without, alloc = node_values(node_info, self.resources, reqs, False)
        return self._scorer(with_pod, without, alloc), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        reqs = self._pod_requests(state, pod)
        cols = gather_columns(snapshot.table, rows, self.resources, reqs, False)
        return self._vector(cols, len(rows))

    # ---------------------------------------------------------------- queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # As upstream with InPlacePodVerticalScaling (GA) and queueing hints (GA): a deleted or
        # scaled-down pod may free room; an added node or one with more allocatable may fit.
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                self.is_schedulable_after_pod_event),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_pod_event(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A deleted pod that was scheduled (or nominated) frees room; a scale-down helps if it is
        the pod itself or lowers a scheduled pod's request of something the pod requests."""
        _as(Pod, old, new)
        if new is None:
            if old.node_name == "" and old.nominated_node_name == "":
                return QueueingHint.QUEUE_SKIP
            return QueueingHint.QUEUE
        if not _is_schedulable_after_pod_scale_down(pod, old, new):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A new node the pod fits on; an updated node the pod fits on whose allocatable of
        something the pod requests (or pod count) went up."""
        _as(Node, old, new)
        if not is_fit(pod, new):
            return QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        if not have_any_requested_resources_increased(pod, old, new):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
