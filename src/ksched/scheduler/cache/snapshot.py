"""The snapshot a scheduling cycle reads: NodeInfos (cloned from the cache) and the columnar
node table, updated incrementally (only nodes whose generation changed are copied), and the
matching-pod counts per selector derived from them (``pod_counts.py``, built on first use)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ksched.boundedcache import BoundedCache
from ksched.scheduler.cache.node_table import NodeTable, ResourceColumns
from ksched.scheduler.cache.pod_counts import PodCountIndex
from ksched.scheduler.framework.types import NodeInfo, NodeList, PodInfo

__all__ = ["Snapshot", "zone_key"]

_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_PODS: list[PodInfo] = []

# ``_record_update`` of one row (nearly every cycle's update) gives a read-only one-element array
# kept per row by the snapshot instead of making one from the list each time. False: an array made
# from the list every time (the reference path; a test proves both give the same rows).
ONE_ROW_ARRAYS = True


def zone_key(ni: NodeInfo) -> str:
    """Upstream's GetZoneKey: region and zone labels (empty when neither is set)."""
    node = ni.node
    if node is None:
        return ""
    region = node.region
    zone = node.zone
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class Snapshot:
    """Read-only during a cycle. ``infos[row]`` is the NodeInfo at a table row (None for free
    rows); ``order`` lists the rows of live nodes in upstream's zone-interleaved order."""

    def __init__(self, cols: ResourceColumns | None = None) -> None:
        self.table = NodeTable(cols)
        self.infos: list[NodeInfo | None] = []
        self.generations: list[int] = []
        # The same per row as a NumPy array (a freed row holds the generation it was freed at):
        # plugins that keep state across cycles find what changed with changed_rows_since().
        self.gen_array = np.zeros(0, dtype=np.int64)
        self._changed_memo: tuple[int, dict[int, np.ndarray]] = (-1, {})
        self._last_update: tuple[int, np.ndarray] | None = None
        self._row_arrays: list[np.ndarray | None] = []  # row -> its read-only [row] (ONE_ROW_ARRAYS)
        self.order = np.zeros(0, dtype=np.int64)
        self.row_of: dict[str, int] = {}
        self.position_in_order: dict[int, int] = {}  # row -> its index in ``order``
        # Side lists (upstream's havePodsWithAffinityNodeInfoList, ...), kept per row and updated
        # with the rows that change; the lists are rebuilt from these only when read after a change.
        self._aff_rows: dict[int, NodeInfo] = {}
        self._anti_rows: dict[int, NodeInfo] = {}
        self._pvc_counts: dict[str, int] = {}
        self._aff_list: list[NodeInfo] | None = []
        self._anti_list: list[NodeInfo] | None = []
        # Counts the row changes that changed which pods with affinity terms a live node holds
        # (or the node object under them): while it stands still, everything derived from the
        # existing pods' terms alone (InterPodAffinity's PreScore for a pod without terms of its
        # own) is unchanged, whatever else the rows did.
        self.affinity_changes = 0
        self.generation = 0
        self._all: NodeList | None = None
        # Per-node derived values shared by pods with the same spec (taint verdicts for a set of
        # tolerations, node-affinity matches, ...): key -> (function of a NodeInfo, array by row).
        self._row_values: BoundedCache[object, tuple[Callable[[NodeInfo], object], np.ndarray]] = BoundedCache()
        self._pod_counts: PodCountIndex | None = None
        # Bumped whenever the Node object of some row changes (a node added, removed or updated):
        # what depends on the nodes alone is current while this stays the same.
        self.nodes_generation = 0
        # live_rows()'s array and what it was made for: (nodes_generation, infos, len(infos)).
        self._live: tuple[int, list[NodeInfo | None], int, np.ndarray] | None = None

    # ---- lookups -------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        return len(self.order)

    def get(self, name: str) -> NodeInfo | None:
        r = self.row_of.get(name)
        return self.infos[r] if r is not None else None

    def node_infos(self) -> list[NodeInfo]:
        """Live nodes in order (a new list)."""
        infos = self.infos
        return [infos[r] for r in self.order.tolist()]  # type: ignore[misc]

    def all_nodes(self) -> NodeList:
        if self._all is None:
            self._all = NodeList(self.infos, self.order)  # type: ignore[arg-type]
        return self._all

    def node_list(self, rows: np.ndarray) -> NodeList:
        return NodeList(self.infos, rows)  # type: ignore[arg-type]

    def live_rows(self) -> np.ndarray:
        """The rows holding a NodeInfo, ascending (read-only). Kept until a row gains or loses
        its NodeInfo, which moves ``nodes_generation`` (the cache refreshes the rows whose node
        was added, removed or replaced) or lengthens ``infos``."""
        infos = self.infos
        live = self._live
        if live is not None and live[0] == self.nodes_generation and live[1] is infos and live[2] == len(infos):
            return live[3]
        arr = np.asarray([r for r, ni in enumerate(infos) if ni is not None], dtype=np.int64)
        arr.flags.writeable = False
        self._live = (self.nodes_generation, infos, len(infos), arr)
        return arr

    def changed_rows_since(self, generation: int) -> np.ndarray:
        """Rows whose NodeInfo changed (or was freed) after cache generation ``generation``;
        compare with ``self.generation`` (the cache generation this snapshot reflects).
        Memoized until the snapshot next changes (many callers ask for the same generation)."""
        if generation >= self.generation:
            return _NO_ROWS
        last = self._last_update
        if last is not None and last[0] <= generation:
            return last[1]  # the common case: asked about the most recent update
        memo = self._changed_memo
        if memo[0] != self.generation:
            memo = self._changed_memo = (self.generation, {})
        rows = memo[1].get(generation)
        if rows is None:
            rows = memo[1][generation] = np.flatnonzero(self.gen_array > generation)
        return rows

    def _record_update(self, previous_generation: int, rows: list[int]) -> None:
        """The cache moved this snapshot from ``previous_generation`` on, changing ``rows``."""
        if ONE_ROW_ARRAYS and len(rows) == 1:
            r = rows[0]
            arrays = self._row_arrays
            if r >= len(arrays):
                arrays.extend([None] * (r + 1 - len(arrays)))
            a = arrays[r]
            if a is None:
                a = arrays[r] = np.asarray(rows, dtype=np.int64)
                a.flags.writeable = False
            self._last_update = (previous_generation, a)
            return
        self._last_update = (previous_generation, np.asarray(rows, dtype=np.int64))

    @property
    def have_pods_with_affinity(self) -> list[NodeInfo]:
        if self._aff_list is None:
            self._aff_list = list(self._aff_rows.values())
        return self._aff_list

    @property
    def any_pods_with_affinity(self) -> bool:
        """Whether ``have_pods_with_affinity`` is non-empty, without building the list."""
        return bool(self._aff_rows)

    @property
    def any_pods_with_required_anti_affinity(self) -> bool:
        """Whether ``have_pods_with_required_anti_affinity`` is non-empty, without building it."""
        return bool(self._anti_rows)

    @property
    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        if self._anti_list is None:
            self._anti_list = list(self._anti_rows.values())
        return self._anti_list

    @property
    def used_pvcs(self) -> set[str]:
        return set(self._pvc_counts)

    def is_pvc_used_by_pods(self, key: str) -> bool:
        return key in self._pvc_counts

    def pod_counts(self) -> PodCountIndex:
        """Matching pods per row for (namespace, selector), kept across cycles (``pod_counts.py``)."""
        if self._pod_counts is None:
            self._pod_counts = PodCountIndex(self)
        return self._pod_counts

    def row_values(self, key: object, fn: Callable[[NodeInfo], object], dtype: type = bool) -> np.ndarray:
        """``fn(node_info)`` for every row (free rows hold the dtype's zero), cached under ``key``
        and kept current as node objects change. ``fn`` must depend only on the Node object."""
        hit = self._row_values.get(key)
        if hit is not None:
            return hit[1]
        arr = np.zeros(len(self.infos), dtype=dtype)
        for r, ni in enumerate(self.infos):
            if ni is not None and ni.node is not None:
                arr[r] = fn(ni)
        self._row_values.put(key, (fn, arr))
        return arr

    def _refresh_row_values(self, rows: list[int]) -> None:
        """Node objects at ``rows`` changed (or rows were added): recompute cached values there."""
        if not rows:
            return
        self.nodes_generation += 1
        if not self._row_values:
            return
        n = len(self.infos)
        for key, (fn, arr) in list(self._row_values.items()):
            if len(arr) < n:
                grown = np.zeros(n, dtype=arr.dtype)
                grown[: len(arr)] = arr
                arr = grown
                self._row_values[key] = (fn, arr)
            for r in rows:
                ni = self.infos[r]
                arr[r] = fn(ni) if ni is not None and ni.node is not None else arr.dtype.type(0)

    # ---- maintenance (called by the cache) -------------------------------------------

    def _set_order(self, rows: list[int]) -> None:
        self.order = np.asarray(rows, dtype=np.int64)
        self.row_of = {self.infos[r].name: r for r in rows}  # type: ignore[union-attr]
        self.position_in_order = {r: i for i, r in enumerate(rows)}
        self._all = None

    def _apply_row(self, row: int, prev: NodeInfo | None, new: NodeInfo | None) -> None:
        """A row's NodeInfo changed from ``prev`` to ``new`` (None: no node there)."""
        pa = prev.pods_with_affinity if prev is not None and prev.node is not None else _NO_PODS
        na = new.pods_with_affinity if new is not None and new.node is not None else _NO_PODS
        # (PodInfo has no __eq__ of its own: list comparison is by identity, in C.)
        if (pa or na) and (not pa or not na or prev.node is not new.node  # type: ignore[union-attr]
                           or pa != na):
            self.affinity_changes += 1
        if new is not None and new.node is not None and new.pods_with_affinity:
            self._aff_rows[row] = new
            self._aff_list = None
        elif self._aff_rows.pop(row, None) is not None:
            self._aff_list = None
        if new is not None and new.node is not None and new.pods_with_required_anti_affinity:
            self._anti_rows[row] = new
            self._anti_list = None
        elif self._anti_rows.pop(row, None) is not None:
            self._anti_list = None
        counts = self._pvc_counts
        if prev is not None and prev.pvc_ref_counts:
            for k in prev.pvc_ref_counts:
                c = counts.get(k, 0) - 1
                if c > 0:
                    counts[k] = c
                else:
                    counts.pop(k, None)
        if new is not None and new.node is not None and new.pvc_ref_counts:
            for k in new.pvc_ref_counts:
                counts[k] = counts.get(k, 0) + 1

    def _rebuild_side_lists(self) -> None:
        self._aff_rows = {}
        self._anti_rows = {}
        self._pvc_counts = {}
        self._aff_list = None
        self._anti_list = None
        infos = self.infos
        for r in self.order.tolist():
            ni = infos[r]
            if ni is not None:
                self._apply_row(r, None, ni)
