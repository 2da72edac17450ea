"""NodeAffinity: a node must match the pod's ``nodeSelector`` AND its required node affinity
(terms ORed, requirements ANDed), and the scheduler-enforced ``addedAffinity`` of the plugin
args; nodes are scored by the summed weights of the preferred terms they match.

Upstream: pkg/scheduler/framework/plugins/nodeaffinity (1.36). PreFilter narrows the nodes to
the ``metadata.name`` ``In`` field requirements of the required terms (when every term has one)
and skips the Filter when there is nothing to check; PreScore skips Score when there are no
preferred terms.

Vectorized forms cache per-node matches in ``Snapshot.row_values`` keyed by the selector, so
pods of one template evaluate each node once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.affinity import NodeAffinity as ApiNodeAffinity
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
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
from ksched.scheduler.framework.signers import (
    NODE_AFFINITY_SIGNER_NAME,
    NODE_SELECTOR_SIGNER_NAME,
    node_affinity_signer,
    node_selector_signer,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper import (
    OBJECT_NAME_FIELD,
    CompiledNodeSelector,
    NodeSelectorParseError,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    default_normalize_score,
    get_required_node_affinity,
)

__all__ = ["ERR_REASON_CONFLICT", "ERR_REASON_ENFORCED", "ERR_REASON_POD", "NodeAffinity"]

NAME = "NodeAffinity"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


class _PreFilterState(StateData):
    __slots__ = ("required",)

    def __init__(self, required: RequiredNodeAffinity) -> None:
        self.required = required


class _PreScoreState(StateData):
    __slots__ = ("preferred",)

    def __init__(self, preferred: PreferredSchedulingTerms | None) -> None:
        self.preferred = preferred


def _pod_preferred(pod: Pod) -> PreferredSchedulingTerms | None:
    """The pod's preferred terms, parsed once per template (None when it has none)."""
    c = template_cache(pod)
    if "nodeaffinity.preferred" in c:
        return c["nodeaffinity.preferred"]  # type: ignore[no-any-return]
    aff = pod.affinity
    na = aff.node_affinity if aff is not None else None
    p = PreferredSchedulingTerms(na.preferred) if na is not None and na.preferred else None
    c["nodeaffinity.preferred"] = p
    return p


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions,
        VectorizedFilter, VectorizedScore, ScoreExtensions, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.added_node_selector: CompiledNodeSelector | None = None
        self.added_pref_sched_terms: PreferredSchedulingTerms | None = None
        added = self.args.get("addedAffinity")
        if added:
            na = added if isinstance(added, ApiNodeAffinity) else ApiNodeAffinity.from_dict(added)
            if na.required is not None:
                sel = CompiledNodeSelector(na.required)
                if sel.errors:
                    raise NodeSelectorParseError(
                        "parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                        + sel.error_message())
                self.added_node_selector = sel
            if na.preferred:
                pref = PreferredSchedulingTerms(na.preferred)
                if pref.errors:
                    raise NodeSelectorParseError(
                        "parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: "
                        + pref.error_message())
                self.added_pref_sched_terms = pref
        self._st_pod = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD, plugin=self.name)
        self._st_enforced = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED, plugin=self.name)

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """Filter and Score depend on the pod's node affinity and nodeSelector (as upstream;
        the plugin's addedAffinity is the same for every pod)."""
        return [SignFragment(NODE_AFFINITY_SIGNER_NAME, node_affinity_signer(pod)),
                SignFragment(NODE_SELECTOR_SIGNER_NAME, node_selector_signer(pod))], None

    # ---------------------------------------------------------------- PreFilter

    def pre_filter_skips(self, pod: Pod) -> bool:
        """PreFilter skips a pod without required node affinity or nodeSelector when the plugin
        adds none (the pod's spec and the plugin's arguments alone; the runtime's
        ``TEMPLATE_SKIPS``)."""
        aff = pod.affinity
        na = aff.node_affinity if aff is not None else None
        return (na is None or na.required is None) and self.added_node_selector is None and not pod.node_selector

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        aff = pod.affinity
        na = aff.node_affinity if aff is not None else None
        required = na.required if na is not None else None
        if required is None and self.added_node_selector is None and not pod.node_selector:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(get_required_node_affinity(pod)))
        if required is None or not required.terms:
            return None, None
        # A node subset when every term names nodes (metadata.name In ...): requirements of a term
        # are ANDed (intersection), terms are ORed (union).
        node_names: set[str] | None = None
        for t in required.terms:
            term_names: set[str] | None = None
            for r in t.fields:
                if r.key == OBJECT_NAME_FIELD and r.op == "In":
                    s = set(r.values)
                    term_names = s if term_names is None else term_names & s
            if term_names is None:
                return None, None
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT, plugin=self.name)
        if node_names:
            return PreFilterResult(node_names), None
        return None, None

    # ---------------------------------------------------------------- Filter

    def _required(self, state: CycleState, pod: Pod) -> RequiredNodeAffinity:
        s = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(s, _PreFilterState):
            return s.required
        # PreFilter disabled: compute it here, as upstream.
        return get_required_node_affinity(pod)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if self.added_node_selector is not None and not self.added_node_selector.match_node(node):
            return self._st_enforced
        if not self._required(state, pod).match_node(node):
            return self._st_pod
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        mask: np.ndarray | None = None
        added = self.added_node_selector
        if added is not None:
            mask = snapshot.row_values(("NodeAffinity.added", added.key),
                                       lambda ni: added.match_node(ni.node))[rows]
        req = self._required(state, pod)
        if not req.is_empty():
            m = snapshot.row_values(("NodeAffinity.required", req.key), lambda ni: req.match_node(ni.node))[rows]
            mask = m if mask is None else mask & m
        if mask is None:
            return np.ones(len(rows), dtype=bool)
        return mask

    # ---------------------------------------------------------------- PreScore / Score

    def pre_score_skips(self, pod: Pod) -> bool:
        """PreScore skips a pod without preferred node affinity when the plugin adds none (the
        pod's spec and the plugin's arguments alone; the runtime's ``TEMPLATE_SKIPS``)."""
        return _pod_preferred(pod) is None and self.added_pref_sched_terms is None

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        pref = _pod_preferred(pod)
        if pref is not None and pref.errors:
            return Status.as_error(pref.error_message(), self.name)
        if pref is None and self.added_pref_sched_terms is None:
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(pref))
        return None

    def _preferred(self, state: CycleState, pod: Pod) -> PreferredSchedulingTerms | Status | None:
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, _PreScoreState):
            return s.preferred
        # PreScore disabled: compute it here, as upstream.
        pref = _pod_preferred(pod)
        if pref is not None and pref.errors:
            return Status.as_error(pref.error_message(), self.name)
        return pref

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found", self.name)
        count = 0
        if self.added_pref_sched_terms is not None:
            count += self.added_pref_sched_terms.score_node(node)
        pref = self._preferred(state, pod)
        if isinstance(pref, Status):
            return 0, pref
        if pref is not None:
            count += pref.score_node(node)
        return count, None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        added = self.added_pref_sched_terms
        if added is not None and added.terms:
            out += snapshot.row_values(("NodeAffinity.addedPreferred", added.key),
                                       lambda ni: added.score_node(ni.node), dtype=np.int64)[rows]
        pref = self._preferred(state, pod)
        if isinstance(pref, PreferredSchedulingTerms) and pref.terms:
            out += snapshot.row_values(("NodeAffinity.preferred", pref.key),
                                       lambda ni: pref.score_node(ni.node), dtype=np.int64)[rows]
        return out

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        return default_normalize_score(MAX_NODE_SCORE, False, scores)

    # ---------------------------------------------------------------- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(
            ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            self.is_schedulable_after_node_change)]

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when an added node matches, or an updated node goes from not matching the pod's
        required node affinity to matching it (and it matches the enforced affinity)."""
        if not isinstance(new, Node) or (old is not None and not isinstance(old, Node)):
            raise TypeError(f"expected Node objects, got {type(old).__name__} and {type(new).__name__}")
        if self.added_node_selector is not None and not self.added_node_selector.match_node(new):
            return QueueingHint.QUEUE_SKIP
        required = get_required_node_affinity(pod)
        if not required.match_node(new):
            return QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        if required.match_node(old):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
