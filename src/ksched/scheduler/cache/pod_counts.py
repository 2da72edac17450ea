"""Matching-pod counts per snapshot row for (namespace, label selector), kept up to date as pods
are added to, removed from and updated on the snapshot's nodes. No upstream file: upstream's
PodTopologySpread (``calPreFilterState``, ``initPreScoreState``) walks every pod of every
considered node each cycle; here a selector's counts are built once, when it is first asked
for, and then moved by the pods that change.

How it stays current. The index belongs to one ``Snapshot`` and catches up lazily, when asked,
from the rows whose NodeInfo changed since it last looked (``Snapshot.changed_rows_since``; a
row's old and new NodeInfo are compared pod by pod, by identity: a pod added, removed, or
updated — labels, deletion — is one removal and/or one addition). Pods are grouped by *label
signature* (namespace, labels, terminating or not); each signature knows the rows its pods are on
and which selectors match it, so a pod that changes costs one dict update plus one array update
per matching selector, and a new selector is counted from the signatures (matched once each),
not from the pods.

Semantics of a count: pods on the row's NodeInfo in the namespace, matched by the selector;
terminating pods (``deletion_timestamp`` set) only when the selector was asked for with
``terminating=True``. An empty selector matches every pod, a
``LabelSelector.nothing()`` none (callers with other rules, such as PodTopologySpread's "an empty
selector counts nothing", apply them before asking).

Memory is bounded: at most ``MAX_SELECTORS`` selectors are kept (least recently asked for is
dropped first), and a selector not asked for during ``IDLE_SYNCS`` catch-ups is dropped too.
Signatures without pods are dropped at once.

Finding a selector (``PLAIN_SELECTOR_LOOKUPS``): the kept selectors are keyed by (namespace,
``LabelSelector.key``, terminating), whose hash is worked out again on every lookup, in Python
for each ``Requirement``; and iterating the ordered dict of them hashes every key again. With the
flag, ``counts`` finds the selector by the identity of the asker's key tuple first (the plugins
keep their parsed selectors per template), moves it to the recent end only when it is not there
already, and a new signature is matched against its namespace's selectors from a plain dict.
False: the reference (every lookup by key, every kept selector visited for a new signature).
The kept selectors, their order and every count are the same either way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ksched.api.labels import LabelSelector, compile_matcher
from ksched.api.pod import Pod
from ksched.scheduler.framework.template import labels_frozenset
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["PodCountIndex", "RowSource"]

_SIG_KEY = "podcounts.sig"

PLAIN_SELECTOR_LOOKUPS = True

class RowSource(Protocol):
    """What the index reads of its snapshot."""

    infos: list[NodeInfo | None]
    generation: int

    def changed_rows_since(self, generation: int) -> np.ndarray: ...


class _Signature:
    """Pods with one namespace, one label set and one terminating state: the rows they are on
    (row -> pods there) and the selectors that match them."""

    __slots__ = ("labels", "namespace", "rows", "selectors", "terminating", "total")

    def __init__(self, namespace: str, labels: Mapping[str, str], terminating: bool) -> None:
        self.namespace = namespace
        self.labels = labels
        self.terminating = terminating
        self.rows: dict[int, int] = {}
        self.selectors: list[_SelectorCounts] = []
        self.total = 0


class _SelectorCounts:
    """Matching pods per row for one (namespace, selector, terminating)."""

    __slots__ = ("alive", "counts", "key", "last_used", "match", "memo_keys", "namespace", "terminating")

    def __init__(self, key: tuple[Any, ...], namespace: str, selector: LabelSelector, terminating: bool,
                 n: int) -> None:
        self.key = key
        self.namespace = namespace
        self.terminating = terminating
        self.match = compile_matcher(selector)
        self.counts = np.zeros(n, dtype=np.int64)
        self.last_used = 0
        self.alive = True
        self.memo_keys: list[tuple[str, int, bool]] = []  # its entries in PodCountIndex._by_id

    def wants(self, sig: _Signature) -> bool:
        return (self.terminating or not sig.terminating) and self.match(sig.labels)


class PodCountIndex:
    """Per (namespace, selector): matching pods by snapshot row. See the module docstring."""

    MAX_SELECTORS = 512
    IDLE_SYNCS = 20_000

    def __init__(self, snapshot: RowSource) -> None:
        self._snapshot = snapshot
        self._infos: list[NodeInfo | None] | None = None  # the list object last synced from
        self._seen: list[NodeInfo | None] = []
        self._seen_generation = -1
        self._syncs = 0
        # namespace -> signature key -> signature
        self._sigs: dict[str, dict[Any, _Signature]] = {}
        self._selectors: OrderedDict[tuple[Any, ...], _SelectorCounts] = OrderedDict()
        # PLAIN_SELECTOR_LOOKUPS: the kept selectors per namespace (by id), the selector last
        # moved to (or added at) the recent end of ``_selectors``, and (namespace, id of the
        # asker's key tuple, terminating) -> (that tuple, its selector).
        self._by_ns: dict[str, dict[int, _SelectorCounts]] = {}
        self._tail: _SelectorCounts | None = None
        self._by_id: dict[tuple[str, int, bool], tuple[Any, _SelectorCounts]] = {}

    # ---------------------------------------------------------------- queries

    def counts(self, namespace: str, selector: LabelSelector, terminating: bool = False) -> np.ndarray:
        """Matching pods by row (length ``len(snapshot.infos)``): read-only, valid until the
        snapshot next changes."""
        self.sync()
        if PLAIN_SELECTOR_LOOKUPS:
            sk = selector.key
            mk = (namespace, id(sk), terminating)
            hit = self._by_id.get(mk)
            if hit is not None and hit[0] is sk and hit[1].alive:
                e = hit[1]
                if e is not self._tail:
                    self._selectors.move_to_end(e.key)
                    self._tail = e
                e.last_used = self._syncs
                return e.counts[: len(self._seen)]
        key = (namespace, selector.key, terminating)
        e = self._selectors.get(key)
        if e is None:
            e = self._add_selector(key, namespace, selector, terminating)
        else:
            self._selectors.move_to_end(key)
        self._tail = e
        if PLAIN_SELECTOR_LOOKUPS:
            if len(self._by_id) >= 4 * self.MAX_SELECTORS:
                self._by_id.clear()
                for kept in self._selectors.values():
                    kept.memo_keys = []
            self._by_id[mk] = (sk, e)
            e.memo_keys.append(mk)
        e.last_used = self._syncs
        return e.counts[: len(self._seen)]

    def __len__(self) -> int:
        """Selectors currently kept."""
        return len(self._selectors)

    def signatures(self) -> int:
        """Label signatures currently kept (each has at least one pod)."""
        return sum(len(d) for d in self._sigs.values())

    # ---------------------------------------------------------------- maintenance

    def sync(self) -> None:
        """Catch up with the snapshot's pods."""
        snap = self._snapshot
        infos = snap.infos
        if infos is self._infos and snap.generation == self._seen_generation and len(infos) == len(self._seen):
            return
        self._syncs += 1
        seen = self._seen
        if infos is not self._infos or self._seen_generation < 0:
            rows: list[int] = list(range(max(len(infos), len(seen))))
        else:
            rows = snap.changed_rows_since(self._seen_generation).tolist()
            rows.extend(range(len(seen), len(infos)))
        if len(infos) > len(seen):
            seen.extend([None] * (len(infos) - len(seen)))
            self._fit(len(infos))
        for r in rows:
            new = infos[r] if r < len(infos) else None
            old = seen[r]
            if old is not new:
                self._apply(r, old, new)
                seen[r] = new
        if len(seen) > len(infos):
            del seen[len(infos):]
        self._infos = infos
        self._seen_generation = snap.generation
        if self._syncs % 1024 == 0:
            self._drop_idle()

    def _fit(self, n: int) -> None:
        for e in self._selectors.values():
            if len(e.counts) < n:
                grown = np.zeros(max(n, 2 * len(e.counts)), dtype=np.int64)
                grown[: len(e.counts)] = e.counts
                e.counts = grown

    def _apply(self, r: int, old: NodeInfo | None, new: NodeInfo | None) -> None:
        op = old.pods if old is not None else []
        np_ = new.pods if new is not None else []
        if len(np_) >= len(op) and np_[: len(op)] == op:
            removed: list[PodInfo] = []
            added = np_[len(op):]
        else:
            old_ids = {id(p) for p in op}
            new_ids = {id(p) for p in np_}
            removed = [p for p in op if id(p) not in new_ids]
            added = [p for p in np_ if id(p) not in old_ids]
        for pi in removed:
            self._pod(r, pi.pod, -1)
        for pi in added:
            self._pod(r, pi.pod, 1)

    def _pod(self, r: int, pod: Pod, delta: int) -> None:
        c = pod.cached()
        key = c.get(_SIG_KEY)
        if key is None:
            key = c[_SIG_KEY] = (labels_frozenset(pod), pod.deletion_timestamp is not None)
        ns = pod.namespace
        sigs = self._sigs.get(ns)
        if sigs is None:
            sigs = self._sigs[ns] = {}
        sig = sigs.get(key)
        if sig is None:
            sig = sigs[key] = _Signature(ns, pod.labels, key[1])
            kept = (self._by_ns.get(ns) or {}).values() if PLAIN_SELECTOR_LOOKUPS else self._selectors.values()
            for e in kept:
                if e.namespace == ns and e.wants(sig):
                    sig.selectors.append(e)
        n = sig.rows.get(r, 0) + delta
        if n:
            sig.rows[r] = n
        else:
            del sig.rows[r]
        sig.total += delta
        for e in sig.selectors:
            e.counts[r] += delta
        if sig.total == 0:
            del sigs[key]
            if not sigs:
                del self._sigs[ns]

    def _add_selector(self, key: tuple[Any, ...], namespace: str, selector: LabelSelector,
                      terminating: bool) -> _SelectorCounts:
        e = _SelectorCounts(key, namespace, selector, terminating, len(self._seen))
        counts = e.counts
        for sig in (self._sigs.get(namespace) or {}).values():
            if e.wants(sig):
                sig.selectors.append(e)
                for r, c in sig.rows.items():
                    counts[r] += c
        self._selectors[key] = e
        self._tail = e
        self._by_ns.setdefault(namespace, {})[id(e)] = e
        while len(self._selectors) > self.MAX_SELECTORS:
            self._drop(next(iter(self._selectors.values())))
        return e

    def _drop(self, e: _SelectorCounts) -> None:
        del self._selectors[e.key]
        e.alive = False
        for mk in e.memo_keys:  # a dropped selector (and its counts array) is not kept by the memo
            hit = self._by_id.get(mk)
            if hit is not None and hit[1] is e:
                del self._by_id[mk]
        e.memo_keys = []
        if self._tail is e:
            self._tail = None
        ns_kept = self._by_ns.get(e.namespace)
        if ns_kept is not None:
            ns_kept.pop(id(e), None)
            if not ns_kept:
                del self._by_ns[e.namespace]
        for sig in (self._sigs.get(e.namespace) or {}).values():
            if e in sig.selectors:
                sig.selectors.remove(e)

    def _drop_idle(self) -> None:
        horizon = self._syncs - self.IDLE_SYNCS
        for e in [e for e in self._selectors.values() if e.last_used < horizon]:
            self._drop(e)
