"""PodTopologySpread: spread matching pods evenly over topology domains (upstream's
``pkg/scheduler/framework/plugins/podtopologyspread``, 1.35/1.36 behaviour: plugin.go and
common.go of the ``k8s.io/kube-scheduler/framework`` era with SignPlugin and queueing hints,
scoring.go with per-node hostname counting, filtering.go; feature gates at their 1.36 values).

Extension points, as upstream:

- **PreFilter** gathers the pod's hard (``DoNotSchedule``) constraints, or the cluster default
  constraints when the pod has none, and counts matching pods per topology domain over all
  nodes. It returns Skip when there are no (effective) hard constraints.
- **PreFilterExtensions** ``add_pod``/``remove_pod`` update those counts (nominated pods,
  preemption victims); the state is cloneable (copy on write).
- **Filter**: a node without a constraint's topology key is UnschedulableAndUnresolvable
  (``node(s) didn't match pod topology spread constraints (missing required label)``);
  ``matchNum(node's domain) + selfMatch - minMatchNum > maxSkew`` is Unschedulable
  (``node(s) didn't match pod topology spread constraints``). ``minMatchNum`` is the global
  minimum over eligible domains, or 0 while there are fewer eligible domains than
  ``minDomains``.
- **PreScore/Score/NormalizeScore** for the soft (``ScheduleAnyway``) constraints: raw score
  ``round(sum_c(count_c * ln(size_c + 2) + maxSkew_c - 1))``, nodes missing a topology key are
  ignored (score 0) unless the constraints come from system defaulting; normalized as
  ``100 * (max + min - s) / max`` (100 for all when ``max == 0``). PreScore returns Skip when
  there are no soft constraints.
- **EnqueueExtensions** with upstream's queueing hints (pod add / label update / toleration
  update / delete; node add / delete / label update / taint update).

Counted pods: same namespace as the incoming pod, not terminating, matched by the constraint's
selector (an empty selector counts nothing, as upstream's ``countPodsMatchSelector``).
``nodeAffinityPolicy`` (default Honor) and ``nodeTaintsPolicy`` (default Ignore) decide per
constraint which nodes' pods are counted. ``matchLabelKeys`` arrive already merged into the
selector by ``ksched.api`` (as the API server does), so the plugin does not merge them again.

How it is made fast (columnar, as the rest of ksched):

- A node's topology domain for a key is an integer id (``_DomainIndex``), kept per snapshot row
  by ``Snapshot.row_values`` and shared by every pod that spreads on that key; id 0 means the
  node lacks the label.
- Which domain a node's pods count toward for a constraint shape (keys required, inclusion
  policies) is another per-row array kept by ``row_values`` (``_eligible_domains``).
- Matching-pod counts per node row are cached per (namespace, selector), and their sums per
  domain per (namespace, selector, constraint shape); both are updated only for rows whose node
  generation changed since the previous cycle (``_RowCache``). Filter turns the per-domain counts
  into a per-domain verdict and gathers it by row; Score gathers per-domain counts by row.

Divergences from upstream, knowingly:

- **Default constraints' selector.** Upstream derives it (``helper.DefaultSelector``) from the
  Services selecting the pod and from the pod's controller (ReplicationController, ReplicaSet,
  StatefulSet) through listers. ksched has no such kinds yet. The plugin uses listers when the
  handle's informer factory already holds informers for those kinds (``Service``,
  ``ReplicationController``, ``ReplicaSet``, ``StatefulSet``; objects read from their manifest),
  exactly as upstream. When the informer for the pod's controller kind is absent, the selector
  is instead "pods whose controller ownerReference names the same kind and name" (ANDed with any
  Service selector): the pods an RS/SS/RC selector would normally select. Pods whose only link
  is a Service get no default constraints while no Service informer exists.
- **The global minimum under add/remove** is exact (recomputed from the per-domain counts).
  Upstream tracks two "critical paths"; both agree whenever the updates touch one node, which
  is how preemption and nominated-pod filtering use them.
- **Tolerations** use ``ksched.api.taints`` matching (``Gt``/``Lt`` follow upstream's gate, off).
- **Domain ids** are interned for the life of the process (a key's distinct values only grow).
- Score sums each constraint's term in constraint order in float64 as upstream does; Go may
  fuse a multiply-add on some CPUs (arm64), NumPy does not, so a raw score sitting exactly on a
  rounding boundary could differ by one there.
- Upstream's SignPlugin (opportunistic batching) has no counterpart in ksched.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ksched.api.labels import LabelSelector, NodeSelector, NodeSelectorTerm, Requirement
from ksched.api.node import Node
from ksched.api.pod import Pod, TopologySpreadConstraint
from ksched.api.taints import Toleration, find_untolerated_taint
from ksched.client.informer import DeletedFinalStateUnknown
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
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
]

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

# Controller kinds whose selector upstream's DefaultSelector uses: (apiVersion, kind).
_RC_KIND = ("v1", "ReplicationController")
_RS_KIND = ("apps/v1", "ReplicaSet")
_SS_KIND = ("apps/v1", "StatefulSet")
_CONTROLLER_KINDS = (_RC_KIND, _RS_KIND, _SS_KIND)
_LISTER_KINDS = ("Service", _RC_KIND[1], _RS_KIND[1], _SS_KIND[1])
_INSTANCES = itertools.count()

_MAX_INT32 = 2**31 - 1


# ---------------------------------------------------------------- topology domains


class _DomainIndex:
    """Topology values of one key -> dense ids (id 0: the node does not have the label)."""

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.values: list[str | None] = [None]

    def id_of(self, value: str) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i

    def __len__(self) -> int:
        return len(self.values)


_DOMAINS: dict[str, _DomainIndex] = {}


def _domain_index(key: str) -> _DomainIndex:
    idx = _DOMAINS.get(key)
    if idx is None:
        idx = _DOMAINS.setdefault(key, _DomainIndex())
    return idx


def _domain_rows(snapshot: Snapshot, key: str) -> np.ndarray:
    """Domain id of every snapshot row for ``key`` (0: label missing or free row)."""
    idx = _domain_index(key)

    def fn(ni: NodeInfo) -> int:
        v = ni.node.labels.get(key) if ni.node is not None else None
        return 0 if v is None else idx.id_of(v)

    return snapshot.row_values(("PodTopologySpread.domain", key), fn, np.int64)


def _gather(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``values[ids]`` where ids past the end (domains interned later) read 0."""
    n = len(values)
    if ids.size and int(ids.max()) >= n:
        values = np.concatenate([values, np.zeros(int(ids.max()) + 1 - n, dtype=values.dtype)])
    return values[ids]


# ---------------------------------------------------------------- selectors and constraints

LabelMatcher = Callable[[Mapping[str, str]], bool]


def _compile_labels(sel: LabelSelector) -> LabelMatcher:
    """A fast matcher equivalent to ``sel.matches``."""
    if sel.is_nothing():
        return lambda labels: False
    checks: list[LabelMatcher] = []
    for r in sel.requirements:
        k = r.key
        if r.op == "In" and len(r.values) == 1:
            v = r.values[0]
            checks.append(lambda labels, k=k, v=v: labels.get(k) == v)  # type: ignore[misc]
        elif r.op == "In":
            vs = frozenset(r.values)
            checks.append(lambda labels, k=k, vs=vs: labels.get(k) in vs)  # type: ignore[misc]
        elif r.op == "NotIn":
            vs = frozenset(r.values)
            checks.append(lambda labels, k=k, vs=vs: labels.get(k) not in vs)  # type: ignore[misc]
        elif r.op == "Exists":
            checks.append(lambda labels, k=k: k in labels)  # type: ignore[misc]
        elif r.op == "DoesNotExist":
            checks.append(lambda labels, k=k: k not in labels)  # type: ignore[misc]
        else:
            checks.append(r.matches)
    if not checks:
        return lambda labels: True
    if len(checks) == 1:
        return checks[0]
    return lambda labels: all(c(labels) for c in checks)


class _Selector:
    """A constraint's pod selector: a label selector, optionally restricted to the pods whose
    controller is a given ``(kind, name)`` (the default-constraints fallback, see the module
    docstring). ``empty`` mirrors ``labels.Selector.Empty()`` (upstream counts nothing then)."""

    __slots__ = ("_hash", "_match_labels", "empty", "key", "labels", "owner")

    def __init__(self, labels: LabelSelector, owner: tuple[str, str] | None = None) -> None:
        self.labels = labels
        self.owner = owner
        self.empty = owner is None and labels.is_empty()
        self.key = (labels.key, owner)
        self._hash = hash(self.key)
        self._match_labels = _compile_labels(labels)

    def matches(self, pod: Pod) -> bool:
        if self.owner is not None:
            ref = pod.controller_ref()
            if ref is None or (ref.kind, ref.name) != self.owner:
                return False
        return self._match_labels(pod.labels)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Selector) and self._hash == other._hash and self.key == other.key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        own = f", owner={self.owner}" if self.owner else ""
        return f"_Selector({self.labels!r}{own})"


_EMPTY_SELECTOR = _Selector(LabelSelector(()))


class _Constraint:
    """Upstream's internal topologySpreadConstraint (selector parsed, policies defaulted)."""

    __slots__ = ("honor_affinity", "honor_taints", "is_hostname", "max_skew", "min_domains", "selector",
                 "topology_key")

    def __init__(self, max_skew: int, topology_key: str, selector: _Selector, min_domains: int,
                 node_affinity_policy: str, node_taints_policy: str) -> None:
        self.max_skew = max_skew
        self.topology_key = topology_key
        self.selector = selector
        self.min_domains = min_domains
        self.honor_affinity = node_affinity_policy == HONOR
        self.honor_taints = node_taints_policy == HONOR
        self.is_hostname = topology_key == LABEL_HOSTNAME

    def __repr__(self) -> str:
        return (f"_Constraint(maxSkew={self.max_skew}, key={self.topology_key!r}, {self.selector!r}, "
                f"minDomains={self.min_domains}, affinity={'Honor' if self.honor_affinity else 'Ignore'}, "
                f"taints={'Honor' if self.honor_taints else 'Ignore'})")


_CONSTRAINTS: dict[tuple[object, ...], _Constraint] = {}


def _from_api(c: TopologySpreadConstraint) -> _Constraint:
    """The parsed constraint, shared by every pod whose constraint is the same (replicas of one
    template): _Constraint and _Selector are immutable."""
    key = (c.max_skew, c.topology_key, c.label_selector.key, c.min_domains, c.node_affinity_policy,
           c.node_taints_policy)
    got = _CONSTRAINTS.get(key)
    if got is None:
        if len(_CONSTRAINTS) > 4096:
            _CONSTRAINTS.clear()
        got = _CONSTRAINTS[key] = _Constraint(c.max_skew, c.topology_key, _Selector(c.label_selector),
                                              c.min_domains, c.node_affinity_policy, c.node_taints_policy)
    return got


def _pod_constraints(pod: Pod, action: str) -> tuple[_Constraint, ...]:
    """The pod's own constraints with ``whenUnsatisfiable == action`` (computed once per Pod)."""
    cache = pod.cached()
    key = "podtopologyspread." + action
    got = cache.get(key)
    if got is None:
        got = cache[key] = tuple(_from_api(c) for c in pod.topology_spread_constraints
                                 if c.when_unsatisfiable == action)
    return got  # type: ignore[no-any-return]


def _node_has_keys(labels: Mapping[str, str], constraints: Sequence[_Constraint]) -> bool:
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


def _count_matching(pods: Sequence[PodInfo], selector: _Selector, namespace: str) -> int:
    """Upstream's countPodsMatchSelector."""
    if selector.empty:
        return 0
    n = 0
    for pi in pods:
        p = pi.pod
        if p.deletion_timestamp is not None or p.namespace != namespace:
            continue
        if selector.matches(p):
            n += 1
    return n


# ---------------------------------------------------------------- node inclusion policies


def _requirement_ok(r: Requirement) -> bool:
    """Whether a node selector requirement parses (upstream skips terms that do not)."""
    op = r.op
    if op in ("In", "NotIn"):
        return bool(r.values)
    if op in ("Exists", "DoesNotExist"):
        return not r.values
    if op in ("Gt", "Lt"):
        if len(r.values) != 1:
            return False
        try:
            int(r.values[0])
        except ValueError:
            return False
        return True
    return False


def _term_matches(term: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    if not term.labels and not term.fields:
        return False
    for r in term.labels:
        if not _requirement_ok(r) or not r.matches(labels):
            return False
    for r in term.fields:
        if r.key != "metadata.name" or r.op not in ("In", "NotIn") or len(r.values) != 1:
            return False
        if (name == r.values[0]) != (r.op == "In"):
            return False
    return True


class _RequiredAffinity:
    """The pod's ``nodeSelector`` AND its required node affinity (upstream's
    ``nodeaffinity.GetRequiredNodeAffinity``; terms that do not parse never match)."""

    __slots__ = ("key", "node_selector", "terms")

    def __init__(self, pod: Pod) -> None:
        self.node_selector = tuple(sorted(pod.node_selector.items()))
        aff = pod.affinity
        req: NodeSelector | None = aff.node_affinity.required if aff is not None and aff.node_affinity else None
        self.terms = req.terms if req is not None else None
        self.key = (self.node_selector, req.key() if req is not None else None)

    def is_empty(self) -> bool:
        return not self.node_selector and self.terms is None

    def match(self, node: Node) -> bool:
        labels = node.labels
        for k, v in self.node_selector:
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        for t in self.terms:
            if _term_matches(t, node.name, labels):
                return True
        return False


def _required_affinity(pod: Pod) -> _RequiredAffinity:
    cache = pod.cached()
    r = cache.get("podtopologyspread.affinity")
    if r is None:
        r = cache["podtopologyspread.affinity"] = _RequiredAffinity(pod)
    return r  # type: ignore[no-any-return]


def _tolerations_key(tolerations: Sequence[Toleration]) -> tuple[Any, ...]:
    return tuple((*t.key_tuple(), t.toleration_seconds) for t in tolerations)


def _taints_tolerated(node: Node, tolerations: Sequence[Toleration]) -> bool:
    return find_untolerated_taint(node.taints, tolerations) is None


def _inclusion_ok(c: _Constraint, pod: Pod, node: Node, affinity: _RequiredAffinity) -> bool:
    """Upstream's matchNodeInclusionPolicies."""
    if c.honor_affinity and not affinity.match(node):
        return False
    return not (c.honor_taints and not _taints_tolerated(node, pod.tolerations))


def _eligible_domains(snapshot: Snapshot, pod: Pod, c: _Constraint, required: tuple[str, ...],
                      missing_as_empty: bool) -> tuple[tuple[Any, ...], np.ndarray]:
    """For every snapshot row, the domain id (of ``c.topology_key``) its matching pods count
    toward for ``pod``, or 0 when they do not count: the node lacks one of ``required`` or fails
    ``c``'s inclusion policies. With ``missing_as_empty`` a node without the key counts toward the
    domain ``""`` (upstream's scoring under system defaulting). Kept by ``Snapshot.row_values``,
    so it is shared by pods with the same constraint shape and refreshed when nodes change."""
    key = c.topology_key
    aff: _RequiredAffinity | None = _required_affinity(pod) if c.honor_affinity else None
    if aff is not None and aff.is_empty():
        aff = None
    tols: Sequence[Toleration] | None = pod.tolerations if c.honor_taints else None
    rkey = ("PodTopologySpread.eligible", key, required, missing_as_empty,
            aff.key if aff is not None else None, _tolerations_key(tols) if tols is not None else None)
    idx = _domain_index(key)
    empty_id = idx.id_of("") if missing_as_empty else 0

    def fn(ni: NodeInfo) -> int:
        node = ni.node
        assert node is not None
        labels = node.labels
        for k in required:
            if k not in labels:
                return 0
        if aff is not None and not aff.match(node):
            return 0
        if tols is not None and not _taints_tolerated(node, tols):
            return 0
        v = labels.get(key)
        return empty_id if v is None else idx.id_of(v)

    return rkey, snapshot.row_values(rkey, fn, np.int64)


def _fit(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` zero-padded to at least ``n`` entries."""
    if len(a) >= n:
        return a
    return np.concatenate([a, np.zeros(n - len(a), dtype=a.dtype)])


# ---------------------------------------------------------------- matching-pod counts per row


class _RowCounts:
    """Matching pods per row for one (namespace, selector), with the generation counted at."""

    __slots__ = ("counts", "gens", "synced_at", "version")

    def __init__(self, n: int) -> None:
        self.gens = np.full(n, -1, dtype=np.int64)
        self.counts = np.zeros(n, dtype=np.int64)
        self.version = -1
        self.synced_at = -1  # the snapshot generation every row was counted at (-1: not yet)

    def fit(self, n: int) -> None:
        if len(self.gens) < n:
            extra = n - len(self.gens)
            self.gens = np.concatenate([self.gens, np.full(extra, -1, dtype=np.int64)])
            self.counts = np.concatenate([self.counts, np.zeros(extra, dtype=np.int64)])


class _DomainSums:
    """Matching pods and eligible nodes per domain id over all rows, for one (namespace,
    selector, eligible-domain array); each row's contribution is replaced when its generation
    changes. Index 0 collects the rows that do not count."""

    __slots__ = ("gens", "nodes", "row_cnt", "row_dom", "sums", "synced_at", "version")

    FULL_REBUILD = 256

    def __init__(self) -> None:
        self.version = -1
        self.synced_at = -1
        self.gens = np.zeros(0, dtype=np.int64)
        self.row_dom = np.zeros(0, dtype=np.int64)
        self.row_cnt = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros(1, dtype=np.int64)
        self.nodes = np.zeros(1, dtype=np.int64)

    def refresh(self, gens: np.ndarray, row_dom: np.ndarray, counts: np.ndarray, size: int,
                changed: np.ndarray | None = None) -> None:
        """``changed``: the rows changed since the last refresh (a superset of those whose
        generation differs), when the caller knows them."""
        n = len(gens)
        if len(self.gens) != n:
            stale = None
        else:
            stale = changed if changed is not None else np.flatnonzero(self.gens != gens)
            if not stale.size:
                self.grow(size)
                return
            if stale.size > self.FULL_REBUILD:
                stale = None
        if stale is None:
            dom = row_dom[:n].copy()
            cnt = counts[:n].copy()
            size = max(size, int(dom.max()) + 1 if n else 1)
            self.sums = np.bincount(dom, weights=cnt, minlength=size).astype(np.int64)
            self.nodes = np.bincount(dom, minlength=size).astype(np.int64)
            self.row_dom, self.row_cnt, self.gens = dom, cnt, gens.copy()
            return
        self.grow(max(size, int(row_dom[stale].max()) + 1))
        sums, nodes, rd, rc = self.sums, self.nodes, self.row_dom, self.row_cnt
        for r in stale.tolist():
            od = rd[r]
            sums[od] -= rc[r]
            nodes[od] -= 1
            nd = row_dom[r]
            nc = counts[r]
            sums[nd] += nc
            nodes[nd] += 1
            rd[r] = nd
            rc[r] = nc
        self.gens[stale] = gens[stale]

    def grow(self, size: int) -> None:
        if len(self.sums) < size:
            self.sums = _fit(self.sums, size)
            self.nodes = _fit(self.nodes, size)


class _RowCache:
    """Per snapshot: matching pods per row for each (namespace, selector), and per-domain sums
    for each (namespace, selector, eligible-domain array), recounted only on rows whose node
    generation changed since they were last counted."""

    MAX_ENTRIES = 128

    def __init__(self) -> None:
        self._snap: weakref.ReferenceType[Snapshot] | None = None
        self._table: Any = None
        self._gens_at: tuple[int, int] = (-1, -1)
        self._gens = np.zeros(0, dtype=np.int64)
        self._version = 0  # bumped whenever the row generations are re-read
        self._counts: OrderedDict[tuple[Any, ...], _RowCounts] = OrderedDict()
        self._sums: OrderedDict[tuple[Any, ...], _DomainSums] = OrderedDict()

    def row_generations(self, snapshot: Snapshot) -> np.ndarray:
        snap = self._snap() if self._snap is not None else None
        if snap is not snapshot or self._table is not snapshot.table:
            self._snap = weakref.ref(snapshot)
            self._table = snapshot.table
            self._counts.clear()
            self._sums.clear()
            self._gens_at = (-1, -1)
        stamp = (snapshot.generation, len(snapshot.gen_array))
        if stamp != self._gens_at:
            self._gens = snapshot.gen_array
            self._gens_at = stamp
            self._version += 1
        return self._gens

    def counts(self, snapshot: Snapshot, namespace: str, selector: _Selector) -> np.ndarray:
        """Matching pods by row (length ``len(snapshot.infos)``); do not modify."""
        gens = self.row_generations(snapshot)
        n = len(gens)
        if selector.empty or selector.labels.is_nothing():
            return np.zeros(n, dtype=np.int64)
        key = (namespace, selector)
        e = self._counts.get(key)
        if e is None:
            e = self._counts[key] = _RowCounts(n)
            if len(self._counts) > self.MAX_ENTRIES:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(key)
            if e.version == self._version:
                return e.counts[:n]
            e.fit(n)
        e.version = self._version
        # Rows changed since the last count: the snapshot knows them (usually one or two).
        stale = snapshot.changed_rows_since(e.synced_at) if e.synced_at >= 0 else \
            np.flatnonzero(e.gens[:n] != gens)
        e.synced_at = snapshot.generation
        if stale.size:
            infos = snapshot.infos
            counts = e.counts
            for r in stale.tolist():
                ni = infos[r]
                counts[r] = _count_matching(ni.pods, selector, namespace) if ni is not None else 0
            e.gens[stale] = gens[stale]
        return e.counts[:n]

    def domain_sums(self, snapshot: Snapshot, namespace: str, selector: _Selector, rkey: tuple[Any, ...],
                    row_dom: np.ndarray, size: int) -> _DomainSums:
        """Per-domain sums over all rows; ``row_dom`` from ``_eligible_domains`` (key ``rkey``)."""
        counts = self.counts(snapshot, namespace, selector)
        key = (namespace, selector, rkey)
        e = self._sums.get(key)
        if e is None:
            e = self._sums[key] = _DomainSums()
            if len(self._sums) > self.MAX_ENTRIES:
                self._sums.popitem(last=False)
        else:
            self._sums.move_to_end(key)
            if e.version == self._version:
                e.grow(size)
                return e
        e.version = self._version
        changed = snapshot.changed_rows_since(e.synced_at) if e.synced_at >= 0 else None
        e.synced_at = snapshot.generation
        e.refresh(self._gens, row_dom, counts, size, changed)
        return e


# ---------------------------------------------------------------- cycle state


class _PreFilterState(StateData):
    """Per hard constraint: matching pods per domain id and which domains are eligible.
    Arrays are shared between clones until one of them changes (copy on write)."""

    __slots__ = ("_fits", "_mins", "_shared", "constraints", "counts", "present", "self_match")

    def __init__(self, constraints: tuple[_Constraint, ...], counts: list[np.ndarray], present: list[np.ndarray],
                 self_match: list[int]) -> None:
        self.constraints = constraints
        self.counts = counts
        self.present = present
        self.self_match = self_match
        self._mins: list[int | None] = [None] * len(constraints)
        self._fits: list[np.ndarray | None] = [None] * len(constraints)
        self._shared = False

    def clone(self) -> _PreFilterState:
        c = _PreFilterState(self.constraints, self.counts, self.present, self.self_match)
        c._mins = list(self._mins)
        c._fits = list(self._fits)
        c._shared = True
        self._shared = True
        return c

    def min_match(self, i: int) -> int:
        """The global minimum for the skew, taking minDomains into account."""
        m = self._mins[i]
        if m is None:
            present = self.present[i]
            nd = int(np.count_nonzero(present))
            if nd < self.constraints[i].min_domains:
                m = 0
            elif nd == 0:
                m = _MAX_INT32
            else:
                m = int(self.counts[i][present].min())
            self._mins[i] = m
        return m

    def fits(self, i: int, size: int) -> np.ndarray:
        """Per domain id (at least ``size`` of them): whether a node there passes constraint i.
        Id 0 (no label) never does; domains without counts hold 0 matching pods."""
        f = self._fits[i]
        if f is None or len(f) < size:
            c = self.constraints[i]
            limit = c.max_skew + self.min_match(i) - self.self_match[i]
            f = _fit(self.counts[i], size) <= limit
            f[0] = False
            self._fits[i] = f
        return f

    def domain_counts(self, i: int) -> dict[str, int]:
        """Eligible domain value -> matching pods (upstream's TpValueToMatchNum[i])."""
        idx = _domain_index(self.constraints[i].topology_key)
        return {idx.values[d]: int(self.counts[i][d])  # type: ignore[misc]
                for d in np.flatnonzero(self.present[i]).tolist()}

    def update(self, i: int, domain: int, delta: int) -> None:
        if self._shared:
            self.counts = [a.copy() for a in self.counts]
            self.present = [a.copy() for a in self.present]
            self._shared = False
        if domain >= len(self.counts[i]):
            self.counts[i] = _fit(self.counts[i], domain + 1)
            self.present[i] = _fit(self.present[i], domain + 1)
        self.counts[i][domain] += delta
        self.present[i][domain] = True
        self._mins[i] = None
        self._fits[i] = None


class _PreScoreState(StateData):
    """Per soft constraint: normalizing weight, and for non-hostname constraints the matching
    pods per seeded domain (-1: not a domain of any candidate) with each domain's score term
    ``count * weight + maxSkew - 1`` (0.0 at id 0, a node without the label). Hostname
    constraints are counted per node in Score. Nodes to ignore, by row and by name."""

    __slots__ = ("any_ignored", "constraints", "counts", "ignored_names", "ignored_rows", "namespace", "rounded",
                 "terms", "weights")

    def __init__(self, constraints: tuple[_Constraint, ...], counts: list[np.ndarray | None], weights: list[float],
                 ignored_rows: np.ndarray, ignored_names: set[str], namespace: str) -> None:
        self.constraints = constraints
        self.counts = counts
        self.weights = weights
        self.ignored_rows = ignored_rows
        self.ignored_names = ignored_names
        self.any_ignored = bool(ignored_names)
        self.namespace = namespace
        self.terms: list[np.ndarray | None] = []
        for c, cnt, w in zip(constraints, counts, weights, strict=True):
            if cnt is None:
                self.terms.append(None)
                continue
            t = np.maximum(cnt, 0).astype(np.float64) * w + float(c.max_skew - 1)
            t[0] = 0.0
            self.terms.append(t)
        # One domain-scoped constraint: the rounded score is a function of the domain alone.
        self.rounded: np.ndarray | None = None
        if len(constraints) == 1 and self.terms[0] is not None:
            self.rounded = _round_half_away(self.terms[0])

    def domain_counts(self, i: int) -> dict[str, int]:
        """Seeded domain value -> matching pods (upstream's TopologyValueToPodCounts[i])."""
        counts = self.counts[i]
        if counts is None:
            return {}
        idx = _domain_index(self.constraints[i].topology_key)
        return {idx.values[d]: int(counts[d]) for d in np.flatnonzero(counts >= 0).tolist()}  # type: ignore[misc]


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's math.Round for non-negative values, exactly."""
    if len(x) <= 32:
        return np.array([_go_round(v) for v in x.tolist()], dtype=np.int64)
    f = np.floor(x)
    return (f + (x - f >= 0.5)).astype(np.int64)


def _go_round(x: float) -> int:
    f = math.floor(x)
    return int(f + 1) if x - f >= 0.5 else int(f)


def topology_normalizing_weight(size: int) -> float:
    """ln(size + 2): counts of smaller topologies are not watered down by bigger ones."""
    return math.log(size + 2)


# ---------------------------------------------------------------- the plugin


class PodTopologySpread(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin,
                        EnqueueExtensions):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._listers_seen = False
        self._listers_checked_at = -2
        a = self.args
        defaulting = a.get("defaultingType") or "System"
        if defaulting not in ("System", "List"):
            raise ValueError(f'defaultingType: Unsupported value: "{defaulting}": supported values: "List", "System"')
        self.system_defaulted = defaulting == "System"
        raw_defaults: Sequence[dict[str, Any]] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(a.get("defaultConstraints") or ()))
        self.default_constraints: tuple[dict[str, Any], ...] = tuple(raw_defaults)
        self._rows = _RowCache()
        self._token = ("podtopologyspread.defaults", next(_INSTANCES))
        self._missing_label = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH,
                                     plugin=self.name)
        self._skew = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=self.name)

    # ------------------------------------------------------------ constraints

    def get_constraints(self, pod: Pod, action: str) -> tuple[_Constraint, ...]:
        """The pod's constraints for ``action`` or, when it has none at all, the default ones."""
        if pod.topology_spread_constraints:
            return _pod_constraints(pod, action)
        if not self.default_constraints:
            return ()
        if self._have_listers():
            return self._build_default_constraints(pod, action)
        if not pod.owner_references:
            return ()  # without listers nor a controller, the default selector is empty
        # Without listers the default selector depends on the pod alone: computed once per Pod.
        cache = pod.cached()
        key = (self._token, action)
        got = cache.get(key)
        if got is None:
            got = cache[key] = self._build_default_constraints(pod, action)
        return got  # type: ignore[no-any-return]

    def _build_default_constraints(self, pod: Pod, action: str) -> tuple[_Constraint, ...]:
        picked = [c for c in self.default_constraints if (c.get("whenUnsatisfiable") or DO_NOT_SCHEDULE) == action]
        if not picked:
            return ()
        selector = self.default_selector(pod)
        if selector.empty:
            return ()
        out = []
        for c in picked:
            md = c.get("minDomains")
            out.append(_Constraint(int(c.get("maxSkew") or 0), str(c.get("topologyKey") or ""), selector,
                                   int(md) if md is not None else 1, c.get("nodeAffinityPolicy") or HONOR,
                                   c.get("nodeTaintsPolicy") or IGNORE))
        return tuple(out)

    def _have_listers(self) -> bool:
        """Whether any Service/ReplicaSet/StatefulSet/ReplicationController informer exists (they
        only ever get added, so a True answer is remembered)."""
        if self._listers_seen:
            return True
        factory = getattr(self.handle, "informers", None) if self.handle is not None else None
        infs = getattr(factory, "informers", None)
        size = len(infs) if type(infs) is dict or isinstance(infs, Mapping) else -1
        if size == self._listers_checked_at:
            return False  # no informer was added since we last looked
        self._listers_checked_at = size
        self._listers_seen = any(self._lister(k) is not None for k in _LISTER_KINDS)
        return self._listers_seen

    def _lister(self, kind: str) -> Any:
        factory = getattr(self.handle, "informers", None) if self.handle is not None else None
        infs = getattr(factory, "informers", None)
        if isinstance(infs, Mapping):
            return infs.get(kind)
        return None

    @staticmethod
    def _get(lister: Any, namespace: str, name: str) -> Any:
        obj = lister.get(f"{namespace}/{name}")
        if obj is None:
            for o in lister.list():
                if o.namespace == namespace and o.name == name:
                    return o
        return obj

    def default_selector(self, pod: Pod) -> _Selector:
        """Upstream's helper.DefaultSelector (see the module docstring for the fallback)."""
        ref = pod.controller_ref()
        services = self._lister("Service")
        if services is None and (ref is None or (ref.api_version, ref.kind) not in _CONTROLLER_KINDS):
            return _EMPTY_SELECTOR
        label_set: dict[str, str] = {}
        if services is not None:
            for svc in services.list():
                if svc.namespace != pod.namespace:
                    continue
                sel = ((svc.raw.get("spec") or {}).get("selector"))
                if sel is None:
                    continue
                if all(pod.labels.get(k) == str(v) for k, v in sel.items()):
                    label_set.update({k: str(v) for k, v in sel.items()})
        reqs: list[Requirement] = [Requirement(k, "In", (v,)) for k, v in label_set.items()]
        owner: tuple[str, str] | None = None
        if ref is not None and (ref.api_version, ref.kind) in _CONTROLLER_KINDS:
            lister = self._lister(ref.kind)
            if lister is None:
                owner = (ref.kind, ref.name)
            else:
                obj = self._get(lister, pod.namespace, ref.name)
                if obj is not None:
                    spec_sel = (obj.raw.get("spec") or {}).get("selector")
                    if ref.kind == _RC_KIND[1]:
                        merged = dict(label_set)
                        merged.update({k: str(v) for k, v in (spec_sel or {}).items()})
                        reqs = [Requirement(k, "In", (v,)) for k, v in merged.items()]
                    else:
                        try:
                            other = LabelSelector.from_dict(spec_sel)
                        except ValueError:
                            other = LabelSelector.nothing()
                        if not other.is_nothing():
                            reqs.extend(other.requirements)
        reqs.sort(key=lambda r: (r.key, r.op, r.values))
        return _Selector(LabelSelector(tuple(reqs)), owner)

    # ------------------------------------------------------------ PreFilter

    def _snapshot(self) -> Snapshot | None:
        return getattr(self.handle, "snapshot", None) if self.handle is not None else None

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None, Status.skip()
        snapshot = self._snapshot()
        if snapshot is None:
            return None, Status.as_error("PodTopologySpread needs the framework's snapshot", self.name)
        state.write(PRE_FILTER_STATE_KEY, self._cal_pre_filter_state(snapshot, pod, constraints, nodes.rows))
        return None, None

    def _cal_pre_filter_state(self, snapshot: Snapshot, pod: Pod, constraints: tuple[_Constraint, ...],
                              rows: np.ndarray) -> _PreFilterState:
        # Nodes count only if they carry every hard constraint's key and pass the constraint's
        # inclusion policies (upstream's calPreFilterState).
        required = tuple(sorted({c.topology_key for c in constraints}))
        everywhere = len(rows) == snapshot.num_nodes
        counts: list[np.ndarray] = []
        present: list[np.ndarray] = []
        for c in constraints:
            rkey, row_dom = _eligible_domains(snapshot, pod, c, required, False)
            size = len(_domain_index(c.topology_key))
            if everywhere:
                # All nodes: the per-domain sums kept up to date across cycles.
                ds = self._rows.domain_sums(snapshot, pod.namespace, c.selector, rkey, row_dom, size)
                cnt = _fit(ds.sums, size).copy()
                pres = _fit(ds.nodes, size) > 0
            else:
                d = row_dom[rows]
                w = self._rows.counts(snapshot, pod.namespace, c.selector)[rows]
                cnt = np.bincount(d, weights=w, minlength=size).astype(np.int64)
                pres = np.bincount(d, minlength=size) > 0
            cnt[0] = 0
            pres[0] = False
            counts.append(cnt)
            present.append(pres)
        self_match = [1 if c.selector.matches(pod) else 0 for c in constraints]
        return _PreFilterState(constraints, counts, present, self_match)

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod_info_to_add.pod, pod_to_schedule, node_info, 1)

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod_info_to_remove.pod, pod_to_schedule, node_info, -1)

    def _update_with_pod(self, state: CycleState, updated: Pod, preemptor: Pod, node_info: NodeInfo,
                         delta: int) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name)
        node = node_info.node
        if updated.namespace != preemptor.namespace or node is None:
            return None
        labels = node.labels
        if not _node_has_keys(labels, s.constraints):
            return None
        affinity = _required_affinity(preemptor)
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated):
                continue
            if not _inclusion_ok(c, preemptor, node, affinity):
                continue
            s.update(i, _domain_index(c.topology_key).id_of(labels[c.topology_key]), delta)
        return None

    # ------------------------------------------------------------ Filter

    def _pre_filter_state(self, state: CycleState) -> _PreFilterState | Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name)
        return s

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s = self._pre_filter_state(state)
        if isinstance(s, Status):
            return s
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", self.name)
        labels = node.labels
        for i, c in enumerate(s.constraints):
            v = labels.get(c.topology_key)
            if v is None:
                return self._missing_label
            d = _domain_index(c.topology_key).ids.get(v)
            counts = s.counts[i]
            match_num = int(counts[d]) if d is not None and d < len(counts) else 0
            if match_num + s.self_match[i] - s.min_match(i) > c.max_skew:
                return self._skew
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = self._pre_filter_state(state)
        if isinstance(s, Status):
            return np.zeros(len(rows), dtype=bool)
        ok: np.ndarray | None = None
        for i, c in enumerate(s.constraints):
            d = _domain_rows(snapshot, c.topology_key)[rows]
            fits = s.fits(i, len(_domain_index(c.topology_key)))[d]
            ok = fits if ok is None else ok & fits
        return ok if ok is not None else np.ones(len(rows), dtype=bool)

    # ------------------------------------------------------------ PreScore / Score

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return Status.as_error("PodTopologySpread needs the framework's snapshot", self.name)
        if snapshot.num_nodes == 0:
            return Status.skip()
        constraints = self.get_constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return Status.skip()
        # Nodes must carry every topology key unless the constraints come from system
        # defaulting (a node without a zone label still gets hostname spreading; its missing
        # label reads as the value "").
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        required = tuple(sorted({c.topology_key for c in constraints})) if require_all else ()
        frows = nodes.rows
        doms_f = [_domain_rows(snapshot, c.topology_key)[frows] for c in constraints]
        ignored_f = np.zeros(len(frows), dtype=bool)
        if require_all:
            for d in doms_f:
                ignored_f |= d == 0
        kept = ~ignored_f
        n_kept = int(np.count_nonzero(kept))
        counts: list[np.ndarray | None] = []
        weights: list[float] = []
        for c, df in zip(constraints, doms_f, strict=True):
            if c.is_hostname:
                # Counted per node in Score; the domains are the candidate nodes.
                counts.append(None)
                weights.append(topology_normalizing_weight(n_kept))
                continue
            rkey, row_dom = _eligible_domains(snapshot, pod, c, required, not require_all)
            size = len(_domain_index(c.topology_key))
            seeded_ids = df[kept]
            if not require_all:
                seeded_ids = np.where(seeded_ids == 0, _domain_index(c.topology_key).id_of(""), seeded_ids)
            seeded = np.zeros(size, dtype=bool)
            seeded[seeded_ids] = True
            weights.append(topology_normalizing_weight(int(np.count_nonzero(seeded))))
            # Matching pods of all nodes, in the domains of the candidates only.
            ds = self._rows.domain_sums(snapshot, pod.namespace, c.selector, rkey, row_dom, size)
            counts.append(np.where(seeded, _fit(ds.sums, size)[:size], -1))
        ignored_rows = np.zeros(len(snapshot.infos), dtype=bool)
        ignored_rows[frows[ignored_f]] = True
        infos = snapshot.infos
        ignored_names = {infos[r].name for r in frows[ignored_f].tolist()}  # type: ignore[union-attr]
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(constraints, counts, weights, ignored_rows, ignored_names,
                                                        pod.namespace))
        return None

    def _pre_score_state(self, state: CycleState) -> _PreScoreState | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return Status.as_error(f'error reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found', self.name)
        return s

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            return 0, s
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found", self.name)
        if node.name in s.ignored_names:
            return 0, None
        labels = node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            v = labels.get(c.topology_key)
            if v is None:
                continue
            if c.is_hostname:
                cnt = _count_matching(node_info.pods, c.selector, pod.namespace)
            else:
                counts = s.counts[i]
                assert counts is not None
                d = _domain_index(c.topology_key).ids.get(v)
                cnt = max(int(counts[d]), 0) if d is not None and d < len(counts) else 0
            total += float(cnt) * s.weights[i] + float(c.max_skew - 1)
        return _go_round(total), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            raise RuntimeError(s.message())
        constraints = s.constraints
        if s.rounded is not None:
            out = _gather(s.rounded, _domain_rows(snapshot, constraints[0].topology_key)[rows])
        else:
            # Summed in constraint order, as upstream adds each term to the node's float score.
            total = np.zeros(len(rows), dtype=np.float64)
            for i, c in enumerate(constraints):
                d = _domain_rows(snapshot, c.topology_key)[rows]
                terms = s.terms[i]
                if terms is not None:
                    total += _gather(terms, d)
                    continue
                cnt = self._rows.counts(snapshot, s.namespace, c.selector)[rows]
                total += np.where(d != 0, cnt.astype(np.float64) * s.weights[i] + float(c.max_skew - 1), 0.0)
            out = _round_half_away(total)
        if s.any_ignored:
            out[s.ignored_rows[rows]] = 0
        return out

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            return s
        if len(scores) == 0:
            return None
        if not s.any_ignored:
            min_score = int(scores.min())
            max_score = max(int(scores.max()), 0)
            if max_score == 0:
                scores[:] = MAX_NODE_SCORE
            else:
                scores[:] = MAX_NODE_SCORE * (max_score + min_score - scores) // max_score
            return None
        ignored = _gather(s.ignored_rows, nodes.rows)
        kept = ~ignored
        if kept.any():
            vals = scores[kept]
            min_score = int(vals.min())
            max_score = max(int(vals.max()), 0)
            if max_score == 0:
                scores[kept] = MAX_NODE_SCORE
            else:
                scores[kept] = MAX_NODE_SCORE * (max_score + min_score - vals) // max_score
        scores[ignored] = 0
        return None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = (ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
                       | ActionType.DELETE)
        node_actions = (ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                        | ActionType.UPDATE_NODE_TAINT)
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.POD, pod_actions), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, node_actions),
                                 self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        old, new = _unwrap(old), _unwrap(new)
        if (new is not None and not _involved(new, pod)) or (old is not None and not _involved(old, pod)):
            return QueueingHint.QUEUE_SKIP
        constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        if new is not None and old is not None:
            if (_same_uid(pod, new) and _tolerations_key(new.tolerations) != _tolerations_key(old.tolerations)
                    and any(c.honor_taints for c in constraints)):
                return QueueingHint.QUEUE
            if new.labels == old.labels:
                return QueueingHint.QUEUE_SKIP
            for c in constraints:
                if c.selector.matches(old) != c.selector.matches(new):
                    return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        changed = new if new is not None else old
        if changed is not None and any(c.selector.matches(changed) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        old, new = _unwrap(old), _unwrap(new)
        constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        old_match = old is not None and _node_has_keys(old.labels, constraints)
        new_match = new is not None and _node_has_keys(new.labels, constraints)
        if old is not None and new is not None:
            if old_match != new_match:
                return QueueingHint.QUEUE
            if new_match and (any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key)
                                  for c in constraints) or _taints_key(old) != _taints_key(new)):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        if new is not None:
            return QueueingHint.QUEUE if new_match else QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if old_match else QueueingHint.QUEUE_SKIP


def _unwrap(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _taints_key(node: Node) -> list[tuple[str, str, str, str | None]]:
    return [(t.key, t.value, t.effect, t.time_added) for t in node.taints]


def _same_uid(a: Pod, b: Pod) -> bool:
    return (a.uid or a.key) == (b.uid or b.key)


def _involved(incoming: Pod, pod_with_spreading: Pod) -> bool:
    """Upstream's involvedInTopologySpreading."""
    return _same_uid(incoming, pod_with_spreading) or (
        incoming.node_name != "" and incoming.namespace == pod_with_spreading.namespace)
