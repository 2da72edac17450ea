"""The columnar index behind PodTopologySpread: topology domains as integer ids per snapshot row,
and matching-pod counts per row and per domain kept across scheduling cycles. No upstream file:
upstream's ``calPreFilterState`` and ``initPreScoreState`` (``filtering.go``, ``scoring.go``)
walk every node's pods each cycle; here that walk is replaced by the arrays below, brought up to
date from the rows that changed.

- A node's topology domain for a key is an integer id (``_DomainIndex``), kept per snapshot row
  by ``Snapshot.row_values`` and shared by every pod that spreads on that key; id 0 means the
  node lacks the label.
- Which domain a node's pods count toward for a constraint shape (keys required, inclusion
  policies) is another per-row array kept by ``row_values`` (``_eligible_domains``).
- Matching pods per node row for a (namespace, selector) come from the snapshot's count index
  (``ksched.scheduler.cache.pod_counts``), moved by the pods added, removed and updated rather
  than counted again; their sums per domain are kept per (namespace, selector, constraint
  shape) and refreshed on the rows changed since the previous cycle (``_RowCache``), so a cycle
  costs O(domains + changed rows) whatever the number of distinct selectors. Filter turns the
  per-domain counts into a per-domain verdict and gathers it by row; Score gathers per-domain
  counts by row. With the framework's ``vectorize`` off, every node's pods are counted again
  instead (the reference the fast path is tested against).
- PreFilter over all nodes reads a view of those sums kept with them (``_PreFilterView``): the
  per-domain counts and eligible domains, the global minimum and the per-domain verdicts,
  moved by the domains a refresh touched and lent to the states read-only, so a hard hostname
  spread does not copy and reduce arrays of every node for each pod (``filtering.KEPT_COUNTS``
  off: the per-cycle arrays).
- One changed row that stayed in its domain (a cycle's binding) moves that domain's sum alone
  (``ONE_ROW_REFRESH``; off: the general row-by-row path). Whether every node carries a set of
  keys is kept until the nodes change (``_RowCache.all_keyed``, read by PreScore).

Divergences from upstream, knowingly:

- **Domain ids** are interned for the life of the process (a key's distinct values only grow).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.api.taints import Toleration
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.podtopologyspread.common import (
    _Constraint,
    _count_matching,
    _required_affinity,
    _RequiredAffinity,
    _Selector,
    _taints_tolerated,
    _tolerations_key,
)

__all__: list[str] = []  # package-internal: shared by filtering.py and scoring.py


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


_MAX_INT32 = 2**31 - 1

# One changed row (a cycle's binding: the common case) whose domain did not change moves that
# domain's sum by the row's count difference on Python ints, and touches the PreFilter view only
# when the count changed, instead of the general row-by-row path (list conversions, four NumPy
# scalar updates, the view touched in any case); False: the general path (the reference,
# tests/scheduler/plugins/podtopologyspread/test_podtopologyspread_one_row.py).
ONE_ROW_REFRESH = True


class _PreFilterView:
    """What PreFilter's state needs of one ``_DomainSums``, kept across cycles: matching pods
    per domain with id 0 zeroed (``counts``), the eligible domains (``present``: at least one
    node, id 0 excluded), how many there are, the minimum count over them with how many domains
    hold it (recomputed only when the last of those rises or leaves), and per-domain verdicts
    ``counts <= limit`` (id 0 False) for the last few limits asked. The arrays are lent to
    PreFilter states read-only; the first change after a loan works on a copy of the array it
    changes."""

    __slots__ = ("counts", "counts_lent", "fits", "fits_lent", "min_cnt", "min_val", "n_present", "present",
                 "present_lent")

    MAX_LIMITS = 4

    def __init__(self, sums: np.ndarray, nodes: np.ndarray) -> None:
        self.counts = sums.copy()
        self.counts[0] = 0
        self.present = nodes > 0
        self.present[0] = False
        self.n_present = int(np.count_nonzero(self.present))
        self.counts_lent = self.present_lent = False
        self.fits: dict[int, np.ndarray] = {}
        self.fits_lent: set[int] = set()
        self.min_val = _MAX_INT32
        self.min_cnt = 0
        self._recompute_min()

    def _recompute_min(self) -> None:
        if self.n_present == 0:
            self.min_val, self.min_cnt = _MAX_INT32, 0
            return
        vals = self.counts[self.present]
        m = int(vals.min())
        self.min_val, self.min_cnt = m, int(np.count_nonzero(vals == m))

    def _grow(self, size: int) -> None:
        """At least ``size`` domains (new arrays: the lent ones are left as they were)."""
        if len(self.counts) < size:
            self.counts = _fit(self.counts, size)
            self.present = _fit(self.present, size)
            self.counts_lent = self.present_lent = False
            self.fits.clear()
            self.fits_lent.clear()

    def touch(self, domains: list[int], sums: np.ndarray, nodes: np.ndarray) -> None:
        """Take the sums of ``domains`` (ids whose sums or nodes may have changed)."""
        if len(self.counts) < len(sums):
            self._grow(len(sums))
        counts, present, fits = self.counts, self.present, self.fits
        mv, mc, npres = self.min_val, self.min_cnt, self.n_present
        for d in domains if len(domains) == 1 else set(domains):
            if d == 0:
                continue
            oc = counts.item(d)
            op = present.item(d)
            nc = sums.item(d)
            pr = nodes.item(d) > 0
            if oc != nc:
                if self.counts_lent:
                    counts = self.counts = counts.copy()
                    self.counts_lent = False
                counts[d] = nc
                for limit, f in tuple(fits.items()) if fits else ():
                    if f.item(d) != (nc <= limit):
                        if limit in self.fits_lent:
                            f = fits[limit] = f.copy()
                            self.fits_lent.discard(limit)
                        f[d] = nc <= limit
            if op != pr:
                if self.present_lent:
                    present = self.present = present.copy()
                    self.present_lent = False
                present[d] = pr
            if op:
                npres -= 1
                if oc == mv:
                    mc -= 1
            if pr:
                npres += 1
                if nc < mv:
                    mv, mc = nc, 1
                elif nc == mv:
                    mc += 1
        self.n_present = npres
        self.min_val, self.min_cnt = mv, mc
        if mc <= 0:
            self._recompute_min()

    def lend_state(self, size: int, min_domains: int, max_skew: int,
                   self_match: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """For one constraint of a PreFilter state: ``lend(size)``, the global minimum and the
        per-domain verdicts for its limit (``maxSkew + minimum - selfMatch``)."""
        counts, present = self.lend(size)
        m = self.min_match(min_domains)
        return counts, present, m, self.lend_fits(max_skew + m - self_match)

    def lend(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The per-domain counts and eligible domains (at least ``size``), read-only."""
        self._grow(size)
        self.counts_lent = self.present_lent = True
        return self.counts, self.present

    def lend_fits(self, limit: int) -> np.ndarray:
        """``counts <= limit`` per domain, id 0 False (``_PreFilterState.fits``), read-only."""
        f = self.fits.get(limit)
        if f is None:
            if len(self.fits) >= self.MAX_LIMITS:
                self.fits.clear()
                self.fits_lent.clear()
            f = self.fits[limit] = self.counts <= limit
            f[0] = False
        self.fits_lent.add(limit)
        return f

    def min_match(self, min_domains: int) -> int:
        """``_PreFilterState.min_match`` of these counts."""
        if self.n_present < min_domains:
            return 0
        return self.min_val


class _DomainSums:
    """Matching pods and eligible nodes per domain id over all rows, for one (namespace,
    selector, eligible-domain array); the contributions of the rows changed since the last
    refresh are replaced. Index 0 collects the rows that do not count. ``view``: PreFilter's
    counts kept up to date with them (``pre_filter_view``), once asked for."""

    __slots__ = ("nodes", "row_cnt", "row_dom", "sums", "synced_at", "view")

    # Up to this many changed rows are updated one by one (a row or two: one cycle's binding),
    # more with four ufunc.at calls (about the cost of four rows one by one).
    SCALAR_ROWS = 4
    # Past this many domains touched by one bulk refresh, the PreFilter view is built anew.
    VIEW_TOUCH_MAX = 64

    def __init__(self) -> None:
        self.synced_at = -1
        self.row_dom = np.zeros(0, dtype=np.int64)
        self.row_cnt = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros(1, dtype=np.int64)
        self.nodes = np.zeros(1, dtype=np.int64)
        self.view: _PreFilterView | None = None

    def pre_filter_view(self) -> _PreFilterView:
        """PreFilter's view of these sums (built on first use, then kept up to date)."""
        v = self.view
        if v is None:
            v = self.view = _PreFilterView(self.sums, self.nodes)
        return v

    def refresh(self, row_dom: np.ndarray, counts: np.ndarray, size: int, changed: np.ndarray | None) -> None:
        """``changed``: the rows whose domain or count may differ since the last refresh (None:
        unknown, rebuild)."""
        n = len(counts)
        if changed is None or len(self.row_dom) != n or (changed.size > 64 and 4 * changed.size > n):
            dom = row_dom[:n].copy()
            cnt = counts[:n].copy()
            size = max(size, int(dom.max()) + 1 if n else 1)
            self.sums = np.bincount(dom, weights=cnt, minlength=size).astype(np.int64)
            self.nodes = np.bincount(dom, minlength=size).astype(np.int64)
            self.row_dom, self.row_cnt = dom, cnt
            self.view = None
            return
        if ONE_ROW_REFRESH and changed.size == 1 and self.SCALAR_ROWS:
            r = changed.item(0)
            nd = row_dom.item(r)
            rc = self.row_cnt
            if nd == self.row_dom.item(r):
                # Same domain (so ``sums`` already covers it; ``nodes`` is unchanged).
                nc = counts.item(r)
                diff = nc - rc.item(r)
                if diff:
                    sums = self.sums
                    sums[nd] = sums.item(nd) + diff
                    rc[r] = nc
                    if self.view is not None:
                        self.view.touch([nd], sums, self.nodes)
                self.grow(size)
                return
        if 0 < changed.size <= self.SCALAR_ROWS:
            # Python lists and ints for a row or two: a NumPy reduction or scalar read costs a
            # microsecond or more on arrays this small (the same int64 values either way).
            rows = changed.tolist()
            nds = row_dom[changed].tolist()
            ncs = counts[changed].tolist()
            self.grow(max(size, max(nds) + 1))
            sums, nodes, rd, rc = self.sums, self.nodes, self.row_dom, self.row_cnt
            ods: list[int] = []
            for r, nd, nc in zip(rows, nds, ncs, strict=True):
                od = int(rd[r])
                sums[od] -= rc[r]
                nodes[od] -= 1
                sums[nd] += nc
                nodes[nd] += 1
                rd[r] = nd
                rc[r] = nc
                if od != nd:
                    ods.append(od)
            if self.view is not None:
                self.view.touch(ods + nds if ods else nds, sums, nodes)
        elif changed.size:
            od = self.row_dom[changed]
            oc = self.row_cnt[changed]
            nd = row_dom[changed]
            nc = counts[changed]
            self.grow(max(size, int(nd.max()) + 1))
            np.subtract.at(self.sums, od, oc)
            np.subtract.at(self.nodes, od, 1)
            np.add.at(self.sums, nd, nc)
            np.add.at(self.nodes, nd, 1)
            self.row_dom[changed] = nd
            self.row_cnt[changed] = nc
            if self.view is not None:
                touched = np.union1d(od, nd)
                if len(touched) > self.VIEW_TOUCH_MAX:
                    self.view = None
                else:
                    self.view.touch(touched.tolist(), self.sums, self.nodes)
        self.grow(size)

    def grow(self, size: int) -> None:
        if len(self.sums) < size:
            self.sums = _fit(self.sums, size)
            self.nodes = _fit(self.nodes, size)


class _RowCache:
    """Matching pods per row for (namespace, selector), and per-domain sums for (namespace,
    selector, eligible-domain array).

    Two ways to count, chosen per call by ``incremental()`` (the framework's ``vectorize``):
    the snapshot's ``PodCountIndex`` (counts moved by the pods that changed; the per-domain sums
    kept per snapshot and refreshed on the rows changed since), or the reference: every pod of
    every row counted again (upstream's countPodsMatchSelector on each node), sums built anew."""

    MAX_ENTRIES = 128

    def __init__(self, incremental: Callable[[], bool]) -> None:
        self.incremental = incremental
        self._snap: weakref.ReferenceType[Snapshot] | None = None
        self._infos: Any = None
        self._table: Any = None
        self._sums: OrderedDict[tuple[Any, ...], _DomainSums] = OrderedDict()
        # all_keyed: (snapshot, its nodes_generation, num_nodes) and the answers per key tuple.
        self._keyed: tuple[weakref.ReferenceType[Snapshot], int, int, dict[tuple[str, ...], bool]] | None = None

    def all_keyed(self, snapshot: Snapshot, keys: tuple[str, ...]) -> bool:
        """Whether every node of ``snapshot`` carries every one of ``keys``. Depends on the Node
        objects alone: kept until they change (``Snapshot.nodes_generation``, bumped when a row's
        node is replaced, added or freed)."""
        memo = self._keyed
        gen, n = snapshot.nodes_generation, snapshot.num_nodes
        if memo is None or memo[0]() is not snapshot or memo[1] != gen or memo[2] != n:
            memo = self._keyed = (weakref.ref(snapshot), gen, n, {})
        got = memo[3].get(keys)
        if got is None:
            order = snapshot.order
            got = memo[3][keys] = all(bool(np.all(_domain_rows(snapshot, k)[order] != 0)) for k in keys)
        return got

    def counts(self, snapshot: Snapshot, namespace: str, selector: _Selector) -> np.ndarray:
        """Matching pods by row (length ``len(snapshot.infos)``); do not modify."""
        infos = snapshot.infos
        if selector.empty or selector.labels.is_nothing():
            return np.zeros(len(infos), dtype=np.int64)
        if self.incremental():
            return snapshot.pod_counts().counts(namespace, selector.labels)
        return np.array([_count_matching(ni.pods, selector, namespace) if ni is not None else 0 for ni in infos],
                        dtype=np.int64)

    def domain_sums(self, snapshot: Snapshot, namespace: str, selector: _Selector, rkey: tuple[Any, ...],
                    row_dom: np.ndarray, size: int) -> _DomainSums:
        """Per-domain sums over all rows; ``row_dom`` from ``_eligible_domains`` (key ``rkey``)."""
        counts = self.counts(snapshot, namespace, selector)
        if not self.incremental():
            e = _DomainSums()
            e.refresh(row_dom, counts, size, None)
            return e
        snap = self._snap() if self._snap is not None else None
        if snap is not snapshot or self._infos is not snapshot.infos or self._table is not snapshot.table:
            self._snap = weakref.ref(snapshot)
            self._infos = snapshot.infos
            self._table = snapshot.table
            self._sums.clear()
        key = (namespace, selector, rkey)
        e = self._sums.get(key)
        if e is None:
            e = self._sums[key] = _DomainSums()
            if len(self._sums) > self.MAX_ENTRIES:
                self._sums.popitem(last=False)
        else:
            self._sums.move_to_end(key)
        changed = snapshot.changed_rows_since(e.synced_at) if e.synced_at >= 0 else None
        e.synced_at = snapshot.generation
        e.refresh(row_dom, counts, size, changed)
        return e
