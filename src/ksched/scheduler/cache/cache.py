"""The scheduler cache: NodeInfo per node with the pods on it, bound and assumed.

As upstream (1.36): ``assume_pod`` adds a pod to its node before binding; the informer's add
of the bound pod confirms it; ``forget_pod`` takes an assumed pod back when binding fails.
There is no expiry of assumed pods. Nodes removed while pods remain stay as "ghosts" (no Node
object, not schedulable) until their pods are gone.

Every change bumps the NodeInfo's generation and marks its table row dirty; ``update_snapshot``
copies only those rows and NodeInfos.

Divergence (no upstream counterpart): an update of a bound pod that changes nothing the cache,
its NodeInfos or the snapshot's consumers read (``unchanged_for_cache``: a kubelet's status
write, nearly always) swaps the stored object in place instead of removing and adding the pod:
no generation is bumped, so no snapshot row is copied again and no plugin index revisits the
node. The pod moves to the end of its node's lists as the remove/add would, and the snapshot's
copy of the NodeInfo gets the same swap at the next ``update_snapshot`` (never mid-cycle), so
the current object is what both hold and the old one is freed. ``in_place_updates=False`` keeps
upstream's remove/add for every update (the reference path; a test proves both agree).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.cache.node_table import NodeTable
from ksched.scheduler.cache.snapshot import Snapshot, zone_key
from ksched.scheduler.framework.types import ImageStateSummary, NodeInfo, PodInfo

__all__ = ["Cache", "CacheError"]

log = logging.getLogger(__name__)


class CacheError(Exception):
    """An operation that contradicts the cache's state (as upstream's cache returns errors)."""


@dataclass(slots=True)
class _PodState:
    pod_info: PodInfo
    assumed: bool


@dataclass(slots=True)
class _Swap:
    """A pod object swapped in the cache since the synced snapshot last saw its node: the
    snapshot's copy still holds ``old``; ``moved`` when the pod went to the end of the lists."""

    node_name: str
    old: PodInfo
    new: PodInfo
    moved: bool


def unchanged_for_cache(old: Pod, new: Pod) -> bool:
    """Whether ``new`` (a later object of the pod ``old``) changes nothing the cache or a snapshot
    consumer derives from a pod on a node: the node, the spec (requests, containers, overhead,
    pod-level resources, affinity, host ports, volumes and claims), the labels and annotations
    (pod-count and InterPodAffinity signatures), deletion (terminating pods are counted apart)
    and whether the pod is terminal. Status fields other than the phase's class (conditions,
    container statuses, start time, ...) are read from the object itself, never aggregated."""
    if old is new:
        return True
    if (old.uid != new.uid or old.node_name != new.node_name or old.namespace != new.namespace
            or old.name != new.name or old.deletion_timestamp != new.deletion_timestamp
            or old.is_terminal != new.is_terminal):
        return False
    if old.labels is not new.labels and old.labels != new.labels:
        return False
    if old.annotations is not new.annotations and old.annotations != new.annotations:
        return False
    old_spec = old.raw.get("spec")
    new_spec = new.raw.get("spec")
    return old_spec is new_spec or old_spec == new_spec


def _move_to_end(lst: list[PodInfo], old: PodInfo, new: PodInfo) -> None:
    for i, x in enumerate(lst):
        if x is old:
            del lst[i]
            lst.append(new)
            return


def _swap_in(ni: NodeInfo, old: PodInfo, new: PodInfo, moved: bool) -> None:
    """``new`` replaces ``old`` in the NodeInfo's lists: in place, or (``moved``) at the end as a
    removal and an addition would leave it. Nothing derived from the pod changes."""
    if not moved:
        # (An assumed pod confirmed: usually the last one added, so searched from the end.)
        for lst in (ni.pods, ni.pods_with_affinity, ni.pods_with_required_anti_affinity):
            for i in range(len(lst) - 1, -1, -1):
                if lst[i] is old:
                    lst[i] = new
                    break
        return
    _move_to_end(ni.pods, old, new)
    if ni.pods_with_affinity:
        _move_to_end(ni.pods_with_affinity, old, new)
    if ni.pods_with_required_anti_affinity:
        _move_to_end(ni.pods_with_required_anti_affinity, old, new)


# The swaps' list searches in C (``list.index``, identity first) instead of a Python loop, and a
# snapshot copy that never held the old object (the usual case: a pod assumed after the copy was
# made and confirmed before the next update, whose row is copied afresh anyway) left alone after
# one ``in``. False: ``_swap_in``'s loops for every swap (the reference path; a test proves both
# leave the same lists).
FAST_SWAPS = True


# ``update_snapshot`` copies only the requested and non-zero rows (not the allocatable one) of a
# row whose NodeInfo is copied afresh under the same Node object as the snapshot's copy had (a
# pod assumed, added or removed: nearly every cycle's one or two rows). The allocatable row is
# written from the Node alone (a ghost's: zeros), and columns are only ever appended, so the
# snapshot's row is the cache's already. False: every changed row copied whole (the reference).
SKIP_UNCHANGED_ALLOC = True


def _swap_in_fast(ni: NodeInfo, old: PodInfo, new: PodInfo, moved: bool) -> None:
    """``_swap_in`` with the searches in C. A pod object is in a NodeInfo's lists at most once,
    and the affinity lists hold only pods of ``pods``: when ``old`` is not in ``pods`` nothing
    changes (as the reference's scans find nothing)."""
    pods = ni.pods
    if old not in pods:
        return
    i = pods.index(old)
    if moved:
        del pods[i]
        pods.append(new)
    else:
        pods[i] = new
    for lst in (ni.pods_with_affinity, ni.pods_with_required_anti_affinity):
        if lst and old in lst:
            j = lst.index(old)
            if moved:
                del lst[j]
                lst.append(new)
            else:
                lst[j] = new


def _pod_key(pod: Pod) -> str:
    return pod.uid or pod.key


class Cache:
    """The scheduler's cache (upstream's cache.go) and the columnar node table behind its
    snapshots.

    Table rows are written lazily (``defer_rows``, on by default): a node added or changed marks
    its row stale instead of writing it, a pod added to or removed from a stale row leaves the
    row alone, and every stale row is written from its NodeInfo in one go before the table is
    read (``update_snapshot``). A restart that lists thousands of nodes and pods thus writes each
    row once instead of applying every pod's delta. With ``defer_rows=False`` each change goes
    into the table at once (the reference path; tests prove both give the same table).
    """

    def __init__(self, defer_rows: bool = True, in_place_updates: bool = True) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.pod_states: dict[str, _PodState] = {}
        self.assumed: set[str] = set()
        self._table = NodeTable()
        self.image_states: dict[str, ImageStateSummary] = {}
        self._row_info: list[NodeInfo | None] = []
        self._free_rows: list[int] = []
        self._dirty: set[int] = set()
        self.defer_rows = defer_rows
        # Rows whose table contents are out of date (rewritten from their NodeInfo before a read).
        self._stale: set[int] = set()
        self._structure_changed = True
        self._side_lists_changed = True
        self._generation = 0
        self._zones: dict[str, list[str]] = {}
        self._synced: Snapshot | None = None
        # Status-only updates (``in_place_updates``) take the swap path; False: remove/add always.
        self.in_place_updates = in_place_updates
        # Pod key -> the swap the synced snapshot has not seen yet (in the order made last).
        self._swaps: dict[str, _Swap] = {}

    # ---------------------------------------------------------------- bookkeeping

    def _bump(self, ni: NodeInfo, pod: PodInfo | None = None, sign: int = 0) -> None:
        """A NodeInfo changed: new generation; its table row gets the pod's delta (or is
        rewritten when the node itself changed)."""
        self._generation += 1
        ni.generation = self._generation
        row = ni.row
        if row >= 0:
            if pod is not None:
                if row not in self._stale:
                    self._table.add_pod(row, pod, sign)
                elif pod.table_vector is None or pod.table_vector[0] is not self._table.cols:
                    # The row is rewritten in full before the table is read; the pod's resources
                    # get their columns now, in the order the reference path gives them.
                    col = self._table.cols.col
                    for k in pod.requests:
                        col(k)
            elif self.defer_rows:
                col = self._table.cols.col
                for k in ni.allocatable:
                    col(k)
                for k in ni.requested:
                    col(k)
                self._stale.add(row)
            else:
                self._table.write(row, ni)
            self._dirty.add(row)

    @property
    def table(self) -> NodeTable:
        """The node table, every row current."""
        self._write_stale_rows()
        return self._table

    def _write_stale_rows(self) -> None:
        """Write every stale row from its NodeInfo (before the table is read)."""
        if not self._stale:
            return
        rows = sorted(self._stale)
        self._stale = set()
        infos = [self._row_info[r] for r in rows]
        self._table.write_rows(rows, infos)  # type: ignore[arg-type]

    def _alloc_row(self, ni: NodeInfo) -> None:
        if self._free_rows:
            row = self._free_rows.pop()
            self._row_info[row] = ni
        else:
            row = len(self._row_info)
            self._row_info.append(ni)
        ni.row = row
        self._structure_changed = True

    def _free_row(self, ni: NodeInfo) -> None:
        if ni.row < 0:
            return
        self._stale.discard(ni.row)
        self._table.clear(ni.row)
        self._row_info[ni.row] = None
        self._free_rows.append(ni.row)
        self._dirty.add(ni.row)
        ni.row = -1
        self._structure_changed = True
        self._generation += 1  # a freed row is a change plugins must see (changed_rows_since)

    def _node_info(self, name: str) -> NodeInfo:
        ni = self.nodes.get(name)
        if ni is None:
            ni = NodeInfo()
            ni.name = name
            self.nodes[name] = ni
        return ni

    # ---------------------------------------------------------------- nodes

    def add_node(self, node: Node) -> NodeInfo:
        ni = self._node_info(node.name)
        if ni.node is not None:
            return self.update_node(ni.node, node)
        ni.set_node(node)
        self._add_images(ni, node)
        self._alloc_row(ni)
        self._zones.setdefault(zone_key(ni), []).append(ni.name)
        self._side_lists_changed = True
        self._bump(ni)
        return ni

    def update_node(self, old: Node | None, new: Node) -> NodeInfo:
        ni = self.nodes.get(new.name)
        if ni is None or ni.node is None:
            return self.add_node(new)
        old_zone = zone_key(ni)
        self._remove_images(ni)
        ni.set_node(new)
        self._add_images(ni, new)
        new_zone = zone_key(ni)
        if new_zone != old_zone:
            self._zone_remove(old_zone, ni.name)
            self._zones.setdefault(new_zone, []).append(ni.name)
            self._structure_changed = True
        self._bump(ni)
        return ni

    def remove_node(self, node: Node) -> None:
        ni = self.nodes.get(node.name)
        if ni is None or ni.node is None:
            raise CacheError(f"node {node.name} is not found")
        self._zone_remove(zone_key(ni), ni.name)
        self._remove_images(ni)
        self._free_row(ni)
        ni.node = None
        ni.allocatable = {}
        self._side_lists_changed = True
        if not ni.pods:
            del self.nodes[node.name]
        else:
            self._bump(ni)  # a ghost until its pods go

    def _zone_remove(self, zone: str, name: str) -> None:
        lst = self._zones.get(zone)
        if lst is not None:
            try:
                lst.remove(name)
            except ValueError:
                pass
            if not lst:
                del self._zones[zone]
        self._structure_changed = True

    def _add_images(self, ni: NodeInfo, node: Node) -> None:
        states: dict[str, ImageStateSummary] = {}
        for img in node.images:
            for name in img.names:
                s = self.image_states.get(name)
                if s is None:
                    s = self.image_states[name] = ImageStateSummary(img.size_bytes)
                s.nodes.add(node.name)
                states[name] = s
        ni.image_states = states

    def _remove_images(self, ni: NodeInfo) -> None:
        for name, s in ni.image_states.items():
            s.nodes.discard(ni.name)
            if not s.nodes:
                self.image_states.pop(name, None)
        ni.image_states = {}

    # ---------------------------------------------------------------- pods

    def _add_to_node(self, pi: PodInfo) -> None:
        ni = self._node_info(pi.pod.node_name)
        ni.add_pod(pi)
        self._bump(ni, pi, 1)

    def _remove_from_node(self, pod: Pod, node_name: str) -> None:
        ni = self.nodes.get(node_name)
        if ni is None:
            raise CacheError(f"node {node_name} of pod {pod.key} is not in the cache")
        removed = ni.remove_pod(pod)
        if removed is None:
            raise CacheError(f"pod {pod.key} is not on node {node_name}")
        if ni.node is None and not ni.pods:
            del self.nodes[node_name]
            return
        self._bump(ni, removed, -1)

    def assume_pod(self, pod: Pod, like: PodInfo | None = None) -> None:
        """Add a pod (with spec.nodeName set to the chosen node) before it is bound. ``like``:
        the PodInfo of the object it was copied from (the queue's), whose derived values --
        requests, affinity terms, none of which reads spec.nodeName -- it shares instead of
        working them out again (``PodInfo.with_pod``)."""
        key = _pod_key(pod)
        if key in self.pod_states:
            raise CacheError(f"pod {pod.key} is in the cache, so can't be assumed")
        pi = like.with_pod(pod) if like is not None and like.pod.uid == pod.uid else PodInfo(pod)
        self._add_to_node(pi)
        self.pod_states[key] = _PodState(pi, True)
        self.assumed.add(key)

    def finish_binding(self, pod: Pod) -> None:
        """Binding went through (nothing to do in 1.36: assumed pods do not expire)."""

    def forget_pod(self, pod: Pod) -> None:
        """Take back an assumed pod whose binding failed."""
        key = _pod_key(pod)
        st = self.pod_states.get(key)
        if st is None or not st.assumed:
            raise CacheError(f"pod {pod.key} wasn't assumed so cannot be forgotten")
        if st.pod_info.pod.node_name != pod.node_name:
            raise CacheError(f"pod {pod.key} was assumed on {st.pod_info.pod.node_name} but assigned to "
                             f"{pod.node_name}")
        self._remove_from_node(st.pod_info.pod, st.pod_info.pod.node_name)
        del self.pod_states[key]
        self.assumed.discard(key)

    @property
    def generation(self) -> int:
        """Bumped by every change to a node or its pods (a snapshot records the one it reflects)."""
        return self._generation

    def is_assumed(self, pod: Pod) -> bool:
        return _pod_key(pod) in self.assumed

    def get_pod(self, pod: Pod) -> Pod | None:
        st = self.pod_states.get(_pod_key(pod))
        return st.pod_info.pod if st is not None else None

    def add_pod(self, pod: Pod) -> None:
        """The informer saw a bound pod: confirm an assumed pod, or add it."""
        key = _pod_key(pod)
        st = self.pod_states.get(key)
        if st is not None and st.assumed:
            old = st.pod_info.pod
            if old.node_name != pod.node_name:
                # Bound somewhere other than assumed: trust the API server.
                log.warning("pod %s was assumed to be on %s but got added to %s", pod.key, old.node_name,
                            pod.node_name)
                self._replace_pod(st, pod)
            else:
                # Confirmation: the same pod with the same spec; swap the object in place. The
                # snapshot's copy keeps the assumed object (same spec) until the node next changes.
                pi = st.pod_info.with_pod(pod)
                ni = self.nodes.get(pod.node_name)
                if ni is not None:
                    if FAST_SWAPS:
                        _swap_in_fast(ni, st.pod_info, pi, False)
                    else:
                        ni.replace_pod(st.pod_info, pi)
                if self.in_place_updates:
                    self._note_swap(key, pod.node_name, st.pod_info, pi, False)
                st.pod_info = pi
            st.assumed = False
            self.assumed.discard(key)
            return
        if st is not None:
            raise CacheError(f"pod {pod.key} was already in added state")
        pi = PodInfo(pod)
        self._add_to_node(pi)
        self.pod_states[key] = _PodState(pi, False)

    def update_pod(self, old: Pod, new: Pod) -> None:
        key = _pod_key(old)
        st = self.pod_states.get(key)
        if st is None:
            raise CacheError(f"pod {old.key} is not added to scheduler cache, so cannot be updated")
        if st.assumed:
            raise CacheError(f"assumed pod {old.key} should not be updated")
        cur = st.pod_info.pod
        if self.in_place_updates and unchanged_for_cache(cur, new):
            ni = self.nodes.get(cur.node_name)
            if ni is not None:
                pi = st.pod_info.with_pod(new)
                (_swap_in_fast if FAST_SWAPS else _swap_in)(ni, st.pod_info, pi, True)
                self._note_swap(key, cur.node_name, st.pod_info, pi, True)
                st.pod_info = pi
                return
        self._replace_pod(st, new)

    def _note_swap(self, key: str, node_name: str, old: PodInfo, new: PodInfo, moved: bool) -> None:
        prev = self._swaps.get(key)
        if prev is None:
            self._swaps[key] = _Swap(node_name, old, new, moved)
        elif prev.node_name != node_name or prev.new is not old:
            del self._swaps[key]
            self._swaps[key] = _Swap(node_name, old, new, moved)
        elif moved:
            # Moved again: it is last in the lists now, after every swap made since.
            del self._swaps[key]
            self._swaps[key] = _Swap(node_name, prev.old, new, True)
        else:
            prev.new = new

    def _apply_swaps(self, snap: Snapshot) -> None:
        """Give the synced snapshot's NodeInfos the objects swapped in since its last update
        (a row the cache changed otherwise is copied afresh anyway)."""
        swaps = self._swaps
        self._swaps = {}
        row_of = snap.row_of
        infos = snap.infos
        swap_in = _swap_in_fast if FAST_SWAPS else _swap_in
        for sw in swaps.values():
            r = row_of.get(sw.node_name)
            if r is not None:
                copy = infos[r]
                if copy is not None and copy.name == sw.node_name:
                    swap_in(copy, sw.old, sw.new, sw.moved)

    def _replace_pod(self, st: _PodState, new: Pod) -> None:
        old = st.pod_info.pod
        self._remove_from_node(old, old.node_name)
        pi = PodInfo(new)
        self._add_to_node(pi)
        st.pod_info = pi

    def remove_pod(self, pod: Pod) -> None:
        key = _pod_key(pod)
        st = self.pod_states.get(key)
        if st is None:
            raise CacheError(f"pod {pod.key} is not found in scheduler cache, so cannot be removed from it")
        cur = st.pod_info.pod
        if cur.node_name != pod.node_name and pod.node_name:
            # Upstream exits here: the cache is corrupt. We report and correct.
            log.error("pod %s was assumed to be on %s but got removed from %s", pod.key, cur.node_name,
                      pod.node_name)
        self._remove_from_node(cur, cur.node_name)
        del self.pod_states[key]
        self.assumed.discard(key)
        self._swaps.pop(key, None)

    # ---------------------------------------------------------------- snapshot

    def _order(self) -> list[int]:
        """Rows of live nodes, zone-interleaved (upstream's nodeTree.list)."""
        zones = list(self._zones.values())
        out: list[int] = []
        nodes = self.nodes
        if len(zones) == 1:
            return [nodes[n].row for n in zones[0]]
        i = 0
        while True:
            added = False
            for z in zones:
                if i < len(z):
                    out.append(nodes[z[i]].row)
                    added = True
            if not added:
                return out
            i += 1

    def update_snapshot(self, snap: Snapshot) -> None:
        """Bring a snapshot up to date, copying only what changed since it was last updated."""
        self._write_stale_rows()
        if self._swaps:
            if snap is self._synced and snap.table.cols is self._table.cols:
                self._apply_swaps(snap)
            else:
                self._swaps = {}  # the snapshot is rebuilt from the cache below
        if snap is not self._synced or snap.table.cols is not self._table.cols:
            # The change tracking belongs to the snapshot last updated; any other is rebuilt in full.
            if snap.table.cols is not self._table.cols:
                snap.table = NodeTable(self._table.cols)
            snap.infos = []
            snap.generations = []
            snap.gen_array = np.zeros(0, dtype=np.int64)
            self._structure_changed = True
            self._side_lists_changed = True
            self._dirty = set(range(len(self._row_info)))
            self._synced = snap
        n = len(self._row_info)
        if len(snap.infos) < n:
            snap.infos.extend([None] * (n - len(snap.infos)))
            snap.generations.extend([0] * (n - len(snap.generations)))
        if len(snap.gen_array) != len(snap.generations):
            grown = np.zeros(len(snap.generations), dtype=np.int64)
            k = min(len(snap.gen_array), len(grown))
            grown[:k] = snap.gen_array[:k]
            snap.gen_array = grown
        dirty = self._dirty
        if dirty:
            rows = sorted(dirty)
            node_changed: list[int] = []
            # Rows copied afresh under the same Node object: their allocatable row is the one
            # the snapshot's table holds already (SKIP_UNCHANGED_ALLOC).
            same_node: list[int] | None = [] if SKIP_UNCHANGED_ALLOC else None
            for r in rows:
                ni = self._row_info[r] if r < n else None
                prev = snap.infos[r] if r < len(snap.infos) else None
                if ni is None:
                    snap.infos[r] = None
                    snap.generations[r] = 0
                    node_changed.append(r)
                    snap._apply_row(r, prev, None)
                elif snap.generations[r] != ni.generation or prev is None:
                    clone = snap.infos[r] = ni.clone()
                    snap.generations[r] = ni.generation
                    if prev is None or prev.node is not ni.node:
                        node_changed.append(r)
                    elif same_node is not None:
                        same_node.append(r)
                    snap._apply_row(r, prev, clone)
            snap.table.copy_rows_from(self.table, rows, same_node)
            # A freed row counts as changed too: it gets the current generation.
            ga, gens = snap.gen_array, snap.generations
            if len(rows) <= 4:
                for r in rows:  # (a cycle's one or two rows: no list and fancy index)
                    ga[r] = gens[r] or self._generation
            else:
                ga[rows] = [gens[r] or self._generation for r in rows]
            if snap.generation > 0:
                snap._record_update(snap.generation, rows)
            else:
                snap._last_update = None
            snap._refresh_row_values(node_changed)
            self._dirty = set()
        elif snap.table.alloc.shape[1] < len(self._table.cols):
            snap.table.fit(self._table.capacity)
        if self._structure_changed:
            snap._set_order(self._order())
            self._structure_changed = False
            self._side_lists_changed = True
        elif dirty:
            snap._all = None
        if self._side_lists_changed:
            snap._rebuild_side_lists()
            self._side_lists_changed = False
        snap.generation = self._generation

    # ---------------------------------------------------------------- introspection

    def node_count(self) -> int:
        return sum(1 for ni in self.nodes.values() if ni.node is not None)

    def pod_count(self) -> int:
        return len(self.pod_states)

    def check_invariants(self) -> list[str]:
        """Problems found (empty when consistent): for every node, requested, non-zero requested,
        pod count and the table row equal the sums over its pods."""
        problems: list[str] = []
        self._write_stale_rows()
        cols = self._table.cols
        for name, ni in self.nodes.items():
            want: dict[str, int] = {}
            nz = [0, 0]
            for pi in ni.pods:
                for k, v in pi.requests.items():
                    want[k] = want.get(k, 0) + v
                nz[0] += pi.non_zero[0]
                nz[1] += pi.non_zero[1]
            have = {k: v for k, v in ni.requested.items() if v}
            if have != want:
                problems.append(f"{name}: requested {have} != sum of pods {want}")
            if ni.non_zero_requested != nz:
                problems.append(f"{name}: non-zero requested {ni.non_zero_requested} != {nz}")
            if ni.row >= 0:
                row = self._table.req[ni.row]
                for k, v in want.items():
                    c = cols.index.get(k)
                    if c is None or int(row[c]) != v:
                        problems.append(f"{name}: table row {k}={None if c is None else int(row[c])} != {v}")
                if int(row[3]) != len(ni.pods):
                    problems.append(f"{name}: table pod count {int(row[3])} != {len(ni.pods)}")
        for key, st in self.pod_states.items():
            ni = self.nodes.get(st.pod_info.pod.node_name)
            if ni is None or all(pi is not st.pod_info for pi in ni.pods):
                problems.append(f"pod {key} is not on its node {st.pod_info.pod.node_name}")
        return problems
