"""The cluster-wide pod index behind InterPodAffinity.

Upstream's PreFilter and PreScore walk every pod on every node once per scheduling cycle. Here
the walk is replaced by an index over the snapshot's NodeInfos that is brought up to date at the
start of each cycle by looking only at the rows whose NodeInfo changed (the cache replaces a
snapshot NodeInfo, and bumps its generation, whenever its node or pods change; the snapshot
names those rows, ``Snapshot.changed_rows_since``), so the per-cycle work is proportional to
what changed, not to the size of the cluster.

The index groups what matters to the plugin:

* existing pods by *label signature* (namespace + labels): the incoming pod's terms are matched
  once per signature instead of once per pod;
* existing pods' terms that act on the incoming pod (required anti-affinity for Filter; required
  affinity, preferred affinity and preferred anti-affinity for Score) by term identity: each
  distinct term is matched once against the incoming pod.

A *query* (an incoming term, or an incoming pod against existing terms) is memoized: which groups
match it (only groups created since the last use are evaluated), and per topology key an
*aggregate*: the weighted member count of the matching groups per topology value. Aggregates
subscribe to their groups and are updated in O(1) whenever a member is added or removed, so a
query that was answered before costs O(1) no matter how many pods or groups match it.

Topology values are interned per topology key into small integers (0 means "the node has no
such label"), shared with the vectorized Filter/Score through ``Snapshot.row_values``.

Fast paths, each behind a module flag with its reference kept: ``ADD_INTO_COPY`` (a key's first
score term is a weighted copy), ``QUERY_TOKENS`` (memoized queries found by a token, by the key
object's identity first) and ``TERM_GROUPS_BY_ID`` (an existing pod's term groups found by the
identity of its cached term keys): those two spare hashing label selectors' ``Requirement``s
in Python on every lookup; ``FUSED_ADDS`` (a pod added to a row counted in one call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ksched.api.affinity import PodAffinityTerm
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.template import known_template_cache, labels_frozenset
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = [
    "KIND_ANTI",
    "KIND_HARD",
    "KIND_PREF",
    "KIND_PREF_ANTI",
    "Aggregate",
    "Index",
    "add_into",
    "dom_of",
    "dom_size",
    "domain_rows",
    "gather",
    "grow",
    "lookup_dom",
    "pod_keys",
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


# add_into's first array for a key, when ``arr`` already covers every interned domain, is
# ``arr * mult`` (or a copy of ``arr``), not an array of zeros added to; False: the zeros (the
# reference, tests/scheduler/plugins/interpodaffinity/test_interpodaffinity_fewer_arrays.py).
ADD_INTO_COPY = True


def add_into(acc: dict[str, np.ndarray], key: str, arr: np.ndarray, mult: int = 1) -> None:
    """``acc[key] += mult * arr`` (creating or growing ``acc[key]``, never aliasing ``arr``)."""
    cur = acc.get(key)
    if cur is None and ADD_INTO_COPY and arr.dtype == np.int64 and len(arr) >= dom_size(key):
        acc[key] = arr.copy() if mult == 1 else arr * mult
        return
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
# Groups, aggregates, registries

# Kinds of existing-pod terms that act on the incoming pod.
KIND_ANTI = "anti"          # required anti-affinity (Filter, symmetry)
KIND_HARD = "hard"          # required affinity (Score, hardPodAffinityWeight)
KIND_PREF = "pref"          # preferred affinity (Score, +weight)
KIND_PREF_ANTI = "prefanti"  # preferred anti-affinity (Score, -weight)


class Aggregate:
    """For one query and topology key: ``arr[domain]`` = sum over matching groups of weight x
    members on nodes of that domain; ``n`` = members counted (on nodes that have the key)."""

    __slots__ = ("arr", "dead", "key", "n")

    def __init__(self, key: str) -> None:
        self.key = key
        self.arr = np.zeros(dom_size(key), dtype=np.int64)
        self.n = 0
        self.dead = False

    def bump(self, node: Node | None, c: int, w: int) -> None:
        if node is None:
            return
        v = node.labels.get(self.key)
        if v is None:
            return
        d = dom_of(self.key, v)
        arr = self.arr
        if d >= len(arr):
            arr = self.arr = grow(arr, max(d + 1, dom_size(self.key)))
        arr[d] += c * w
        self.n += c


class Group:
    """Members of one kind (a label signature, or a term) and the rows they are on."""

    __slots__ = ("alive", "key", "rows", "subs", "total")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.alive = True
        self.rows: dict[int, int] = {}
        self.subs: list[tuple[Aggregate, int]] = []
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

    __slots__ = ("kind", "sign", "term", "weight")

    def __init__(self, key: Any, kind: str, term: PodAffinityTerm, weight: int, sign: int) -> None:
        super().__init__(key)
        self.kind = kind
        self.term = term
        self.weight = weight
        self.sign = sign


# The creation log is compacted (and every query re-evaluated) once it holds this many more
# entries than twice the live groups.
_LOG_SLACK = 256


class Registry:
    """Live groups by key, plus a creation log that lets queries evaluate only new groups."""

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
        g.subs = []
        if self.items.get(g.key) is g:
            del self.items[g.key]
        if len(self.log) > 2 * len(self.items) + _LOG_SLACK:
            self.log = list(self.items.values())
            self.epoch += 1


# weight(group, topology key): the group's weight in that key's aggregate, None if not in it.
WeightFn = Callable[[Any, str], "int | None"]


class Query:
    """A memoized query: the live groups matching it and its aggregates by topology key."""

    __slots__ = ("aggs", "epoch", "keys", "matched", "pos", "pred", "weight")

    def __init__(self, epoch: int, pred: Callable[[Any], bool], weight: WeightFn) -> None:
        self.epoch = epoch
        self.pos = 0
        self.pred = pred
        self.weight = weight
        self.matched: list[Group] = []
        self.aggs: dict[str, Aggregate] = {}
        # Topology keys of matching term groups (term queries).
        self.keys: set[str] = set()

    def close(self) -> None:
        for a in self.aggs.values():
            a.dead = True
        for g in self.matched:
            if g.subs:
                g.subs = [s for s in g.subs if not s[0].dead]
        self.aggs = {}


_QUERY_MAX = 256

# Queries found by a small integer token per query key instead of by the key itself: a key is a
# tuple holding label selectors' ``Requirement`` objects, whose hash is worked out in Python on
# every lookup (and the memo's LRU move hashes it again). With the flag the token is found by the
# identity of the caller's key object first (the plugin keeps its resolved terms, and so their
# keys, per pod template), else by the key's value (one hash), and the memo is keyed by
# (registry, token); False: keyed by (registry, key), every lookup hashing the key (the
# reference, tests/scheduler/plugins/interpodaffinity/test_interpodaffinity_query_tokens.py).
# Which query answers a key, and so every answer, is the same either way.
QUERY_TOKENS = True
# An existing pod's term groups found by the identity of the term entry's key (``pod_keys`` keeps
# the entries per pod template) while the group found last for it is alive (a live group is the
# registry's one for its key), instead of by the key, whose hash holds its label selector's
# ``Requirement``s, hashed in Python; False: by the key (the reference, the same test module).
TERM_GROUPS_BY_ID = True
_TERM_GROUPS_BY_ID_MAX = 4096
# A pod added to a row under the same node (a cycle's assumed pod: nearly every change) counted
# in one call: its groups' rows and totals moved and their subscribed aggregates bumped inline
# (the domain looked up in the interned table directly), instead of ``_pod``, ``_bump`` and
# ``Aggregate.bump`` per group (a pod's addition never kills a group). False: ``_pod`` for every
# pod (the reference, the same test module). The same counts either way.
FUSED_ADDS = True
# Bounds of the token maps: past them a map is emptied (a key then gets a new token and a new
# query, answered from the groups as a first query is).
_TOKENS_BY_ID_MAX = 1024
_TOKENS_MAX = 4096


def weight_one(g: Any, key: str) -> int | None:
    return 1


def weight_own_key(g: Any, key: str) -> int | None:
    return 1 if g.term.topology_key == key else None


def pod_keys(pod: Pod) -> tuple[Any, list[tuple[Any, str, PodAffinityTerm, int, int]]]:
    """(label signature key, term entries), cached on the pod's template when it has been
    through a scheduling cycle (``known_template_cache``), else on the pod object. A term entry
    is (group key, kind, term, weight, sign)."""
    c = known_template_cache(pod)
    hit = c.get("InterPodAffinity.keys")
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    sig = (pod.namespace, labels_frozenset(pod))
    terms: list[tuple[Any, str, PodAffinityTerm, int, int]] = []
    aff = pod.affinity
    if aff is not None:
        for t in aff.pod_anti_affinity_required:
            terms.append(((KIND_ANTI, t.key()), KIND_ANTI, t, 0, 0))
        for t in aff.pod_affinity_required:
            terms.append(((KIND_HARD, t.key()), KIND_HARD, t, 0, 1))
        for wt in aff.pod_affinity_preferred:
            terms.append(((KIND_PREF, wt.term.key(), wt.weight), KIND_PREF, wt.term, wt.weight, 1))
        for wt in aff.pod_anti_affinity_preferred:
            terms.append(((KIND_PREF_ANTI, wt.term.key(), wt.weight), KIND_PREF_ANTI, wt.term, wt.weight, -1))
    out = (sig, terms)
    c["InterPodAffinity.keys"] = out
    return out


def _changed_rows(a: list[Any], b: list[Any]) -> list[int]:
    """Rows whose entries differ by identity. Slices are compared in C (identity first), in
    chunks of 512 and then 32, so a few changed rows among thousands cost tens of microseconds."""
    m = min(len(a), len(b))
    out: list[int] = []
    for lo in range(0, m, 512):
        hi = min(lo + 512, m)
        if a[lo:hi] == b[lo:hi]:
            continue
        for lo2 in range(lo, hi, 32):
            hi2 = min(lo2 + 32, hi)
            if a[lo2:hi2] != b[lo2:hi2]:
                out.extend(r for r in range(lo2, hi2) if a[r] is not b[r])
    out.extend(range(m, max(len(a), len(b))))
    return out


class Index:
    """The groups of one snapshot's NodeInfo list (``Snapshot.infos``), kept in sync by ``sync``."""

    def __init__(self, infos: list[NodeInfo | None], snapshot: Any = None) -> None:
        self.src = infos
        # The snapshot owning ``infos``, if known: its per-row generations (``gen_array``) then
        # point at the changed rows directly.
        self.snapshot = snapshot
        self.seen_generation = 0
        self.seen: list[NodeInfo | None] = []
        self.sigs = Registry()
        self.terms = Registry()
        self._queries: OrderedDict[Any, Query] = OrderedDict()
        # QUERY_TOKENS: id(key object) -> (that object, its token); key -> token.
        self._tokens_by_id: dict[int, tuple[Any, int]] = {}
        self._tokens: dict[Any, int] = {}
        self._next_token = 0
        # TERM_GROUPS_BY_ID: id(term group key) -> (that key, its group when last found).
        self._term_groups: dict[int, tuple[Any, Group]] = {}

    # ---- maintenance -----------------------------------------------------------------------

    def sync(self) -> None:
        cur = self.src
        seen = self.seen
        snap = self.snapshot
        if snap is not None and snap.infos is cur and len(seen) == len(cur) and self.seen_generation > 0:
            # The snapshot records which rows it changed (every changed row gets a generation
            # past the one it had): O(changed rows), not a comparison of every row.
            if snap.generation != self.seen_generation:
                self._update(snap.changed_rows_since(self.seen_generation).tolist())
                self.seen_generation = snap.generation
            return
        if len(cur) == len(seen) and cur == seen:
            return
        gen_array = getattr(snap, "gen_array", None)
        if gen_array is not None and len(seen) == len(cur) == len(gen_array) and snap.infos is cur:
            # Rows changed at the generation seen last were handled then (their NodeInfo is
            # unchanged since); ">=" also catches a row freed without a new generation.
            self._update(np.flatnonzero(gen_array >= self.seen_generation).tolist())
            if cur == seen:
                self.seen_generation = snap.generation
                return
        self._update(_changed_rows(seen, cur))
        if snap is not None:
            self.seen_generation = snap.generation

    def _update(self, rows: list[int]) -> None:
        cur = self.src
        seen = self.seen
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
            if FUSED_ADDS:
                for pi in added:
                    self._pod_added(r, pi.pod, node)
            else:
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
        sig, terms = pod_keys(pod)
        g = self.sigs.items.get(sig)
        if g is None:
            g = SigGroup(sig, pod.namespace, pod.labels)
            self.sigs.add(g)
        self._bump(self.sigs, g, r, c, node)
        for key, kind, term, weight, sign in terms:
            if TERM_GROUPS_BY_ID:
                hit = self._term_groups.get(id(key))
                if hit is not None and hit[0] is key and hit[1].alive:
                    self._bump(self.terms, hit[1], r, c, node)
                    continue
            tg = self.terms.items.get(key)
            if tg is None:
                tg = TermGroup(key, kind, term, weight, sign)
                self.terms.add(tg)
            if TERM_GROUPS_BY_ID:
                if len(self._term_groups) >= _TERM_GROUPS_BY_ID_MAX:
                    self._term_groups.clear()
                self._term_groups[id(key)] = (key, tg)
            self._bump(self.terms, tg, r, c, node)

    def _pod_added(self, r: int, pod: Pod, node: Node) -> None:
        """``_pod(r, pod, 1, node)`` in one call (FUSED_ADDS)."""
        sig, terms = pod_keys(pod)
        g: Group | None = self.sigs.items.get(sig)
        if g is None:
            g = SigGroup(sig, pod.namespace, pod.labels)
            self.sigs.add(g)
        groups = [g]
        for key, kind, term, weight, sign in terms:
            hit = self._term_groups.get(id(key)) if TERM_GROUPS_BY_ID else None
            if hit is not None and hit[0] is key and hit[1].alive:
                groups.append(hit[1])
                continue
            tg = self.terms.items.get(key)
            if tg is None:
                tg = TermGroup(key, kind, term, weight, sign)
                self.terms.add(tg)
            if TERM_GROUPS_BY_ID:
                if len(self._term_groups) >= _TERM_GROUPS_BY_ID_MAX:
                    self._term_groups.clear()
                self._term_groups[id(key)] = (key, tg)
            groups.append(tg)
        labels = node.labels
        for g in groups:
            rows = g.rows
            rows[r] = rows.get(r, 0) + 1
            g.total += 1
            if not g.subs:
                continue
            dead = False
            for agg, w in g.subs:
                if agg.dead:
                    dead = True
                    continue
                k = agg.key
                v = labels.get(k)
                if v is None:
                    continue
                dm = _DOMAINS.get(k)
                d = dm.get(v) if dm is not None else None
                if d is None:
                    d = dom_of(k, v)
                arr = agg.arr
                if d >= len(arr):
                    arr = agg.arr = grow(arr, max(d + 1, dom_size(k)))
                arr[d] += w
                agg.n += 1
            if dead:
                g.subs = [x for x in g.subs if not x[0].dead]

    @staticmethod
    def _bump(reg: Registry, g: Group, r: int, c: int, node: Node | None) -> None:
        n = g.rows.get(r, 0) + c
        if n:
            g.rows[r] = n
        else:
            g.rows.pop(r, None)
        g.total += c
        if g.subs:
            dead = False
            for agg, w in g.subs:
                if agg.dead:
                    dead = True
                else:
                    agg.bump(node, c, w)
            if dead:
                g.subs = [s for s in g.subs if not s[0].dead]
        if g.total == 0:
            reg.kill(g)

    # ---- queries ---------------------------------------------------------------------------

    def query(self, reg: Registry, key: Any, pred: Callable[[Any], bool], weight: WeightFn = weight_one) -> Query:
        """The memoized query ``key`` over ``reg``: ``pred`` selects groups and ``weight`` gives
        their weight per topology key; both must depend only on the group and on ``key``."""
        if QUERY_TOKENS:
            hit = self._tokens_by_id.get(id(key))
            if hit is not None and hit[0] is key:
                tok = hit[1]
            else:
                tokens = self._tokens
                got = tokens.get(key)
                if got is None:
                    if len(tokens) >= _TOKENS_MAX:
                        tokens.clear()
                        self._tokens_by_id.clear()
                    # Tokens are never reused: one made after a clear names no kept query.
                    got = tokens[key] = self._next_token
                    self._next_token += 1
                tok = got
                if len(self._tokens_by_id) >= _TOKENS_BY_ID_MAX:
                    self._tokens_by_id.clear()
                self._tokens_by_id[id(key)] = (key, tok)
            k: Any = (id(reg), tok)
        else:
            k = (id(reg), key)
        q = self._queries.get(k)
        if q is None or q.epoch != reg.epoch:
            if q is not None:
                q.close()
            q = Query(reg.epoch, pred, weight)
            self._queries[k] = q
            if len(self._queries) > _QUERY_MAX:
                self._queries.popitem(last=False)[1].close()
        else:
            self._queries.move_to_end(k)
        log = reg.log
        if q.pos < len(log):
            for g in log[q.pos:]:
                if g.alive and q.pred(g):
                    q.matched.append(g)
                    if isinstance(g, TermGroup):
                        q.keys.add(g.term.topology_key)
                    for agg_key, agg in q.aggs.items():
                        self._subscribe(agg, g, q.weight(g, agg_key))
            q.pos = len(log)
        for g in q.matched:
            if not g.alive:
                q.matched = [x for x in q.matched if x.alive]
                break
        return q

    def aggregate(self, q: Query, key: str) -> Aggregate:
        """The query's aggregate for topology ``key`` (kept up to date from now on)."""
        agg = q.aggs.get(key)
        if agg is None:
            agg = q.aggs[key] = Aggregate(key)
            for g in q.matched:
                self._subscribe(agg, g, q.weight(g, key))
        return agg

    def _subscribe(self, agg: Aggregate, g: Group, w: int | None) -> None:
        if w is None or not g.alive:
            return
        g.subs.append((agg, w))
        infos = self.src
        for r, c in g.rows.items():
            ni = infos[r]
            agg.bump(ni.node if ni is not None else None, c, w)
