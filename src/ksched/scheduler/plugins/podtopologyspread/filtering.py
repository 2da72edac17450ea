"""PodTopologySpread's PreFilter, PreFilterExtensions and Filter (upstream's
``pkg/scheduler/framework/plugins/podtopologyspread/filtering.go``).

- **PreFilter** gathers the pod's hard (``DoNotSchedule``) constraints, or the cluster default
  constraints when the pod has none, and counts matching pods per topology domain over all
  nodes. It returns Skip when there are no (effective) hard constraints. Nodes count only if they
  carry every hard constraint's key and pass the constraint's inclusion policies.
- **PreFilterExtensions** ``add_pod``/``remove_pod`` update those counts (nominated pods,
  preemption victims); the state is cloneable (copy on write).
- **Filter**: a node without a constraint's topology key is UnschedulableAndUnresolvable
  (``node(s) didn't match pod topology spread constraints (missing required label)``);
  ``matchNum(node's domain) + selfMatch - minMatchNum > maxSkew`` is Unschedulable
  (``node(s) didn't match pod topology spread constraints``). ``minMatchNum`` is the global
  minimum over eligible domains, or 0 while there are fewer eligible domains than
  ``minDomains``. ``filter_nodes`` gives the same verdicts for many rows at once: the
  per-domain counts become a per-domain verdict, gathered by row.

``_Filtering`` holds these extension points; the plugin class (``plugin.py``) mixes it in, as
upstream's methods of ``*PodTopologySpread`` in this file.

Divergences from upstream, knowingly:

- **The global minimum under add/remove** is exact (recomputed from the per-domain counts).
  Upstream tracks two "critical paths"; both agree whenever the updates touch one node, which
  is how preemption and nominated-pod filtering use them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.interface import (
    FilterPlugin,
    NodeList,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    VectorizedFilter,
)
from ksched.scheduler.framework.reduce import min_1d
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.podtopologyspread._index import (
    _domain_index,
    _domain_rows,
    _eligible_domains,
    _fit,
    _RowCache,
)
from ksched.scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    NAME,
    _Constraint,
    _inclusion_ok,
    _node_has_keys,
    _required_affinity,
)

__all__ = ["KEPT_COUNTS", "MIN_BY_SLICE", "PRE_FILTER_STATE_KEY"]

# PreFilter over all nodes takes its per-domain counts, eligible domains and global minimum from
# the per-domain sums' kept view (``_index._PreFilterView``: moved by the changed rows, the
# arrays lent read-only, the minimum tracked) instead of copying and reducing arrays of every
# domain for each pod (5,000 of them for hostname spread at 5,000 nodes); False: the per-cycle
# arrays (the reference, tests/scheduler/plugins/podtopologyspread/test_podtopologyspread_kept.py).
KEPT_COUNTS = True

# The global minimum over eligible domains as the minimum of a slice when every domain but id 0
# is eligible (hostname spread: one domain per node, every node eligible), not of a boolean-mask
# gather (about 4 us less at 5,000 domains); False: the gather for every state (the reference,
# tests/scheduler/plugins/podtopologyspread/test_podtopologyspread_min_match.py).
MIN_BY_SLICE = True

PRE_FILTER_STATE_KEY = "PreFilter" + NAME

_MAX_INT32 = 2**31 - 1


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
                counts = self.counts[i]
                if MIN_BY_SLICE and nd == len(present) - 1 == len(counts) - 1 and not present[0]:
                    m = int(min_1d(counts[1:]))
                else:
                    m = int(min_1d(counts[present]))
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


class _Filtering(PreFilterPlugin, PreFilterExtensions, FilterPlugin, VectorizedFilter):
    """PreFilter, PreFilterExtensions and Filter of ``PodTopologySpread``, which provides the
    attributes declared here."""

    _rows: _RowCache
    _missing_label: Status
    _skew: Status
    get_constraints: Callable[[Pod, str], tuple[_Constraint, ...]]
    _snapshot: Callable[[], Snapshot | None]

    # ------------------------------------------------------------ PreFilter

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
        mins: list[int | None] = []
        fits: list[np.ndarray | None] = []
        self_match = [1 if c.selector.matches(pod) else 0 for c in constraints]
        kept = everywhere and KEPT_COUNTS and self._rows.incremental()
        for c, sm in zip(constraints, self_match, strict=True):
            rkey, row_dom = _eligible_domains(snapshot, pod, c, required, False)
            size = len(_domain_index(c.topology_key))
            if kept:
                # The kept view: shared read-only arrays (the state copies before an update).
                view = self._rows.domain_sums(snapshot, pod.namespace, c.selector, rkey, row_dom,
                                              size).pre_filter_view()
                cnt, pres, m, f = view.lend_state(size, c.min_domains, c.max_skew, sm)
                counts.append(cnt)
                present.append(pres)
                mins.append(m)
                fits.append(f)
                continue
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
        st = _PreFilterState(constraints, counts, present, self_match)
        if kept:
            st._mins = mins
            st._fits = fits
            st._shared = True
        return st

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
