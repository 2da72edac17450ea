"""One scheduling attempt, as upstream's schedule_one.go: find the nodes that fit (with the
adaptive percentage of nodes to score and the rotating start index), score them, pick the
host, reserve, permit, assume; then the binding cycle. Vectorized Filter/Score forms are used
where plugins provide them; ``Framework.vectorize = False`` forces the per-node forms."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, FitError, Status
from ksched.scheduler.framework.types import NodeInfo

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "ScheduleResult",
    "num_feasible_nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """Upstream's numFeasibleNodesToFind (adaptive when the percentage is 0)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    if num < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num


@dataclass(slots=True)
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int


@dataclass(slots=True)
class Explanation:
    """The decision record of one attempt (kube-scheduler-simulator style)."""

    filters: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    selected: str | None = None
    message: str = ""
    preemption: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"filter": self.filters, "score": self.scores, "selectedNode": self.selected,
             "message": self.message}
        if self.preemption is not None:
            d["preemption"] = self.preemption
        return d


class FeasibleNodeFinder:
    """Finds feasible nodes for one pod on one snapshot."""

    def __init__(self, fw: Framework, snapshot: Snapshot) -> None:
        self.fw = fw
        self.snapshot = snapshot

    def find(self, state: CycleState, pod: Pod, rows: np.ndarray, num_to_find: int,
             diagnosis: Diagnosis, explain: Explanation | None, rotation: int | None = None) -> tuple[np.ndarray, int]:
        """Rows (in ``rows`` order) of up to ``num_to_find`` feasible nodes, and how many nodes
        were processed. Fills ``diagnosis`` for the processed nodes that failed, but only when
        none fit (statuses are only needed then) or when explaining."""
        fw = self.fw
        snap = self.snapshot
        infos = snap.infos
        n = len(rows)
        if n == 0:
            return rows, 0
        skip = state.skip_filter_plugins
        plugins = [p for p in fw.filter_plugins if p.name not in skip]
        forms = fw.filter_forms()
        cached_plugins = [p for p in plugins if forms[p.name] == "cached"]
        vec_plugins = [p for p in plugins if forms[p.name] == "vector"]
        node_plugins = [p for p in plugins if forms[p.name] == "node"]
        # masks: per plugin, by position in ``rows`` (the cached plugins' only when diagnosing).
        masks: dict[str, np.ndarray] = {}
        if cached_plugins:
            mask = fw.row_cache.combined_filter_mask(cached_plugins, state, pod, snap)[rows]
        else:
            mask = np.ones(n, dtype=bool)
        per_node_now: set[str] = set()
        for p in vec_plugins:
            m = p.filter_nodes(state, pod, snap, rows)  # type: ignore[attr-defined]
            if m is None:
                per_node_now.add(p.name)  # the plugin's vectorized form declined this pod
                continue
            masks[p.name] = m
            mask &= m
        if per_node_now:
            node_plugins = [p for p in plugins if forms[p.name] == "node" or p.name in per_node_now]
        # Nodes with nominated pods are evaluated per node, twice (with and without them).
        # A node the vectorized filters already reject fails the second pass (without the
        # nominated pods) anyway, so only nodes they accept need the per-node passes.
        nominated_pos: set[int] = set()
        nominated_of: dict[int, list[Any]] = {}
        nom = fw.nominator
        if nom is not None and len(nom):
            for node_name in list(nom.by_node):
                r = snap.row_of.get(node_name)
                if r is None:
                    continue
                if rotation is not None:
                    # ``rows`` is the snapshot's order rotated left by ``rotation``.
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
                    nominated_pos.add(pos)
                    nominated_of[pos] = to_add
        statuses: dict[int, Status] = {}  # position -> status of a node checked per node
        feasible: list[int] = []
        processed = n
        if not node_plugins:
            errors: dict[int, Status] = {}
            if nominated_pos:
                # Only the nodes with nominated pods need a per-node pass (with those pods).
                # When every Filter plugin is row-local, its verdict depends only on the node's
                # generation, the nominated pods and the pod's keys: remembered across cycles
                # (replicas of one template ask the same question until the node changes).
                keys = tuple(p.row_local_key(pod) for p in cached_plugins) if not vec_plugins else None
                verdicts = fw.nominated_verdicts
                for pos in sorted(nominated_pos):
                    r = int(rows[pos])
                    ni = infos[r]
                    assert ni is not None
                    ck = None
                    if keys is not None:
                        ck = (r, snap.generations[r], keys,
                              tuple((pi.pod.uid, pi.pod.resource_version) for pi in nominated_of[pos]))
                    if ck is not None and ck in verdicts:
                        st = verdicts[ck]
                    else:
                        # Every Filter plugin is in ``mask`` here, and it accepted the node: only
                        # the pass with the nominated pods is left.
                        st = fw.run_filter_plugins_with_nominated_pods(state, pod, ni, passes_without=True)
                        if ck is not None and (st is None or st.code != Code.ERROR):
                            if len(verdicts) >= 4096:
                                verdicts.clear()
                            verdicts[ck] = st
                    if st is not None:
                        mask[pos] = False  # ``mask`` is this call's own array
                        if st.code == Code.ERROR:
                            errors[pos] = st
                        else:
                            statuses[pos] = st
            idx = np.flatnonzero(mask)
            if len(idx) >= num_to_find:
                idx = idx[:num_to_find]
                processed = int(idx[-1]) + 1
            for pos in sorted(errors):
                if pos < processed:  # a node the ordered walk would have reached
                    raise _FilterError(errors[pos])
            feasible_rows = rows[idx]
        else:
            cand = np.flatnonzero(mask).tolist()
            if nominated_pos:
                cand = sorted(set(cand) | nominated_pos)
            processed = n
            for pos in cand:
                ni = infos[int(rows[pos])]
                assert ni is not None
                if pos in nominated_pos:
                    st = fw.run_filter_plugins_with_nominated_pods(state, pod, ni)
                else:
                    st = _run_node_plugins(node_plugins, state, pod, ni)
                if st is None:
                    feasible.append(pos)
                    if len(feasible) >= num_to_find:
                        processed = pos + 1
                        break
                else:
                    if st.code == Code.ERROR:
                        raise _FilterError(st)
                    statuses[pos] = st
            feasible_rows = rows[np.asarray(feasible, dtype=np.int64)] if feasible else rows[:0]
        if len(feasible_rows) == 0 or explain is not None:
            for p in cached_plugins:
                masks[p.name] = fw.row_cache.filter_mask(p, state, pod, snap)[rows]
            self._diagnose(state, pod, rows, processed if len(feasible_rows) else n, plugins, masks, statuses,
                           nominated_pos, diagnosis, explain, feasible_rows)
        return feasible_rows, processed

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
        nom = fw.nominator
        if nom is not None and len(nom):
            pos_of = {int(r): i for i, r in enumerate(pos_rows.tolist())}
            for node_name in list(nom.by_node):
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
        vec = getattr(p, "filter_statuses", None) if self.fw.vectorize else None
        if vec is not None and len(rows) > 1:
            got = vec(state, pod, self.snapshot, rows)
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

class _FilterError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def _run_node_plugins(plugins: Sequence[Any], state: CycleState, pod: Pod, ni: NodeInfo) -> Status | None:
    for p in plugins:
        st = p.filter(state, pod, ni)
        if st is not None and st.code != Code.SUCCESS:
            if st.code == Code.ERROR or st.is_rejected():
                return st.with_plugin(p.name)
            return Status.as_error(f"plugin {p.name} returned an unexpected status {st!r}", p.name)
    return None


class Algorithm:
    """schedulePod: PreFilter, Filter, PreScore, Score, select host. Keeps the rotating start
    index between cycles."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_start_node_index = 0

    def schedule_pod(self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot,
                     explain: Explanation | None = None) -> ScheduleResult:
        num_all = snapshot.num_nodes
        if num_all == 0:
            raise NoNodesAvailable()
        feasible_rows, diagnosis = self.find_nodes_that_fit_pod(fw, state, pod, snapshot, explain)
        if len(feasible_rows) == 0:
            raise FitError(pod.key, num_all, diagnosis)
        infos = snapshot.infos
        if len(feasible_rows) == 1:
            host = infos[int(feasible_rows[0])].name  # type: ignore[union-attr]
            if explain is not None:
                explain.selected = host
            return ScheduleResult(host, self._evaluated, 1)
        nodes = snapshot.node_list(feasible_rows)
        st = fw.run_pre_score(state, pod, nodes)
        if st is not None:
            raise SchedulingError(st)
        record: dict[str, Any] | None = {} if explain is not None else None
        totals, st = fw.run_score(state, pod, snapshot, nodes, record)
        if st is not None:
            raise SchedulingError(st)
        best = int(totals.max())
        ties = np.flatnonzero(totals == best)
        pick = int(ties[0]) if len(ties) == 1 else int(ties[self.rng.randrange(len(ties))])
        host = infos[int(feasible_rows[pick])].name  # type: ignore[union-attr]
        if explain is not None and record is not None:
            names = nodes.names
            for i, name in enumerate(names):
                entry: dict[str, Any] = {}
                for plugin, (raw, norm, weighted) in record.items():
                    entry[plugin] = {"raw": int(raw[i]) if raw is not None else None, "normalized": int(norm[i]),
                                     "weighted": int(weighted[i])}
                entry["total"] = int(totals[i])
                explain.scores[name] = entry
            explain.selected = host
        return ScheduleResult(host, self._evaluated, len(feasible_rows))

    def find_nodes_that_fit_pod(self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot,
                                explain: Explanation | None) -> tuple[np.ndarray, Diagnosis]:
        diagnosis = Diagnosis()
        all_nodes = snapshot.all_nodes()
        self._evaluated = 0
        pre_res, st, narrowing = fw.run_pre_filter(state, pod, all_nodes)
        if st is not None:
            if st.code == Code.ERROR:
                raise SchedulingError(st)
            diagnosis.absent_status = st
            diagnosis.pre_filter_msg = st.message()
            for pl in narrowing:
                diagnosis.unschedulable_plugins.add(pl)
            if st.plugin:
                diagnosis.add_plugin_of(st)
            if explain is not None:
                for name in all_nodes.names:
                    explain.filters[name] = {"plugin": st.plugin, "code": str(st.code), "reason": st.message()}
            return snapshot.order[:0], diagnosis
        # The nominated node (from a previous preemption) is tried first.
        nn = pod.nominated_node_name
        if nn and fw.filter_plugins:
            ni = snapshot.get(nn)
            if ni is not None and (pre_res is None or pre_res.node_names is None or nn in pre_res.node_names):
                st2 = fw.run_filter_plugins_with_nominated_pods(state, pod, ni)
                if st2 is None:
                    self._evaluated = 1
                    if explain is not None:
                        explain.filters[nn] = "passed"
                    return np.asarray([snapshot.row_of[nn]], dtype=np.int64), diagnosis
                if st2.code == Code.ERROR:
                    raise SchedulingError(st2)
        rows = snapshot.order
        if pre_res is not None and pre_res.node_names is not None:
            keep = pre_res.node_names
            rows = np.asarray([r for r in rows.tolist() if snapshot.infos[r].name in keep],  # type: ignore[union-attr]
                              dtype=np.int64)
            diagnosis.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
            diagnosis.unschedulable_plugins.update(narrowing)
        n = len(rows)
        if n == 0:
            return rows, diagnosis
        # As upstream: the nodes are visited from nodes[next % n] (n: the PreFilter subset, if
        # any), and the index then moves on by the nodes processed, modulo all nodes.
        num_all = len(all_nodes)
        num_to_find = num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, n)
        if not fw.has_score_plugins():
            num_to_find = 1
        start = self.next_start_node_index % n
        if not fw.filter_plugins:
            sel = np.roll(rows, -start)[:num_to_find]
            self.next_start_node_index = (self.next_start_node_index + len(sel)) % num_all
            self._evaluated = len(sel)
            return sel, diagnosis
        ordered = np.concatenate((rows[start:], rows[:start])) if start else rows
        finder = FeasibleNodeFinder(fw, snapshot)
        try:
            feasible, processed = finder.find(state, pod, ordered, num_to_find, diagnosis, explain,
                                              rotation=start if rows is snapshot.order else None)
        except _FilterError as e:
            self.next_start_node_index %= num_all
            raise SchedulingError(e.status) from e
        self.next_start_node_index = (self.next_start_node_index + processed) % num_all
        self._evaluated = processed
        return feasible, diagnosis


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return "no nodes available to schedule pods"


class SchedulingError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status
