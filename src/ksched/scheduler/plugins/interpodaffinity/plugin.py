"""InterPodAffinity: required and preferred inter-pod affinity and anti-affinity.

Follows upstream kube-scheduler v1.36 (``pkg/scheduler/framework/plugins/interpodaffinity``:
``filtering.go``, ``scoring.go``, ``plugin.go``):

* PreFilter computes, per topology pair, the number of existing pods whose required
  anti-affinity matches the incoming pod ("existing anti-affinity", the symmetry rule), the
  number of existing pods matching *all* of the incoming pod's required affinity terms (once per
  term), and the number matching each of its required anti-affinity terms. It returns Skip when
  the first count is empty and the pod has no required terms of its own.
* Filter reads those counts: affinity (UnschedulableAndUnresolvable, with the "first pod of a
  group" exception), then anti-affinity (Unschedulable), then existing pods' anti-affinity
  (Unschedulable).
* PreScore sums, per topology pair, the incoming pod's preferred terms matched by existing pods
  (+/- weight) and existing pods' terms matched by the incoming pod (required affinity with
  ``hardPodAffinityWeight``, preferred affinity +weight, preferred anti-affinity -weight). Score is
  the node's sum over its topology pairs; NormalizeScore maps min..max to 0..100.

Counts are kept as one NumPy array per topology key, indexed by interned topology values (see
``_index``), so Filter and Score run vectorized over node rows and PreFilter/PreScore read an
incrementally maintained index instead of walking every pod of the cluster. PreScore for a pod
without preferred terms of its own (only the existing pods' terms count) is kept per namespace,
labels and namespace labels and given again while no pod with terms moved
(``KEPT_EXISTING_SCORE``, ``Snapshot.affinity_changes``). Score and NormalizeScore make fewer
arrays (``FEWER_SCORE_ARRAYS``: the first key's gather is the result, the rescale in place; with
``_index.ADD_INTO_COPY`` PreScore's first term per key is a weighted copy). PreScore's resolved
preferred terms are kept per pod template (``TEMPLATE_TERMS``), so their query keys are found by
identity (``_index.QUERY_TOKENS``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.affinity import PodAffinityTerm
from ksched.api.labels import LabelSelector
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
    VectorizedScore,
)
from ksched.scheduler.framework.reduce import max_1d, min_1d
from ksched.scheduler.framework.signers import LABELS_SIGNER_NAME, labels_signer
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import known_template_cache
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.interpodaffinity._index import (
    KIND_ANTI,
    KIND_HARD,
    Index,
    Query,
    SigGroup,
    TermGroup,
    add_into,
    dom_of,
    dom_size,
    domain_rows,
    gather,
    grow,
    lookup_dom,
    pod_keys,
    weight_own_key,
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "InterPodAffinity",
]

NAME = "InterPodAffinity"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

MIN_HARD_POD_AFFINITY_WEIGHT = 0
# PreScore of a pod without preferred terms of its own answered again from the last answer for
# its namespace and labels while no pod with terms moved (``Snapshot.affinity_changes``), without
# bringing the index up to date; False: the index caught up and queried every cycle (the reference,
# tests/scheduler/plugins/interpodaffinity/test_interpodaffinity_kept_score.py).
KEPT_EXISTING_SCORE = True
# Score and NormalizeScore with fewer arrays (a node's score is a sum of per-domain gathers, then
# a min-max rescale): Score gathers the first topology key's scores as its result (no zero array
# added to) and skips the past-the-end check of a gather when the per-domain array covers every
# interned domain; NormalizeScore rescales in place (the same float64 quotients and products,
# the same truncation), and PreScore's first term for a key takes a weighted copy of the
# aggregate (``_index.ADD_INTO_COPY``). False: an array of zeros added to, every gather checked,
# a new array per step (the reference, tests/scheduler/plugins/interpodaffinity/
# test_interpodaffinity_fewer_arrays.py).
FEWER_SCORE_ARRAYS = True
# PreScore's resolved preferred terms (namespaces merged, ``_Term``) kept on the pod's template
# (``known_template_cache``) when no term has a namespaceSelector that names namespaces (the
# only part that depends on more than the pod's spec: the Namespace objects): the pods of one
# template then share the terms and their query keys, which ``_index.QUERY_TOKENS`` finds by
# identity. False: every term resolved again every cycle (the reference,
# tests/scheduler/plugins/interpodaffinity/test_interpodaffinity_query_tokens.py).
TEMPLATE_TERMS = True
_TEMPLATE_TERMS_KEY = "InterPodAffinity.preferred"
_EXISTING_MEMO_MAX = 1024
MAX_HARD_POD_AFFINITY_WEIGHT = 100

_EMPTY: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------
# Terms


class _Term:
    """An incoming pod's term with its namespaceSelector merged into the namespaces (upstream's
    mergeAffinityTermNamespacesIfNotEmpty): ``namespaces`` None means every namespace (an empty
    namespaceSelector)."""

    __slots__ = ("key", "memo_key", "namespaces", "selector", "weight")

    def __init__(self, topology_key: str, selector: LabelSelector, namespaces: frozenset[str] | None,
                 weight: int = 0) -> None:
        self.key = topology_key
        self.selector = selector
        self.namespaces = namespaces
        self.weight = weight
        self.memo_key = ("incoming", selector.key, namespaces)

    def matches(self, pod: Pod) -> bool:
        ns = self.namespaces
        return (ns is None or pod.namespace in ns) and self.selector.matches(pod.labels)

    def matches_sig(self, g: SigGroup) -> bool:
        ns = self.namespaces
        return (ns is None or g.namespace in ns) and self.selector.matches(g.labels)


def _existing_term_matches(t: PodAffinityTerm, pod: Pod, ns_labels: dict[str, str]) -> bool:
    """An existing pod's term against the incoming pod (AffinityTerm.Matches with the incoming
    pod's namespace labels)."""
    return t.matches_namespace(pod.namespace, ns_labels) and t.label_selector.matches(pod.labels)


def _raw_matches_all(terms: tuple[PodAffinityTerm, ...], pod: Pod) -> bool:
    """podMatchesAllAffinityTerms on unmerged terms with nil namespace labels (queueing hints)."""
    if not terms:
        return False
    for t in terms:
        if not (t.matches_namespace(pod.namespace, _EMPTY) and t.label_selector.matches(pod.labels)):
            return False
    return True


def _count(counts: dict[str, np.ndarray], key: str, value: str) -> int:
    arr = counts.get(key)
    if arr is None:
        return 0
    i = lookup_dom(key, value)
    return int(arr[i]) if 0 < i < len(arr) else 0


def _bump(counts: dict[str, np.ndarray], node: Node, key: str, m: int) -> None:
    v = node.labels.get(key)
    if v is None:
        return
    d = dom_of(key, v)
    arr = counts.get(key)
    if arr is None:
        arr = np.zeros(max(dom_size(key), d + 1), dtype=np.int64)
    elif d >= len(arr):
        arr = grow(arr, max(dom_size(key), d + 1))
    counts[key] = arr
    arr[d] += m


def _nonzero(counts: dict[str, np.ndarray]) -> bool:
    for a in counts.values():
        if a.any():
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Cycle state


class _PreFilterState(StateData):
    """Topology-pair counts (one array per topology key, by interned value) for Filter."""

    __slots__ = ("aff", "aff_nonempty", "aff_terms", "anti", "anti_terms", "existing", "ns_labels", "pod",
                 "self_match")

    def __init__(self, pod: Pod, ns_labels: dict[str, str], aff_terms: list[_Term], anti_terms: list[_Term],
                 existing: dict[str, np.ndarray], aff: dict[str, np.ndarray], anti: dict[str, np.ndarray],
                 self_match: bool) -> None:
        self.pod = pod
        self.ns_labels = ns_labels
        self.aff_terms = aff_terms
        self.anti_terms = anti_terms
        # existing pods' required anti-affinity terms matching the incoming pod
        self.existing = existing
        # existing pods matching all of the incoming pod's required affinity terms (+1 per term)
        self.aff = aff
        # existing pods matching each of the incoming pod's required anti-affinity terms
        self.anti = anti
        self.self_match = self_match
        self.aff_nonempty = _nonzero(aff)

    def clone(self) -> _PreFilterState:
        c = _PreFilterState.__new__(_PreFilterState)
        c.pod = self.pod
        c.ns_labels = self.ns_labels
        c.aff_terms = self.aff_terms
        c.anti_terms = self.anti_terms
        c.existing = {k: a.copy() for k, a in self.existing.items()}
        c.aff = {k: a.copy() for k, a in self.aff.items()}
        c.anti = {k: a.copy() for k, a in self.anti.items()}
        c.self_match = self.self_match
        c.aff_nonempty = self.aff_nonempty
        return c

    def update_with_pod(self, pi: PodInfo, node: Node | None, m: int) -> None:
        """A pod was added to (m=1) or removed from (m=-1) ``node`` (upstream's updateWithPod)."""
        if node is None:
            return
        pod = self.pod
        for t in pi.required_anti_affinity_terms:
            if _existing_term_matches(t, pod, self.ns_labels):
                _bump(self.existing, node, t.topology_key, m)
        other = pi.pod
        if self.aff_terms and all(t.matches(other) for t in self.aff_terms):
            for t in self.aff_terms:
                _bump(self.aff, node, t.key, m)
            self.aff_nonempty = _nonzero(self.aff)
        for t in self.anti_terms:
            if t.matches(other):
                _bump(self.anti, node, t.key, m)


class _PreScoreState(StateData):
    """Per topology key, the score of every topology value (upstream's topologyScore)."""

    __slots__ = ("score",)

    def __init__(self, score: dict[str, np.ndarray]) -> None:
        self.score = score

    def clone(self) -> _PreScoreState:
        return self


# ---------------------------------------------------------------------------------------------
# The plugin


class InterPodAffinity(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin,
        EnqueueExtensions, VectorizedFilter, VectorizedScore, ScoreExtensions, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        a = self.args
        w = a.get("hardPodAffinityWeight", 1)
        if isinstance(w, bool) or not isinstance(w, int) or not (
                MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT):
            raise ValueError(f"hardPodAffinityWeight: Invalid value: {w!r}: not in valid range "
                             f"[{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]")
        self.hard_pod_affinity_weight: int = w
        self.ignore_preferred_terms_of_existing_pods = bool(a.get("ignorePreferredTermsOfExistingPods", False))
        self._index: Index | None = None
        # PreScore of pods without preferred terms: (namespace, labels, namespace labels) ->
        # (the snapshot's rows, its affinity_changes, the state or None for Skip).
        self._existing_memo: dict[tuple[Any, ...], tuple[Any, int, _PreScoreState | None]] = {}
        self._ns_informer: Any = None
        # namespace -> (the informer's Namespace object, its labels, their frozenset or None)
        self._ns_memo: dict[str, tuple[Any, dict[str, str], frozenset[tuple[str, str]] | None]] = {}
        informers = getattr(handle, "informers", None) if handle is not None else None
        if informers is not None:
            self._ns_informer = informers.informer("Namespace")
        self._st_aff = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        self._st_anti = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        self._st_existing = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
                                   plugin=NAME)
        self._unsignable = Status(Code.UNSCHEDULABLE, "pods with pod affinity or anti-affinity are not signable")

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """A pod with pod affinity or anti-affinity of its own is not signable: its answers
        depend on where other pods are. Otherwise they depend on which existing pods' terms match
        it, by its labels (upstream's fragment) -- and by its namespace and that namespace's
        labels, which ksched's fragment holds too (upstream's omits them, and signs nothing at
        all with ignorePreferredTermsOfExistingPods, although existing pods' required
        anti-affinity still applies)."""
        aff = (pod.raw.get("spec") or {}).get("affinity") or {}
        if aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None:
            return None, self._unsignable
        ns_labels = self._namespace_labels(pod.namespace)
        value = (labels_signer(pod), pod.namespace, tuple(sorted(ns_labels.items())) if ns_labels else ())
        return [SignFragment(LABELS_SIGNER_NAME, value)], None

    # ---- helpers ---------------------------------------------------------------------------

    def _snapshot_of(self, infos: list[NodeInfo | None]) -> Any:
        """The handle's snapshot if ``infos`` is its row list, else None."""
        try:
            snap = self.handle.snapshot if self.handle is not None else None
        except (AttributeError, AssertionError):
            return None
        return snap if snap is not None and getattr(snap, "infos", None) is infos else None

    def index(self, infos: list[NodeInfo | None]) -> Index:
        """The pod index over ``infos`` (a snapshot's row list), brought up to date."""
        idx = self._index
        if idx is None or idx.src is not infos:
            idx = self._index = Index(infos, self._snapshot_of(infos))
        idx.sync()
        return idx

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        """GetNamespaceLabelsSnapshot: the namespace's labels, empty if it is not known."""
        return self._namespace_labels_and_key(namespace)[0]

    def _namespace_labels_and_key(self, namespace: str) -> tuple[dict[str, str], frozenset[tuple[str, str]] | None]:
        """The namespace's labels (shared: not to be modified) and their frozenset (None when
        there are none), made once per Namespace object the informer holds."""
        inf = self._ns_informer
        if inf is None:
            return _EMPTY, None
        ns = inf.get(namespace)
        if ns is None:
            return _EMPTY, None
        memo = self._ns_memo.get(namespace)
        if memo is not None and memo[0] is ns:
            return memo[1], memo[2]
        labels = dict(ns.labels)
        key = frozenset(labels.items()) if labels else None
        if len(self._ns_memo) >= 1024:
            self._ns_memo.clear()
        self._ns_memo[namespace] = (ns, labels, key)
        return labels, key

    def _resolve(self, t: PodAffinityTerm, weight: int = 0) -> _Term:
        sel = t.namespace_selector
        if sel is None:
            nss: frozenset[str] | None = t.namespaces
        elif sel.is_empty():
            nss = None
        else:
            found: set[str] = set()
            inf = self._ns_informer
            if inf is not None and not sel.is_nothing():
                for ns in inf.list():
                    if sel.matches(ns.labels):
                        found.add(ns.name)
            nss = t.namespaces | found if found else t.namespaces
        return _Term(t.topology_key, t.label_selector, nss, weight)

    def _preferred_terms(self, pod: Pod, pref: Any, pref_anti: Any) -> list[tuple[_Term, int]]:
        """The pod's preferred affinity then anti-affinity terms, resolved, with their signed
        weights (kept on the pod's template with ``TEMPLATE_TERMS`` when that is safe)."""
        c = known_template_cache(pod) if TEMPLATE_TERMS else None
        if c is not None:
            kept = c.get(_TEMPLATE_TERMS_KEY)
            if kept is not None:
                return kept  # type: ignore[no-any-return]
        out = [(self._resolve(wt.term, wt.weight), sign * wt.weight)
               for wts, sign in ((pref, 1), (pref_anti, -1)) for wt in wts]
        if c is not None and all(wt.term.namespace_selector is None or wt.term.namespace_selector.is_empty()
                                 for wts in (pref, pref_anti) for wt in wts):
            c[_TEMPLATE_TERMS_KEY] = out
        return out

    def _sig_query(self, idx: Index, t: _Term) -> Query:
        """Existing pods (by label signature) matching one incoming term."""
        return idx.query(idx.sigs, t.memo_key, t.matches_sig)

    # ---- PreFilter -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        aff = pod.affinity
        req_aff = aff.pod_affinity_required if aff is not None else ()
        req_anti = aff.pod_anti_affinity_required if aff is not None else ()
        if not req_aff and not req_anti:
            snap = self._snapshot_of(nodes.infos)
            if snap is not None and not snap.any_pods_with_required_anti_affinity:
                # No existing pod has required anti-affinity: nothing can count (upstream walks
                # an empty node list and skips).
                return None, Status.skip()
        idx = self.index(nodes.infos)
        ns_labels, nsl_key = self._namespace_labels_and_key(pod.namespace)

        # Existing pods' required anti-affinity terms that match the incoming pod.
        existing: dict[str, np.ndarray] = {}
        q = idx.query(idx.terms, ("existing-anti", pod.namespace, pod_keys(pod)[0], nsl_key),
                      lambda g: g.kind == KIND_ANTI and _existing_term_matches(g.term, pod, ns_labels),
                      weight_own_key)
        for key in q.keys:
            agg = idx.aggregate(q, key)
            if agg.n:
                add_into(existing, key, agg.arr)

        aff_terms = [self._resolve(t) for t in req_aff]
        anti_terms = [self._resolve(t) for t in req_anti]

        # Existing pods matching all of the incoming pod's affinity terms (+1 per term).
        aff_counts: dict[str, np.ndarray] = {}
        if aff_terms:
            qa = idx.query(idx.sigs, ("all", tuple(t.memo_key for t in aff_terms)),
                           lambda g: all(t.matches_sig(g) for t in aff_terms))
            for t in aff_terms:
                agg = idx.aggregate(qa, t.key)
                if agg.n:
                    add_into(aff_counts, t.key, agg.arr)
        # Existing pods matching each of the incoming pod's anti-affinity terms.
        anti_counts: dict[str, np.ndarray] = {}
        for t in anti_terms:
            agg = idx.aggregate(self._sig_query(idx, t), t.key)
            if agg.n:
                add_into(anti_counts, t.key, agg.arr)

        if not _nonzero(existing) and not req_aff and not req_anti:
            return None, Status.skip()
        self_match = bool(aff_terms) and all(t.matches(pod) for t in aff_terms)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(pod, ns_labels, aff_terms, anti_terms, existing,
                                                          aff_counts, anti_counts, self_match))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return _not_found(PRE_FILTER_STATE_KEY, "error reading")
        s.update_with_pod(pod_info_to_add, node_info.node, 1)
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return _not_found(PRE_FILTER_STATE_KEY, "error reading")
        s.update_with_pod(pod_info_to_remove, node_info.node, -1)
        return None

    # ---- Filter ----------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return _not_found(PRE_FILTER_STATE_KEY, "error reading")
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", NAME)
        labels = node.labels
        if s.aff_terms:
            pods_exist = True
            for t in s.aff_terms:
                v = labels.get(t.key)
                if v is None:
                    # All topology labels must exist on the node.
                    return self._st_aff
                if _count(s.aff, t.key, v) <= 0:
                    pods_exist = False
            # The first pod of a group whose terms match itself may go anywhere the labels exist.
            if not pods_exist and (s.aff_nonempty or not s.self_match):
                return self._st_aff
        if s.anti:
            for t in s.anti_terms:
                v = labels.get(t.key)
                if v is not None and _count(s.anti, t.key, v) > 0:
                    return self._st_anti
        if s.existing:
            for k in s.existing:
                v = labels.get(k)
                if v is not None and _count(s.existing, k, v) > 0:
                    return self._st_existing
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        n = len(rows)
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return np.zeros(n, dtype=bool)
        ok = np.ones(n, dtype=bool)
        if s.aff_terms:
            has_all = np.ones(n, dtype=bool)
            exist = np.ones(n, dtype=bool)
            for t in s.aff_terms:
                dom = domain_rows(snapshot, t.key)[rows]
                has_all &= dom > 0
                exist &= gather(s.aff.get(t.key), dom) > 0
            if s.aff_nonempty or not s.self_match:
                has_all &= exist
            ok &= has_all
        for t in s.anti_terms:
            arr = s.anti.get(t.key)
            if arr is not None and arr.any():
                ok &= gather(arr, domain_rows(snapshot, t.key)[rows]) <= 0
        for k, arr in s.existing.items():
            if arr.any():
                ok &= gather(arr, domain_rows(snapshot, k)[rows]) <= 0
        return ok

    # ---- PreScore / Score ------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        aff = pod.affinity
        pref = aff.pod_affinity_preferred if aff is not None else ()
        pref_anti = aff.pod_anti_affinity_preferred if aff is not None else ()
        has_constraints = bool(pref or pref_anti)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        if not has_constraints:
            snap = self._snapshot_of(nodes.infos)
            if snap is not None and not snap.any_pods_with_affinity:
                # Only existing pods' terms could count, and no pod has any (upstream walks an
                # empty node list and skips).
                return Status.skip()
            if KEPT_EXISTING_SCORE and snap is not None:
                return self._pre_score_existing_kept(state, pod, snap)
        idx = self.index(nodes.infos)
        ns_labels, nsl_key = self._namespace_labels_and_key(pod.namespace)
        score: dict[str, np.ndarray] = {}
        touched = False
        # The incoming pod's preferred terms, matched by existing pods.
        for t, w in self._preferred_terms(pod, pref, pref_anti):
            agg = idx.aggregate(self._sig_query(idx, t), t.key)
            if agg.n:
                touched = True
                add_into(score, t.key, agg.arr, w)
        # Existing pods' terms matched by the incoming pod.
        q = self._existing_score_query(idx, pod, ns_labels, nsl_key)
        for key in q.keys:
            agg = idx.aggregate(q, key)
            if agg.n:
                touched = True
                add_into(score, key, agg.arr)
        if not touched:
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(score))
        return None

    def _existing_score_query(self, idx: Index, pod: Pod, ns_labels: dict[str, str],
                              nsl_key: frozenset[tuple[str, str]] | None) -> Query:
        """The existing pods' Score terms (required affinity with hardPodAffinityWeight,
        preferred affinity and anti-affinity) that match the incoming pod."""
        hard = self.hard_pod_affinity_weight

        def weight(g: TermGroup, key: str) -> int | None:
            if g.term.topology_key != key:
                return None
            if g.kind == KIND_HARD:
                return hard if hard > 0 else None
            return g.sign * g.weight

        return idx.query(idx.terms, ("existing-score", pod.namespace, pod_keys(pod)[0], nsl_key),
                         lambda g: g.kind != KIND_ANTI and _existing_term_matches(g.term, pod, ns_labels), weight)

    def _pre_score_existing_kept(self, state: CycleState, pod: Pod, snap: Any) -> Status | None:
        """PreScore of a pod without preferred terms of its own (``KEPT_EXISTING_SCORE``): only
        the existing pods' terms count, so the answer is kept per (namespace, labels, namespace
        labels) and given again while the snapshot's ``affinity_changes`` stands still (no row
        changed which pods with terms a node holds, nor the node under them): the index is not
        brought up to date for it (the next query that needs the index catches up). The kept
        score arrays are shared read-only by the cycles' states, as one state's are by its
        clones; indices past their end read 0, as for any array made before a domain was
        interned."""
        ns_labels, nsl_key = self._namespace_labels_and_key(pod.namespace)
        k = (pod.namespace, pod_keys(pod)[0], nsl_key)
        memo = self._existing_memo
        hit = memo.get(k)
        if hit is not None and hit[0] is snap.infos and hit[1] == snap.affinity_changes:
            kept = hit[2]
        else:
            changes = snap.affinity_changes
            idx = self.index(snap.infos)
            q = self._existing_score_query(idx, pod, ns_labels, nsl_key)
            score: dict[str, np.ndarray] = {}
            for key in q.keys:
                agg = idx.aggregate(q, key)
                if agg.n:
                    add_into(score, key, agg.arr)
            kept = _PreScoreState(score) if score else None
            if len(memo) >= _EXISTING_MEMO_MAX:
                memo.clear()
            memo[k] = (snap.infos, changes, kept)
        if kept is None:
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, kept)
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return 0, _not_found(PRE_SCORE_STATE_KEY, "failed to read")
        node = node_info.node
        if node is None:
            return 0, None
        labels = node.labels
        total = 0
        for k, arr in s.score.items():
            v = labels.get(k)
            if v is not None:
                i = lookup_dom(k, v)
                if 0 < i < len(arr):
                    total += int(arr[i])
        return total, None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return np.zeros(len(rows), dtype=np.int64)
        if FEWER_SCORE_ARRAYS and s.score:
            out: np.ndarray | None = None
            for k, arr in s.score.items():
                d = domain_rows(snapshot, k)[rows]
                # Every row's domain id is interned, so below dom_size(k): no index past the end.
                g = arr[d] if len(arr) >= dom_size(k) else gather(arr, d)
                if out is None:
                    out = g if g.dtype == np.int64 else g.astype(np.int64)  # (a gather: a new array)
                else:
                    out += g
            assert out is not None
            return out
        out = np.zeros(len(rows), dtype=np.int64)
        for k, arr in s.score.items():
            out += gather(arr, domain_rows(snapshot, k)[rows])
        return out

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return _not_found(PRE_SCORE_STATE_KEY, "failed to read")
        if not s.score or len(scores) == 0:
            return None
        mn = int(min_1d(scores))
        diff = int(max_1d(scores)) - mn
        if diff > 0 and FEWER_SCORE_ARRAYS:
            # The same quotients, the same products (IEEE multiplication commutes) and the same
            # truncation toward zero (the int64 assignment casts as astype does).
            q = (scores - mn) / float(diff)
            q *= float(MAX_NODE_SCORE)
            scores[:] = q
        elif diff > 0:
            scores[:] = (float(MAX_NODE_SCORE) * ((scores - mn) / float(diff))).astype(np.int64)
        else:
            scores[:] = 0
        return None

    # ---- queueing hints --------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Add: an assigned pod may satisfy the pod's affinity. UpdatePodLabel: an existing pod's
            # labels (or the pod's own) may stop matching. Delete: an existing pod that repelled the
            # pod, or that the pod repelled, is gone.
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                             "InterPodAffinityPodChange"),
                self.is_schedulable_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                             "InterPodAffinityNodeChange"),
                self.is_schedulable_after_node_change),
        ]

    @staticmethod
    def is_schedulable_after_pod_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if old is not None and new is not None and (new.uid or new.key) == (pod.uid or pod.key) \
                and old.labels != new.labels:
            # The pod's own labels changed: existing pods' anti-affinity may no longer match it.
            return QueueingHint.QUEUE
        # Only pods that are bound or nominated to a node count.
        if new is not None and not new.node_name and not new.nominated_node_name:
            new = None
        if old is not None and not old.node_name and not old.nominated_node_name:
            old = None
        if new is None and old is None:
            return QueueingHint.QUEUE_SKIP
        aff = pod.affinity
        terms = aff.pod_affinity_required if aff is not None else ()
        anti = aff.pod_anti_affinity_required if aff is not None else ()
        if new is not None and old is not None:
            # Affinity looks for one existing pod matching all terms, hence "all" here.
            if not _raw_matches_all(terms, old) and _raw_matches_all(terms, new):
                return QueueingHint.QUEUE
            if _raw_matches_all(anti, old) and not _raw_matches_all(anti, new):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        if new is not None:
            return QueueingHint.QUEUE if _raw_matches_all(terms, new) else QueueingHint.QUEUE_SKIP
        # Deleted: it matched the pod's anti-affinity, or its own anti-affinity matched the pod.
        if _raw_matches_all(anti, old):
            return QueueingHint.QUEUE
        old_aff = old.affinity
        if old_aff is not None and _raw_matches_all(old_aff.pod_anti_affinity_required, pod):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if new is None:
            return QueueingHint.QUEUE_SKIP
        aff = pod.affinity
        terms = aff.pod_affinity_required if aff is not None else ()
        anti = aff.pod_anti_affinity_required if aff is not None else ()
        new_labels = new.labels
        for t in terms:
            k = t.topology_key
            if old is None:
                # A new node with the affinity topology key.
                if k in new_labels:
                    return QueueingHint.QUEUE
                continue
            if k in new_labels and (k not in old.labels or old.labels[k] != new_labels[k]):
                # The node gained the key, or moved to another domain.
                return QueueingHint.QUEUE
        for t in anti:
            if old is None:
                # Any new node may do: one without the key always accepts the pod.
                return QueueingHint.QUEUE
            k = t.topology_key
            if k in old.labels and (k not in new_labels or old.labels[k] != new_labels[k]):
                # The node lost the key, or moved to another domain.
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


def _not_found(key: str, verb: str) -> Status:
    return Status.as_error(f'{verb} "{key}" from cycleState: not found', NAME)
