"""TaintToleration: nodes with a NoSchedule/NoExecute taint the pod does not tolerate are
filtered out; nodes are scored by how many PreferNoSchedule taints the pod does not tolerate
(fewer is better).

Upstream: pkg/scheduler/framework/plugins/tainttoleration (1.36). Since 1.35 (k/k#134740, also
back-ported to 1.34) the Filter reason no longer names the taint: ``node(s) had untolerated
taint(s)``.

Vectorized forms cache per-node verdicts in ``Snapshot.row_values`` under a key made of the
pod's tolerations, so pods of one template evaluate each node once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    find_untolerated_taint,
    tolerations_tolerate_taint,
)
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
    PreScorePlugin,
    RowLocal,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    UniformScore,
    VectorizedFilter,
    VectorizedScore,
)
from ksched.scheduler.framework.signers import TOLERATIONS_SIGNER_NAME, tolerations_signer
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper import default_normalize_score

__all__ = ["ERR_REASON_NOT_MATCH", "ERR_REASON_UNTOLERATED", "TaintToleration"]

NAME = "TaintToleration"
PRE_SCORE_STATE_KEY = "PreScore" + NAME
# The reason Filter reports (1.35+; earlier releases said "node(s) had untolerated taint {k: v}").
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
# Upstream's exported ErrReasonNotMatch constant (used by other components, not by Filter).
ERR_REASON_NOT_MATCH = "node(s) had taints that the pod didn't tolerate"

_DO_NOT_SCHEDULE = (NO_SCHEDULE, NO_EXECUTE)

TolerationKey = tuple[tuple[str, str, str, str], ...]


def _tolerations_key(tolerations: Sequence[Toleration]) -> TolerationKey:
    return tuple(t.key_tuple() for t in tolerations)


def _pod_tolerations_key(pod: Pod) -> TolerationKey:
    c = template_cache(pod)
    k = c.get("tainttoleration.key")
    if k is None:
        k = c["tainttoleration.key"] = _tolerations_key(pod.tolerations)
    return k  # type: ignore[no-any-return]


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """Tolerations with effect PreferNoSchedule or empty (an empty effect matches every effect)."""
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    n = 0
    for taint in taints:
        if taint.effect != PREFER_NO_SCHEDULE:
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            n += 1
    return n


class _PreScoreState(StateData):
    __slots__ = ("key", "tolerations")

    def __init__(self, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = tolerations
        self.key = _tolerations_key(tolerations)


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions, RowLocal,
        VectorizedFilter, VectorizedScore, ScoreExtensions, SignPlugin, UniformScore):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNTOLERATED, plugin=self.name)
        # uniform_score's answers for one snapshot while its nodes stay the same: (snapshot,
        # nodes_generation, whether any node has a PreferNoSchedule taint, tolerations key ->
        # whether no node counts an intolerable one).
        self._uniform_memo: tuple[Any, int, bool, dict[Any, bool]] = (None, -1, True, {})

    # ---------------------------------------------------------------- Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", self.name)
        if not node.taints:
            return None
        if find_untolerated_taint(node.taints, pod.tolerations, _DO_NOT_SCHEDULE) is None:
            return None
        return self._status

    def row_local_key(self, pod: Pod) -> Any:
        """Filter and raw Score on a node depend only on its taints and the pod's tolerations."""
        return _pod_tolerations_key(pod)

    def row_local_key_templated(self, pod: Pod) -> bool:
        """The key is of the pod's tolerations: its template's."""
        return True

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """Filter and Score depend on the pod's tolerations (as upstream)."""
        return [SignFragment(TOLERATIONS_SIGNER_NAME, tolerations_signer(pod))], None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        tolerations = pod.tolerations

        def fits(ni: NodeInfo) -> bool:
            taints = ni.node.taints  # type: ignore[union-attr]
            return not taints or find_untolerated_taint(taints, tolerations, _DO_NOT_SCHEDULE) is None

        arr = snapshot.row_values(("TaintToleration.filter", _pod_tolerations_key(pod)), fits)
        return arr[rows]

    # ---------------------------------------------------------------- PreScore / Score

    @staticmethod
    def _pre_score_value(pod: Pod) -> _PreScoreState:
        # Immutable, and a function of the tolerations alone: one per template.
        c = template_cache(pod)
        st = c.get("tainttoleration.prescore")
        if st is None:
            st = c["tainttoleration.prescore"] = _PreScoreState(prefer_no_schedule_tolerations(pod.tolerations))
        return st  # type: ignore[no-any-return]

    def pre_score_template_state(self, pod: Pod) -> tuple[str, Any] | None:
        """What PreScore writes: a value of the pod's template (the runtime's ``TEMPLATE_SKIPS``)."""
        return PRE_SCORE_STATE_KEY, self._pre_score_value(pod)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, self._pre_score_value(pod))
        return None

    def _pre_score_state(self, state: CycleState) -> _PreScoreState | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return Status.as_error(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found', self.name)
        return s

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            return 0, s
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found", self.name)
        return count_intolerable_prefer_no_schedule(node.taints, s.tolerations), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = self._pre_score_state(state)
        tolerations = s.tolerations if isinstance(s, _PreScoreState) else prefer_no_schedule_tolerations(
            pod.tolerations)
        key = s.key if isinstance(s, _PreScoreState) else _tolerations_key(tolerations)

        def count(ni: NodeInfo) -> int:
            return count_intolerable_prefer_no_schedule(ni.node.taints, tolerations)  # type: ignore[union-attr]

        arr = snapshot.row_values(("TaintToleration.score", key), count, dtype=np.int64)
        return arr[rows]

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        return default_normalize_score(MAX_NODE_SCORE, True, scores)

    def uniform_score(self, state: CycleState, pod: Pod) -> int | None:
        """MAX_NODE_SCORE when no node of the snapshot has a PreferNoSchedule taint the pod
        does not tolerate: every raw score is then 0, which the reverse normalization turns
        into the maximum on every node. None otherwise (or without PreScore's state)."""
        s = state.get(PRE_SCORE_STATE_KEY)
        snapshot = getattr(self.handle, "snapshot", None) if self.handle is not None else None
        if not isinstance(s, _PreScoreState) or snapshot is None:
            return None
        memo = self._uniform_memo
        if memo[0] is not snapshot or memo[1] != snapshot.nodes_generation:
            # Whether any node has a PreferNoSchedule taint at all: without one, every pod's
            # count is 0 on every node.
            any_taint = any(ni is not None and ni.node is not None
                            and any(t.effect == PREFER_NO_SCHEDULE for t in ni.node.taints)
                            for ni in snapshot.infos)
            memo = self._uniform_memo = (snapshot, snapshot.nodes_generation, any_taint, {})
        if not memo[2]:
            return MAX_NODE_SCORE
        got = memo[3].get(s.key)
        if got is None:
            tolerations = s.tolerations

            def count(ni: NodeInfo) -> int:
                return count_intolerable_prefer_no_schedule(ni.node.taints, tolerations)  # type: ignore[union-attr]

            got = not snapshot.row_values(("TaintToleration.score", s.key), count, dtype=np.int64).any()
            if len(memo[3]) >= 1024:
                memo[3].clear()
            memo[3][s.key] = got
        return MAX_NODE_SCORE if got else None

    # ---------------------------------------------------------------- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 self.is_schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATION),
                                 self.is_schedulable_after_pod_toleration_change),
        ]

    @staticmethod
    def is_schedulable_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the node goes from having an untolerated NoSchedule/NoExecute taint (or not
        existing) to having none."""
        if not isinstance(new, Node) or (old is not None and not isinstance(old, Node)):
            raise TypeError(f"expected Node objects, got {type(old).__name__} and {type(new).__name__}")
        was_untolerated = True
        if old is not None:
            was_untolerated = find_untolerated_taint(old.taints, pod.tolerations, _DO_NOT_SCHEDULE) is not None
        is_untolerated = find_untolerated_taint(new.taints, pod.tolerations, _DO_NOT_SCHEDULE) is not None
        if was_untolerated and not is_untolerated:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_pod_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the updated pod is the pod that was rejected."""
        if not isinstance(new, Pod) or (old is not None and not isinstance(old, Pod)):
            raise TypeError(f"expected Pod objects, got {type(old).__name__} and {type(new).__name__}")
        if (new.uid or new.key) == (pod.uid or pod.key):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
