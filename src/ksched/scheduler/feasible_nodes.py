"""Which nodes pass the Filter plugins, for one pod on one snapshot: upstream's
``findNodesThatPassFilters`` (``schedule_one.go``), with ksched's fast paths, and the
diagnosis of the nodes that failed.

:meth:`FeasibleNodeFinder.find` runs four named steps:

1. **fast mask** -- the row-local plugins' combined verdicts from the row cache and the
   vectorized plugins' ``filter_nodes``, ANDed over the candidate rows;
2. **nominated positions** -- the candidate nodes (still passing) that hold pods nominated by
   preemption with a priority at least the pod's: upstream filters those twice, with and
   without the nominated pods;
3. either the **nominated pass** (every active plugin is in the fast mask: only the nodes with
   nominated pods need a per-node pass, with those pods; for row-local plugin sets its verdict
   is remembered in the row cache) or the **per-node walk** (some plugin runs per node: the
   nodes the mask left are visited in order until enough are found, as upstream does);
4. the **diagnosis**, only when no node fits or when explaining: each failed node's status
   from the first plugin (in order) that rejects it, a plugin at a time over all undecided
   nodes.

When every active plugin is cached or vectorized, no node holds nominated pods, the cycle is
not explained and the nodes are many (``PREFIX_WALK_MIN_RATIO`` times the nodes to find), steps
1-3 are done on growing prefixes of the walk instead
(:meth:`FeasibleNodeFinder._prefix_walk`, ``PREFIX_WALK``): the walk stops at the node where
``num_to_find`` feasible nodes are reached, so only the nodes up to there need the vectorized
verdicts (with 5,000 nodes and a window of 500, a pod whose first window does not all pass no
longer pays for every node). The prefix's verdicts are those of the whole mask's prefix, so the
feasible nodes and the number processed are the same; when the prefixes run out before enough
nodes are found, the whole-mask steps run as before (and diagnose).

When the row cache counts no row that the cached plugins' combined verdicts reject (a cluster
with room), the first window and steps 1-3 take them as all True without reading them
(``ALL_PASS``).

Whatever the path, the feasible nodes, the number of nodes processed and every status are
those of the per-node reference (``Framework.vectorize = False``), which the fast-path
agreement tests check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.explanation import Explanation
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    FilterPlugin,
    VectorizedFilter,
    VectorizedFilterStatuses,
)
from ksched.scheduler.framework.reduce import all_1d
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import PodInfo

__all__ = ["PREFIX_WALK", "FeasibleNodeFinder", "FilterError"]

# The walk's verdicts on growing prefixes (``_prefix_walk``) rather than on every node at once;
# False: the whole-mask steps for every cycle (the reference, tests/scheduler/test_prefix_walk.py).
PREFIX_WALK = True
# Only where the nodes are at least this many times ``num_to_find`` (5,000 nodes and 500 to find,
# not 1,000 and 420): with fewer, a pod whose nodes pass at the rate of the first window's
# usually needs more than half of them anyway, and two parts cost more than one whole mask.
PREFIX_WALK_MIN_RATIO = 4
# When the cached plugins' combined verdicts reject no row (the row cache counts them as rows
# are refreshed: ``combined_filter_mask_counted``), the window passes them without a look and
# the masks start from all True, instead of gathering the verdicts of the walk's rows (most
# cycles of a cluster with room: about 2 us a cycle at 1,000 nodes). False: the verdicts read
# row by row every time (the reference, tests/scheduler/test_all_pass_shortcut.py).
ALL_PASS = True


class FilterError(Exception):
    """A Filter plugin returned an error (not a rejection) on a node the walk reached."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


@dataclass(slots=True)
class _Plan:
    """The active Filter plugins of this cycle, by how they run."""

    plugins: list[FilterPlugin]  # all of them, in order
    cached: list[FilterPlugin]  # FastPath.CACHED
    vector: list[FilterPlugin]  # FastPath.VECTOR
    node: list[FilterPlugin]  # FastPath.NODE, and vector plugins that declined this pod


class FeasibleNodeFinder:
    """Finds feasible nodes for one pod on one snapshot."""

    def __init__(self, fw: Framework, snapshot: Snapshot) -> None:
        self.fw = fw
        self.snapshot = snapshot
        # What find_in_window learnt of the vectorized plugins on the first nodes of the walk,
        # for find over the same walk (those rows are not asked again): plugin -> verdicts.
        self._window_masks: dict[str, np.ndarray] = {}
        self._combined: np.ndarray | None = None  # the cached plugins' combined verdicts by row
        self._combined_all = False  # ... and whether they pass every row (ALL_PASS)

    def find(self, state: CycleState, pod: Pod, rows: np.ndarray, num_to_find: int,
             diagnosis: Diagnosis, explain: Explanation | None, rotation: int | None = None) -> tuple[np.ndarray, int]:
        """Rows (in ``rows`` order) of up to ``num_to_find`` feasible nodes, and how many nodes
        were processed. Fills ``diagnosis`` for the processed nodes that failed, but only when
        none fit (statuses are only needed then) or when explaining. ``rotation``: ``rows`` is
        the snapshot's order rotated left by this much (lets step 2 find positions directly)."""
        n = len(rows)
        if n == 0:
            return rows, 0
        plan = self._plan(state)
        if (PREFIX_WALK and explain is None and not plan.node and num_to_find > 0
                and num_to_find * PREFIX_WALK_MIN_RATIO <= n and not self.fw.nominated_node_names()):
            got = self._prefix_walk(plan, state, pod, rows, num_to_find)
            if got is not None:
                return got
        masks: dict[str, np.ndarray] = {}  # per plugin, by position in ``rows`` (for the diagnosis)
        mask = self._fast_mask(plan, state, pod, rows, masks)
        nominated = self._nominated_positions(pod, rows, mask, rotation)
        statuses: dict[int, Status] = {}  # position -> status of a node checked per node
        if not plan.node:
            feasible_rows, processed = self._nominated_pass(plan, state, pod, rows, mask, nominated, num_to_find,
                                                            statuses)
        else:
            feasible_rows, processed = self._per_node_walk(plan, state, pod, rows, mask, nominated, num_to_find,
                                                           statuses)
        if len(feasible_rows) == 0 or explain is not None:
            for p in plan.cached:
                masks[p.name] = self.fw.row_cache.filter_mask(p, state, pod, self.snapshot)[rows]
            self._diagnose(state, pod, rows, processed if len(feasible_rows) else n, plan.plugins, masks,
                           statuses, set(nominated), diagnosis, explain, feasible_rows)
        return feasible_rows, processed

    # ---------------------------------------------------------------- step 0: the first window

    def find_in_window(self, state: CycleState, pod: Pod, rows: np.ndarray, start: int,
                       num_to_find: int) -> tuple[np.ndarray, int] | None:
        """What :meth:`find` gives for ``rows`` rotated left by ``start``, when that is simply
        the first ``num_to_find`` nodes of the walk: every active plugin is cached or
        vectorized, no node of that window holds nominated pods, and every node of it passes.
        Then the walk stops after exactly those nodes, and only they need looking at (not the
        whole rotated mask of every candidate). None when any of that does not hold (the
        caller runs :meth:`find`)."""
        n = len(rows)
        if n == 0 or num_to_find <= 0:
            return None
        plan = self._plan(state)
        if plan.node:
            return None
        fw = self.fw
        # A vectorized plugin that rejects nodes of the window (inter-pod anti-affinity as the
        # cluster fills) makes the attempt a loss: after such failures in a row, the next 1, 2,
        # 4, ... (at most 64) cycles with vectorized plugins go straight to find.
        if plan.vector and fw.window_backoff[1] > 0:
            fw.window_backoff[1] -= 1
            return None
        k = min(num_to_find, n)
        if start + k <= n:
            window = rows[start:start + k]
        else:
            window = np.concatenate((rows[start:], rows[:start + k - n]))
        nominated = fw.nominated_node_names()
        if nominated:
            snap = self.snapshot
            row_of = snap.row_of
            if rows is snap.order:
                # Positions in the walk straight from the order: no set of the window's rows.
                pos_of = snap.position_in_order
                for nn in nominated:
                    r = row_of.get(nn)
                    i = pos_of.get(r) if r is not None else None
                    if i is not None and (i - start) % n < k:
                        return None
            else:
                in_window = set(window.tolist())
                if any(row_of.get(nn) in in_window for nn in nominated):
                    return None
        if plan.cached:
            if ALL_PASS:
                combined, rejected = fw.row_cache.combined_filter_mask_counted(plan.cached, state, pod,
                                                                               self.snapshot)
                self._combined, self._combined_all = combined, not rejected
                if rejected and not all_1d(combined[window]):
                    return None
            else:
                combined = self._combined = fw.row_cache.combined_filter_mask(plan.cached, state, pod,
                                                                              self.snapshot)
                if not all_1d(combined[window]):
                    return None
        for p in plan.vector:
            assert isinstance(p, VectorizedFilter)
            m = p.filter_nodes(state, pod, self.snapshot, window)
            if m is None:
                return None
            self._window_masks[p.name] = m
            if not all_1d(m):
                misses = fw.window_backoff[0] = min(fw.window_backoff[0] * 2 or 1, 64)
                fw.window_backoff[1] = misses
                return None
        if plan.vector:
            fw.window_backoff[0] = 0
        self._window_masks = {}
        return window, k

    # ---------------------------------------------------------------- steps 1-3 on prefixes

    def _prefix_walk(self, plan: _Plan, state: CycleState, pod: Pod, rows: np.ndarray,
                     num_to_find: int) -> tuple[np.ndarray, int] | None:
        """What steps 1-3 give when every active plugin is cached or vectorized and no node holds
        nominated pods (the nominated pass then keeps the mask's first ``num_to_find`` nodes),
        worked out on growing prefixes of ``rows`` until that many pass. None when the prefixes
        run out first or a vectorized plugin declines the pod: the caller then runs the
        whole-mask steps, which find this call's cached verdicts and ``find_in_window``'s
        window verdicts where they were."""
        n = len(rows)
        combined: np.ndarray | None = None
        if plan.cached:
            combined = self._combined
            if combined is None:
                combined, rejected = self.fw.row_cache.combined_filter_mask_counted(plan.cached, state, pod,
                                                                                    self.snapshot)
                self._combined, self._combined_all = combined, not rejected
            if ALL_PASS and self._combined_all:
                combined = None  # every row passes them: the parts start from all True
        known = self._window_masks
        snapshot = self.snapshot
        found: list[np.ndarray] = []  # positions of the feasible nodes found so far, by prefix part
        have = 0
        a = 0
        b = min(n, num_to_find + (num_to_find >> 2) + 16)
        while True:
            seg = rows[a:b]
            m = combined[seg] if combined is not None else np.ones(b - a, dtype=bool)
            for p in plan.vector:
                assert isinstance(p, VectorizedFilter)
                head = known.get(p.name)
                if head is not None and len(head) <= n and a < len(head):
                    if b <= len(head):
                        pm = head[a:b]
                    else:
                        rest = p.filter_nodes(state, pod, snapshot, rows[len(head):b])
                        if rest is None:
                            return None
                        pm = np.concatenate((np.asarray(head[a:], dtype=bool), np.asarray(rest, dtype=bool)))
                else:
                    pm = p.filter_nodes(state, pod, snapshot, seg)
                    if pm is None:
                        return None
                m &= pm
            idx = np.flatnonzero(m)
            if have + len(idx) >= num_to_find:
                idx = idx[: num_to_find - have] + a
                processed = int(idx[-1]) + 1
                pos = np.concatenate((*found, idx)) if found else idx
                self._combined = None
                self._window_masks = {}
                return rows[pos], processed
            if len(idx):
                found.append(idx + a)
                have += len(idx)
            if b >= n or not have:
                # Every node looked at, or none of the first ones passes: the whole mask (and,
                # should nothing pass, its diagnosis) is wanted.
                return None
            # The next part sized by the pass rate so far, with a margin.
            need = num_to_find - have
            a, b = b, min(n, b + (need * b) // have + (need >> 2) + 16)

    # ---------------------------------------------------------------- step 1: fast mask

    def _plan(self, state: CycleState) -> _Plan:
        # The lists are shared across cycles: _fast_mask replaces them, never changes them.
        return _Plan(*self.fw.filter_plan(state.skip_filter_plugins))

    def _fast_mask(self, plan: _Plan, state: CycleState, pod: Pod, rows: np.ndarray,
                   masks: dict[str, np.ndarray]) -> np.ndarray:
        """Whether every cached and vectorized plugin accepts each row (this call's own
        array). A vectorized plugin that declines this pod moves to ``plan.node``."""
        if plan.cached:
            combined, self._combined = self._combined, None
            all_pass = self._combined_all
            if combined is None:
                combined, rejected = self.fw.row_cache.combined_filter_mask_counted(plan.cached, state, pod,
                                                                                    self.snapshot)
                all_pass = not rejected
            mask = np.ones(len(rows), dtype=bool) if ALL_PASS and all_pass else combined[rows]
        else:
            mask = np.ones(len(rows), dtype=bool)
        declined: set[str] = set()
        known, self._window_masks = self._window_masks, {}
        for p in plan.vector:
            assert isinstance(p, VectorizedFilter)
            head = known.get(p.name)
            if head is not None and len(head) <= len(rows):
                # find_in_window asked about the walk's first rows already: only the rest now.
                rest = p.filter_nodes(state, pod, self.snapshot, rows[len(head):]) if len(head) < len(rows) \
                    else head[:0]
                m = None if rest is None else np.concatenate((np.asarray(head, dtype=bool),
                                                              np.asarray(rest, dtype=bool)))
            else:
                m = p.filter_nodes(state, pod, self.snapshot, rows)
            if m is None:
                declined.add(p.name)
                continue
            masks[p.name] = m
            mask &= m
        if declined:
            plan.node = [p for p in plan.plugins if p in plan.node or p.name in declined]
            plan.vector = [p for p in plan.vector if p.name not in declined]
        return mask

    # ---------------------------------------------------------------- step 2: nominated positions

    def _nominated_positions(self, pod: Pod, rows: np.ndarray, mask: np.ndarray,
                             rotation: int | None) -> dict[int, list[PodInfo]]:
        """Position -> the nominated pods to add there, for nodes the fast mask accepts. A node
        the mask already rejects fails the pass without the nominated pods anyway."""
        fw = self.fw
        snap = self.snapshot
        out: dict[int, list[PodInfo]] = {}
        n = len(rows)
        for node_name in fw.nominated_node_names():
            r = snap.row_of.get(node_name)
            if r is None:
                continue
            if rotation is not None:
                i = snap.position_in_order.get(r)
                if i is None:
                    continue
                pos = (i - rotation) % n
            else:
                at = np.flatnonzero(rows == r)
                if not len(at):
                    continue
                pos = int(at[0])
            if not mask[pos]:
                continue
            to_add = fw.nominated_pods_to_add(pod, node_name)
            if to_add:
                out[pos] = to_add
        return out

    # ---------------------------------------------------------------- step 3a: nominated pass

    def _nominated_pass(self, plan: _Plan, state: CycleState, pod: Pod, rows: np.ndarray, mask: np.ndarray,
                        nominated: dict[int, list[PodInfo]], num_to_find: int,
                        statuses: dict[int, Status]) -> tuple[np.ndarray, int]:
        """Every active plugin is in ``mask``: only the nodes with nominated pods need a
        per-node pass (with those pods). When every plugin is row-local, that verdict depends
        only on the node's generation, the nominated pods and the pod's keys, and is
        remembered (replicas of one template ask the same question until the node changes)."""
        fw = self.fw
        snap = self.snapshot
        infos = snap.infos
        row_cache = fw.row_cache
        errors: dict[int, Status] = {}
        if nominated:
            keys = tuple(p.row_local_key(pod) for p in plan.cached) if not plan.vector else None  # type: ignore[attr-defined]
            for pos in sorted(nominated):
                r = int(rows[pos])
                ni = infos[r]
                assert ni is not None
                ck = None
                if keys is not None:
                    ck = (r, snap.generations[r], keys,
                          tuple((pi.pod.uid, pi.pod.resource_version) for pi in nominated[pos]))
                found, st = row_cache.nominated_verdict(ck) if ck is not None else (False, None)
                if not found:
                    st = fw.run_filter_plugins_with_nominated_pods(state, pod, ni, passes_without=True)
                    if ck is not None and (st is None or st.code != Code.ERROR):
                        row_cache.remember_nominated_verdict(ck, st)
                if st is not None:
                    mask[pos] = False
                    if st.code == Code.ERROR:
                        errors[pos] = st
                    else:
                        statuses[pos] = st
        idx = np.flatnonzero(mask)
        processed = len(rows)
        if len(idx) >= num_to_find:
            idx = idx[:num_to_find]
            processed = int(idx[-1]) + 1
        for pos in sorted(errors):
            if pos < processed:  # a node the ordered walk would have reached
                raise FilterError(errors[pos])
        return rows[idx], processed

    # ---------------------------------------------------------------- step 3b: per-node walk

    def _per_node_walk(self, plan: _Plan, state: CycleState, pod: Pod, rows: np.ndarray, mask: np.ndarray,
                       nominated: dict[int, list[PodInfo]], num_to_find: int,
                       statuses: dict[int, Status]) -> tuple[np.ndarray, int]:
        """The nodes the mask left (and those with nominated pods, passed with and without
        them), in order, until ``num_to_find`` fit."""
        fw = self.fw
        infos = self.snapshot.infos
        cand = np.flatnonzero(mask).tolist()
        if nominated:
            cand = sorted(set(cand) | set(nominated))
        feasible: list[int] = []
        processed = len(rows)
        for pos in cand:
            ni = infos[int(rows[pos])]
            assert ni is not None
            if pos in nominated:
                st = fw.run_filter_plugins_with_nominated_pods(state, pod, ni)
            else:
                st = fw.run_filter_plugins(state, pod, ni, plan.node)
            if st is None:
                feasible.append(pos)
                if len(feasible) >= num_to_find:
                    processed = pos + 1
                    break
            else:
                if st.code == Code.ERROR:
                    raise FilterError(st)
                statuses[pos] = st
        return (rows[np.asarray(feasible, dtype=np.int64)] if feasible else rows[:0]), processed

    # ---------------------------------------------------------------- step 4: diagnosis

    def _diagnose(self, state: CycleState, pod: Pod, rows: np.ndarray, processed: int, plugins: Sequence[Any],
                  masks: dict[str, np.ndarray], statuses: dict[int, Status], nominated_pos: set[int],
                  diagnosis: Diagnosis, explain: Explanation | None, feasible_rows: np.ndarray) -> None:
        """Per-node status of every processed node that failed (every node, when explaining):
        the first plugin (in order) that rejects it, with that plugin's reasons."""
        limit = len(rows) if explain is not None else processed
        result = self._first_rejections(state, pod, rows[:limit], plugins, masks, statuses, nominated_pos,
                                        feasible_rows)
        infos = self.snapshot.infos
        names = [infos[r].name for r in rows[:limit].tolist()]  # type: ignore[union-attr]
        record = processed if len(feasible_rows) else limit
        node_to_status = diagnosis.node_to_status
        seen: dict[int, Status] = {}
        for pos, (name, st) in enumerate(zip(names, result)):
            if explain is not None:
                # None: feasible, or feasible beyond the nodes the cycle needed to find.
                explain.filters[name] = "passed" if st is None else \
                    {"plugin": st.plugin, "code": str(st.code), "reason": st.message()}
            if st is not None and pos < record:
                node_to_status[name] = st
                seen[id(st)] = st
        for st in seen.values():
            diagnosis.add_plugin_of(st)

    def _first_rejections(self, state: CycleState, pod: Pod, pos_rows: np.ndarray, plugins: Sequence[Any],
                          masks: dict[str, np.ndarray], statuses: dict[int, Status], nominated_pos: set[int],
                          feasible_rows: np.ndarray) -> list[Status | None]:
        """For each of ``pos_rows``, the status of the first plugin (in order) that rejects it, or
        None. A plugin at a time over all undecided nodes rather than a node at a time, with
        plugins' ``filter_statuses`` answering for many nodes at once; nodes with nominated pods
        report the pass with them, as upstream."""
        fw = self.fw
        snap = self.snapshot
        infos = snap.infos
        limit = len(pos_rows)
        result: list[Status | None] = [None] * limit
        undecided = np.ones(limit, dtype=bool)
        if len(feasible_rows):
            undecided &= ~np.isin(pos_rows, feasible_rows)
        for pos, st in statuses.items():
            if pos < limit:
                result[pos] = st
                undecided[pos] = False
        # Nodes with nominated pods report the first pass's status (with them), as upstream,
        # even where the vectorized filters alone already rejected the node.
        per_node_nominated = {pos for pos in nominated_pos if pos < limit}
        nominated_nodes = fw.nominated_node_names()
        if nominated_nodes:
            pos_of = {int(r): i for i, r in enumerate(pos_rows.tolist())}
            for node_name in nominated_nodes:
                r = snap.row_of.get(node_name)
                pos = pos_of.get(r) if r is not None else None
                if pos is not None and fw.nominated_pods_to_add(pod, node_name):
                    per_node_nominated.add(pos)
        for pos in sorted(per_node_nominated):
            if not undecided[pos]:
                continue
            ni = infos[int(pos_rows[pos])]
            assert ni is not None
            result[pos] = fw.run_filter_plugins_with_nominated_pods(state, pod, ni)
            undecided[pos] = False
        remaining = np.flatnonzero(undecided)
        for p in plugins:
            if not len(remaining):
                break
            m = masks.get(p.name)
            if m is not None:
                passed = m[remaining]
                failing = remaining[~passed]
                keep = remaining[passed]
            else:
                failing = remaining
                keep = remaining[:0]
            if not len(failing):
                remaining = keep
                continue
            still: list[int] = []
            for pos, st in zip(failing.tolist(), self._statuses_of(p, state, pod, pos_rows[failing])):
                if st is None or st.code == Code.SUCCESS:
                    still.append(pos)  # the per-node form lets it through: the next plugins decide
                else:
                    result[pos] = st
            remaining = np.union1d(keep, np.asarray(still, dtype=np.int64)) if still else keep
        return result

    def _statuses_of(self, p: Any, state: CycleState, pod: Pod, rows: np.ndarray) -> list[Status | None]:
        """Plugin ``p``'s Filter status (plugin name set; None when it passes) on each row."""
        if self.fw.vectorize and isinstance(p, VectorizedFilterStatuses) and len(rows) > 1:
            got = p.filter_statuses(state, pod, self.snapshot, rows)
            if got is not None:
                which, distinct = got
                named: list[Status | None] = [st.with_plugin(p.name) for st in distinct]
                named.append(None)  # which == -1: passes
                return [named[k] for k in which.tolist()]
        infos = self.snapshot.infos
        out: list[Status | None] = []
        for r in rows.tolist():
            st = p.filter(state, pod, infos[r])
            out.append(st.with_plugin(p.name) if st is not None and st.code != Code.SUCCESS else None)
        return out
