"""Reuse of row-local Filter verdicts and raw Scores across scheduling cycles.

A plugin whose Filter verdict and raw Score on a node depend only on that node's NodeInfo and
on some aspect of the pod (its requests, tolerations, node selector, ...) says so by defining
``row_local_key(pod) -> Hashable``. Pods with equal keys (typically replicas of one template)
then share one array of verdicts/scores over all node rows, and each cycle recomputes only the
rows whose NodeInfo changed since (``Snapshot.changed_rows_since``): after a pod is bound,
that is one node, not all of them. Results are identical to computing every row afresh: the
cache is correct exactly when the plugin's key captures everything its Filter/Score read.
A combined Filter entry also counts the rows it rejects, kept as rows are refreshed
(``combined_filter_mask_counted``, for ``feasible_nodes.ALL_PASS``).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.boundedcache import BoundedCache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import VectorizedFilter, VectorizedScore
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo

__all__ = ["RowResultCache"]

# Below this many changed rows, recompute them with the per-node form (no array overhead).
_PER_NODE_LIMIT = 24

# A new entry's live rows from the snapshot's kept array (``Snapshot.live_rows``) rather than a
# scan of every row (about 0.3 ms at 5,000 nodes, for each new key); False: the scan (the
# reference, tests/scheduler/cache/test_snapshot_live_rows.py).
LIVE_ROWS = True

# A combination's key kept in the pod's template dict (``template_cache``) when every one of its
# plugins says its ``row_local_key`` is a function of the template and spec.nodeName alone
# (``row_local_key_templated``), checked against the pod's node name; False: every plugin's key
# worked out in every cycle (the reference, tests/scheduler/framework/test_rowcache_templated_keys.py).
TEMPLATED_KEYS = True
_PLAN_SERIALS = itertools.count(1)


class _Entry:
    __slots__ = ("generation", "rejected", "snapshot", "values")

    def __init__(self, values: np.ndarray, generation: int, snapshot: Snapshot) -> None:
        self.values = values
        self.generation = generation
        self.snapshot = snapshot
        # Combined Filter entries: how many rows are False (kept as rows are refreshed), for
        # ``combined_filter_mask_counted``; -1 elsewhere.
        self.rejected = -1


class RowResultCache:
    """Per (plugin, Filter|Score, key): values over every node row of one snapshot. Also the
    verdicts of the Filter pass with nominated pods for row-local plugin sets, keyed by (row,
    node generation, the pod's keys, the nominated pods): see ``FeasibleNodeFinder``."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._nominated: BoundedCache[tuple[Any, ...], Status | None] = BoundedCache()
        # id of a plan's plugin list -> (the list, kept alive so the id stays its own; its names;
        # whether every plugin may say its key is templated; a serial number of its own, never
        # reused, naming the list in template dicts, which must not reference the plugins: they
        # outlive the simulation)
        self._plan_names: dict[int, tuple[list[Any], tuple[Any, ...], bool, int]] = {}

    def clear(self) -> None:
        self._entries.clear()
        self._nominated.clear()

    def _names(self, plugins: list[Any]) -> tuple[Any, ...]:
        """The names of a combination's plugins (with their weights, for (plugin, weight) pairs),
        worked out once per list: the runtime's plans hand the same lists to every cycle."""
        return self._plan(plugins)[1]

    def _plan(self, plugins: list[Any]) -> tuple[list[Any], tuple[Any, ...], bool, int]:
        """(the list, its names, whether every plugin defines ``row_local_key_templated``, its
        serial number)."""
        got = self._plan_names.get(id(plugins))
        if got is not None and got[0] is plugins:
            return got
        names = tuple((p[0].name, p[1]) if isinstance(p, tuple) else p.name for p in plugins)
        templated = all(hasattr(p[0] if isinstance(p, tuple) else p, "row_local_key_templated") for p in plugins)
        if len(self._plan_names) >= 256:
            self._plan_names.clear()
        got = self._plan_names[id(plugins)] = (plugins, names, templated, next(_PLAN_SERIALS))
        return got

    def _combined_key(self, plugins: list[Any], kind: str, pod: Pod) -> tuple[Any, ...]:
        """(names, ``kind``, each plugin's ``row_local_key(pod)``): kept in the pod's template
        dict when every plugin's key is templated for this pod (``TEMPLATED_KEYS``)."""
        _, names, templated, serial = self._plan(plugins)
        if not (TEMPLATED_KEYS and templated):
            return (names, kind, tuple([(p[0] if isinstance(p, tuple) else p).row_local_key(pod) for p in plugins]))
        t = template_cache(pod)
        memo_key = ("rowcache.key", kind, serial)
        hit = t.get(memo_key)
        node_name = pod.node_name
        if hit is not None and hit[0] == node_name:
            return hit[1]  # type: ignore[no-any-return]
        ps = [p[0] if isinstance(p, tuple) else p for p in plugins]
        k = (names, kind, tuple([p.row_local_key(pod) for p in ps]))
        if all(p.row_local_key_templated(pod) for p in ps):
            t[memo_key] = (node_name, k)
        return k

    def nominated_verdict(self, key: tuple[Any, ...]) -> tuple[bool, Status | None]:
        """(found, status) of a remembered pass with nominated pods."""
        if key in self._nominated:
            return True, self._nominated[key]
        return False, None

    def remember_nominated_verdict(self, key: tuple[Any, ...], status: Status | None) -> None:
        self._nominated.put(key, status)

    def _current(self, k: tuple[Any, ...], snapshot: Snapshot) -> _Entry | None:
        """Entry ``k`` if it is of ``snapshot`` (it becomes the most recently used), else None."""
        e = self._entries.get(k)
        if e is None or e.snapshot is not snapshot:
            return None
        self._entries.move_to_end(k)
        return e

    def _store(self, k: tuple[Any, ...], values: np.ndarray, snapshot: Snapshot) -> np.ndarray:
        self._entries[k] = _Entry(values, snapshot.generation, snapshot)
        self._entries.move_to_end(k)
        if len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return values

    def _plugin_rows(self, plugin: Any, kind: str, key: Hashable, snapshot: Snapshot, dtype: Any,
                     compute: Callable[[np.ndarray], np.ndarray | None]) -> np.ndarray | None:
        """The values of one plugin's (``kind``, ``key``) entry for every row, ``compute(rows)``
        giving those of the live rows: all of them for a new entry, only the rows changed since
        for a current one (rows without a node hold zero). None when ``compute`` gives None (a
        failed Score); the entry is then dropped."""
        k = (plugin.name, kind, key)
        n = len(snapshot.infos)
        e = self._current(k, snapshot)
        if e is None:
            values = np.zeros(n, dtype=dtype)
            if LIVE_ROWS:
                live = snapshot.live_rows()
            else:
                live = np.asarray([r for r in range(n) if snapshot.infos[r] is not None], dtype=np.int64)
            if len(live):
                got = compute(live)
                if got is None:
                    return None
                values[live] = got
            return self._store(k, values, snapshot)
        if e.generation != snapshot.generation:
            if len(e.values) < n:
                grown = np.zeros(n, dtype=dtype)
                grown[: len(e.values)] = e.values
                e.values = grown
            changed = snapshot.changed_rows_since(e.generation)
            if len(changed):
                infos = snapshot.infos
                live = np.asarray([r for r in changed.tolist() if infos[r] is not None], dtype=np.int64)
                e.values[changed] = 0
                if len(live):
                    got = compute(live)
                    if got is None:
                        self._entries.pop(k, None)
                        return None
                    e.values[live] = got
            e.generation = snapshot.generation
        return e.values

    # ---------------------------------------------------------------- Filter

    def filter_mask(self, plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot) -> np.ndarray:
        """The plugin's verdict (True = passes) for every row of the snapshot."""
        values = self._plugin_rows(plugin, "filter", plugin.row_local_key(pod), snapshot, bool,
                                   lambda rows: self._filter_rows(plugin, state, pod, snapshot, rows))
        assert values is not None  # a Filter verdict is never a failure
        return values

    def _refreshed(self, k: tuple[Any, ...], snapshot: Snapshot,
                   update_row: Callable[[np.ndarray, int, NodeInfo | None], bool]) -> np.ndarray | None:
        """A combined entry's values brought up to date by ``update_row(values, row, info)`` on
        the few rows changed since it was last current (False from it: give up); None when the
        entry is missing, of another snapshot, too far behind, or given up on (rebuild it)."""
        e = self._current(k, snapshot)
        if e is None:
            return None
        if e.generation != snapshot.generation:
            changed = snapshot.changed_rows_since(e.generation)
            if len(e.values) != len(snapshot.infos) or len(changed) > _PER_NODE_LIMIT:
                return None
            infos = snapshot.infos
            values = e.values
            for r in changed.tolist():
                if not update_row(values, r, infos[r]):
                    self._entries.pop(k, None)
                    return None
            e.generation = snapshot.generation
        return e.values

    def combined_filter_mask(self, plugins: list[Any], state: CycleState, pod: Pod, snapshot: Snapshot) -> np.ndarray:
        """Whether every one of ``plugins`` (all row-local) passes, for every row: one entry
        per combination of the plugins' keys, so a cycle that finds a few changed rows runs
        their per-node Filters once, instead of refreshing one array per plugin and ANDing
        them. Do not modify the result. The per-plugin arrays (``filter_mask``) stay
        available for diagnosing a pod that fits nowhere."""
        return self.combined_filter_mask_counted(plugins, state, pod, snapshot)[0]

    def combined_filter_mask_counted(self, plugins: list[Any], state: CycleState, pod: Pod,
                                     snapshot: Snapshot) -> tuple[np.ndarray, int]:
        """``combined_filter_mask``, and how many rows it rejects (free rows included): counted
        when the entry is built and kept as rows are refreshed, so a caller learns that every
        row passes without looking at the array (``feasible_nodes.ALL_PASS``)."""
        k = self._combined_key(plugins, "combined", pod)
        flips = 0  # rows that went from passing to failing, less those that went back

        def update_row(values: np.ndarray, r: int, ni: NodeInfo | None) -> bool:
            nonlocal flips
            ok = ni is not None
            if ok:
                for p in plugins:
                    st = p.filter(state, pod, ni)
                    if st is not None and st.code != Code.SUCCESS:
                        ok = False
                        break
            if values[r] != ok:
                flips += -1 if ok else 1
                values[r] = ok
            return True

        got = self._refreshed(k, snapshot, update_row)
        if got is not None:
            e = self._entries[k]  # (current: _refreshed found it)
            if flips:
                e.rejected += flips
            return got, e.rejected
        values = None
        for p in plugins:
            m = self.filter_mask(p, state, pod, snapshot)
            values = m.copy() if values is None else np.logical_and(values, m, out=values)
        assert values is not None
        self._store(k, values, snapshot)
        rejected = self._entries[k].rejected = len(values) - int(np.count_nonzero(values))
        return values, rejected

    @staticmethod
    def _filter_rows(plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        if isinstance(plugin, VectorizedFilter) and len(rows) > _PER_NODE_LIMIT:
            got = plugin.filter_nodes(state, pod, snapshot, rows)
            if got is not None:
                return np.asarray(got, dtype=bool)
        infos = snapshot.infos
        out = np.empty(len(rows), dtype=bool)
        for i, r in enumerate(rows.tolist()):
            st = plugin.filter(state, pod, infos[r])
            out[i] = st is None or st.code == Code.SUCCESS
        return out

    # ---------------------------------------------------------------- Score

    def raw_scores(self, plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot) -> np.ndarray | None:
        """The plugin's raw (not normalized) score for every row, or None if a per-node Score
        call reported an error (the caller then scores the usual way and reports it)."""
        return self._plugin_rows(plugin, "score", plugin.row_local_key(pod), snapshot, np.int64,
                                 lambda rows: self._score_rows(plugin, state, pod, snapshot, rows))

    def combined_scores(self, plugins: list[tuple[Any, int]], state: CycleState, pod: Pod,
                        snapshot: Snapshot) -> np.ndarray | None:
        """The weighted sum of the raw scores of ``plugins`` ((plugin, weight) pairs, all
        row-local and without NormalizeScore), for every row; kept up to date as rows change,
        as ``combined_filter_mask``. None if a per-node Score reported an error (the caller
        then scores plugin by plugin and reports it). Do not modify the result."""
        k = self._combined_key(plugins, "combined-score", pod)

        def update_row(values: np.ndarray, r: int, ni: NodeInfo | None) -> bool:
            total = 0
            if ni is not None:
                for p, w in plugins:
                    sc, st = p.score(state, pod, ni)
                    if st is not None and st.code != Code.SUCCESS:
                        return False
                    total += sc * w
            values[r] = total
            return True

        got = self._refreshed(k, snapshot, update_row)
        if got is not None:
            return got
        values = np.zeros(len(snapshot.infos), dtype=np.int64)
        for p, w in plugins:
            raw = self.raw_scores(p, state, pod, snapshot)
            if raw is None:
                return None
            values += raw * w
        return self._store(k, values, snapshot)

    @staticmethod
    def _score_rows(plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot,
                    rows: np.ndarray) -> np.ndarray | None:
        if isinstance(plugin, VectorizedScore) and len(rows) > _PER_NODE_LIMIT:
            return np.asarray(plugin.score_nodes(state, pod, snapshot, rows), dtype=np.int64)
        infos = snapshot.infos
        out = np.empty(len(rows), dtype=np.int64)
        for i, r in enumerate(rows.tolist()):
            s, st = plugin.score(state, pod, infos[r])
            if st is not None and st.code != Code.SUCCESS:
                return None
            out[i] = s
        return out
