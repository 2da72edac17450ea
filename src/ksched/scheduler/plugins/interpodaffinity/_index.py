"""The cluster-wide pod index behind InterPodAffinity.

Upstream's PreFilter and PreScore walk every pod on every node once per scheduling cycle. Here
the walk is replaced by an index over the snapshot's NodeInfos that is brought up to date at the
start of each cycle by looking only at the rows whose NodeInfo object changed (the cache replaces
a snapshot NodeInfo whenever its node or pods change), so the per-cycle cost is proportional to
the number of changed nodes, not to the size of the cluster.

The index groups what matters to the plugin:

* existing pods by *label signature* (namespace + labels): the incoming pod's terms are matched
  once per signature instead of once per pod;
* existing pods' terms that act on the incoming pod (required anti-affinity for Filter; required
  affinity, preferred affinity and preferred anti-affinity for Score) by term identity: each
  distinct term is matched once against the incoming pod.

Each group knows on which rows it has how many members, and (once asked, for groups that are not
tiny) keeps a per-topology-domain count array up to date incrementally. Topology values are
interned per topology key into small integers (0 means "the node has no such label"), shared with
the vectorized Filter/Score through ``Snapshot.row_values``.

Which groups match a given incoming pod or term is memoized per query key: when groups are
created, only the new ones are evaluated.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ksched.api.affinity import PodAffinityTerm
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = [
    "Index",
    "add_into",
    "dom_of",
    "dom_size",
    "domain_rows",
    "gather",
]

# ---------------------------------------------------------------------------------------------
# Topology domains

_DOMAINS: dict[str, dict[str, int]] = {}
_DOMAINS_LOCK = threading.Lock()
_ROW_FNS: dict[str, Callable[[NodeInfo], int]] = {}


def dom_of(key: str, value: str) -> int:
    """The interned index (>= 1) of a topology value under ``key``."""
    d = _DOMAINS.get(key)
    if d is not None:
        i = d.get(value)
        if i is not None:
            return i
    with _DOMAINS_LOCK:
        d = _DOMAINS.setdefault(key, {})
        i = d.get(value)
        if i is None:
            i = d[value] = len(d) + 1
        return i


def lookup_dom(key: str, value: str) -> int:
    """The index of a value if it was ever interned, else 0 (no count can exist for it)."""
    d = _DOMAINS.get(key)
    return d.get(value, 0) if d is not None else 0


def node_dom(node: Node | None, key: str) -> int:
    if node is None:
        return 0
    v = node.labels.get(key)
    return 0 if v is None else dom_of(key, v)


def dom_size(key: str) -> int:
    """Length an array indexed by the domains of ``key`` needs right now."""
    d = _DOMAINS.get(key)
    return (len(d) if d is not None else 0) + 1


def domain_rows(snapshot: Any, key: str) -> np.ndarray:
    """Per snapshot row: the domain index of the node's ``key`` label (0 if missing)."""
    fn = _ROW_FNS.get(key)
    if fn is None:
        def fn(ni: NodeInfo, _k: str = key) -> int:
            return node_dom(ni.node, _k)
        fn = _ROW_FNS.setdefault(key, fn)
    arr: np.ndarray = snapshot.row_values(("InterPodAffinity.domain", key), fn, np.int64)
    return arr


def grow(arr: np.ndarray, size: int) -> np.ndarray:
    if len(arr) >= size:
        return arr
    out = np.zeros(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def gather(arr: np.ndarray | None, dom: np.ndarray) -> np.ndarray:
    """``arr[dom]`` where indices past the end of ``arr`` read 0."""
    if arr is None:
        return np.zeros(len(dom), dtype=np.int64)
    if len(dom) and int(dom.max()) >= len(arr):
        arr = grow(arr, int(dom.max()) + 1)
    return arr[dom]


def add_into(acc: dict[str, np.ndarray], key: str, arr: np.ndarray, mult: int = 1) -> None:
    cur = acc.get(key)
    if cur is None:
        cur = np.zeros(max(dom_size(key), len(arr)), dtype=np.int64)
    elif len(cur) < len(arr):
        cur = grow(cur, len(arr))
    acc[key] = cur
    if mult == 1:
        cur[: len(arr)] += arr
    else:
        cur[: len(arr)] += arr * mult


# ---------------------------------------------------------------------------------------------
# Groups and registries

# Groups with at least this many rows keep per-domain count arrays; smaller ones are summed row by
# row when queried (a dense array per tiny group would cost O(domains) per query and memory).
DENSE_MIN_ROWS = 16


class Group:
    """Members of one kind (a label signature, or a term) and the rows they are on."""

    __slots__ = ("alive", "dense", "key", "rows", "total")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.alive = True
        self.rows: dict[int, int] = {}
        self.dense: dict[str, np.ndarray] = {}
        self.total = 0


class SigGroup(Group):
    """Pods with the same namespace and labels."""

    __slots__ = ("labels", "namespace")

    def __init__(self, key: Any, namespace: str, labels: dict[str, str]) -> None:
        super().__init__(key)
        self.namespace = namespace
        self.labels = labels


class TermGroup(Group):
    """Occurrences of one (anti-)affinity term of existing pods (with its weight, for Score)."""

    __slots__ = ("sign", "term", "weight")

    def __init__(self, key: Any, term: PodAffinityTerm, weight: int, sign: int) -> None:
        super().__init__(key)
        self.term = term
        self.weight = weight
        self.sign = sign


class Registry:
    """Live groups by key, plus a creation log that lets memos evaluate only new groups."""

    __slots__ = ("epoch", "items", "log")

    def __init__(self) -> None:
        self.items: dict[Any, Group] = {}
        self.log: list[Group] = []
        self.epoch = 0

    def add(self, g: Group) -> None:
        self.items[g.key] = g
        self.log.append(g)

    def kill(self, g: Group) -> None:
        g.alive = False
        if self.items.get(g.key) is g:
            del self.items[g.key]
        if len(self.log) > 2 * len(self.items) + 256:
            self.log = list(self.items.values())
            self.epoch += 1


class _Memo:
    __slots__ = ("epoch", "matched", "pos")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.pos = 0
        self.matched: list[Group] = []


_MEMO_MAX = 1024

# Kinds of existing-pod terms that act on the incoming pod.
KIND_ANTI = "anti"          # required anti-affinity (Filter, symmetry)
KIND_HARD = "hard"          # required affinity (Score, hardPodAffinityWeight)
KIND_PREF = "pref"          # preferred affinity (Score, +weight)
KIND_PREF_ANTI = "prefanti"  # preferred anti-affinity (Score, -weight)


def _pod_keys(pod: Pod) -> tuple[Any, list[tuple[Any, PodAffinityTerm, int, int]],
                                 list[tuple[Any, PodAffinityTerm, int, int]]]:
    """(signature key, required anti-affinity term entries, scoring term entries), cached on the
    pod object. An entry is (group key, term, weight, sign)."""
    c = pod.cached()
    hit = c.get("InterPodAffinity.keys")
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    sig = (pod.namespace, frozenset(pod.labels.items()))
    anti: list[tuple[Any, PodAffinityTerm, int, int]] = []
    score: list[tuple[Any, PodAffinityTerm, int, int]] = []
    aff = pod.affinity
    if aff is not None:
        for t in aff.pod_anti_affinity_required:
            anti.append(((KIND_ANTI, t.key()), t, 0, 0))
        for t in aff.pod_affinity_required:
            score.append(((KIND_HARD, t.key()), t, 0, 1))
        for wt in aff.pod_affinity_preferred:
            score.append(((KIND_PREF, wt.term.key(), wt.weight), wt.term, wt.weight, 1))
        for wt in aff.pod_anti_affinity_preferred:
            score.append(((KIND_PREF_ANTI, wt.term.key(), wt.weight), wt.term, wt.weight, -1))
    out = (sig, anti, score)
    c["InterPodAffinity.keys"] = out
    return out


def _changed_rows(a: list[Any], b: list[Any]) -> list[int]:
    """Rows whose entries differ by identity, found by bisecting list slices (compared in C)."""
    m = min(len(a), len(b))
    out: list[int] = list(range(m, max(len(a), len(b))))
    stack = [(0, m)]
    while stack:
        lo, hi = stack.pop()
        if a[lo:hi] == b[lo:hi]:
            continue
        if hi - lo <= 32:
            out.extend(r for r in range(lo, hi) if a[r] is not b[r])
            continue
        mid = (lo + hi) // 2
        stack.append((mid, hi))
        stack.append((lo, mid))
    out.sort()
    return out


class Index:
    """The groups of one snapshot's NodeInfo list (``Snapshot.infos``), kept in sync by ``sync``."""

    def __init__(self, infos: list[NodeInfo | None], generations: list[int] | None = None) -> None:
        self.src = infos
        # The snapshot's per-row NodeInfo generations (same length as ``infos``), if known: then
        # changed rows are found by comparing generations in NumPy instead of bisecting the lists.
        self.gens = generations
        self.seen: list[NodeInfo | None] = []
        self.seen_gens = np.zeros(0, dtype=np.int64)
        self.sigs = Registry()
        self.terms = Registry()
        self._memos: OrderedDict[Any, _Memo] = OrderedDict()

    # ---- maintenance -----------------------------------------------------------------------

    def sync(self) -> None:
        cur = self.src
        seen = self.seen
        if len(cur) == len(seen) and cur == seen:
            return
        gens = self.gens
        if gens is not None and len(gens) == len(cur):
            g = np.fromiter(gens, dtype=np.int64, count=len(gens))
            m = min(len(g), len(self.seen_gens))
            rows = np.flatnonzero(g[:m] != self.seen_gens[:m]).tolist()
            rows.extend(range(m, max(len(cur), len(seen))))
            self.seen_gens = g
        else:
            rows = _changed_rows(seen, cur)
        for r in rows:
            old = seen[r] if r < len(seen) else None
            new = cur[r] if r < len(cur) else None
            if old is not new:
                self._apply(r, old, new)
        if len(seen) != len(cur):
            self.seen = list(cur)
        else:
            for r in rows:
                seen[r] = cur[r]

    def _apply(self, r: int, old: NodeInfo | None, new: NodeInfo | None) -> None:
        old_live = old is not None and old.node is not None
        new_live = new is not None and new.node is not None
        if old_live and new_live and old.node is new.node:  # type: ignore[union-attr]
            op = old.pods  # type: ignore[union-attr]
            np_ = new.pods  # type: ignore[union-attr]
            if len(np_) >= len(op) and np_[: len(op)] == op:
                removed: Sequence[PodInfo] = ()
                added: Sequence[PodInfo] = np_[len(op):]
            else:
                old_ids = {id(p) for p in op}
                new_ids = {id(p) for p in np_}
                removed = [p for p in op if id(p) not in new_ids]
                added = [p for p in np_ if id(p) not in old_ids]
            node = new.node  # type: ignore[union-attr]
            for pi in removed:
                self._pod(r, pi.pod, -1, node)
            for pi in added:
                self._pod(r, pi.pod, 1, node)
            return
        if old_live:
            for pi in old.pods:  # type: ignore[union-attr]
                self._pod(r, pi.pod, -1, old.node)  # type: ignore[union-attr]
        if new_live:
            for pi in new.pods:  # type: ignore[union-attr]
                self._pod(r, pi.pod, 1, new.node)  # type: ignore[union-attr]

    def _pod(self, r: int, pod: Pod, c: int, node: Node | None) -> None:
        sig, anti, score = _pod_keys(pod)
        g = self.sigs.items.get(sig)
        if g is None:
            g = SigGroup(sig, pod.namespace, pod.labels)
            self.sigs.add(g)
        self._bump(self.sigs, g, r, c, node)
        for entries in (anti, score):
            for key, term, weight, sign in entries:
                tg = self.terms.items.get(key)
                if tg is None:
                    tg = TermGroup(key, term, weight, sign)
                    self.terms.add(tg)
                self._bump(self.terms, tg, r, c, node)

    @staticmethod
    def _bump(reg: Registry, g: Group, r: int, c: int, node: Node | None) -> None:
        n = g.rows.get(r, 0) + c
        if n:
            g.rows[r] = n
        else:
            g.rows.pop(r, None)
        g.total += c
        if g.dense and node is not None:
            labels = node.labels
            for k, arr in g.dense.items():
                v = labels.get(k)
                if v is None:
                    continue
                d = dom_of(k, v)
                if d >= len(arr):
                    arr = g.dense[k] = grow(arr, d + 1)
                arr[d] += c
        if g.total == 0:
            reg.kill(g)

    # ---- queries ---------------------------------------------------------------------------

    def add_group(self, acc: dict[str, np.ndarray], g: Group, key: str, mult: int = 1) -> bool:
        """Add the group's per-domain counts for topology ``key`` (times ``mult``) into ``acc``.
        True if any member is on a node that has the ``key`` label."""
        arr = g.dense.get(key)
        if arr is None and len(g.rows) >= DENSE_MIN_ROWS:
            arr = np.zeros(dom_size(key), dtype=np.int64)
            infos = self.src
            for r, c in g.rows.items():
                d = node_dom(infos[r].node, key)  # type: ignore[union-attr]
                if d:
                    if d >= len(arr):
                        arr = grow(arr, d + 1)
                    arr[d] += c
            g.dense[key] = arr
        if arr is not None:
            if not arr.any():
                return False
            add_into(acc, key, arr, mult)
            return True
        touched = False
        infos = self.src
        cur = acc.get(key)
        for r, c in g.rows.items():
            node = infos[r].node  # type: ignore[union-attr]
            v = node.labels.get(key) if node is not None else None
            if v is None:
                continue
            d = dom_of(key, v)
            if cur is None or d >= len(cur):
                cur = acc[key] = grow(cur if cur is not None else np.zeros(0, dtype=np.int64),
                                      max(dom_size(key), d + 1))
            cur[d] += c * mult
            touched = True
        return touched

    def matching(self, reg: Registry, memo_key: Any, pred: Callable[[Any], bool]) -> list[Any]:
        """Live groups of ``reg`` for which ``pred`` holds; ``pred`` must depend only on the
        group and on what ``memo_key`` identifies."""
        k = (id(reg), memo_key)
        m = self._memos.get(k)
        if m is None or m.epoch != reg.epoch:
            m = _Memo(reg.epoch)
            self._memos[k] = m
            if len(self._memos) > _MEMO_MAX:
                self._memos.popitem(last=False)
        else:
            self._memos.move_to_end(k)
        log = reg.log
        if m.pos < len(log):
            for g in log[m.pos:]:
                if g.alive and pred(g):
                    m.matched.append(g)
            m.pos = len(log)
        matched = m.matched
        for g in matched:
            if not g.alive:
                matched = m.matched = [x for x in matched if x.alive]
                break
        return matched

    def term_groups(self, kinds: Iterable[str]) -> list[TermGroup]:
        ks = set(kinds)
        return [g for g in self.terms.items.values() if g.key[0] in ks]  # type: ignore[misc]
