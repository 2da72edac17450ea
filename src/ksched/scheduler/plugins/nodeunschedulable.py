"""NodeUnschedulable: nodes with ``spec.unschedulable`` reject pods that do not tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.taints import Taint, tolerations_tolerate_taint
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    RowLocal,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
)
from ksched.scheduler.framework.signers import TOLERATIONS_SIGNER_NAME, tolerations_signer
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo

__all__ = ["ERR_REASON_UNKNOWN_CONDITION", "ERR_REASON_UNSCHEDULABLE", "NodeUnschedulable"]

ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def _unschedulable(ni: NodeInfo) -> bool:
    return bool(ni.node is not None and ni.node.unschedulable)


class NodeUnschedulable(FilterPlugin, EnqueueExtensions, RowLocal, VectorizedFilter, SignPlugin):
    name = "NodeUnschedulable"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE, plugin=self.name)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNKNOWN_CONDITION, plugin=self.name)
        if not node.unschedulable:
            return None
        if tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return None
        return self._status

    def row_local_key(self, pod: Pod) -> Any:
        c = template_cache(pod)
        k = c.get("nodeunschedulable.tolerated")
        if k is None:
            k = c["nodeunschedulable.tolerated"] = tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT)
        return k

    def row_local_key_templated(self, pod: Pod) -> bool:
        """The key is of the pod's tolerations: its template's."""
        return True

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The verdict depends on the pod's tolerations (as upstream)."""
        return [SignFragment(TOLERATIONS_SIGNER_NAME, tolerations_signer(pod))], None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        if tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return np.ones(len(rows), dtype=bool)
        return ~snapshot.row_values("node.unschedulable", _unschedulable)[rows]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 self._after_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
                                 self._after_toleration_change),
        ]

    @staticmethod
    def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a schedulable node is added, or a node goes from unschedulable to
        schedulable (upstream's isSchedulableAfterNodeChange)."""
        if not isinstance(new, Node) or (old is not None and not isinstance(old, Node)):
            raise TypeError(f"expected Node objects, got {type(old).__name__} and {type(new).__name__}")
        if (old is not None and old.unschedulable and not new.unschedulable) or (
                old is None and not new.unschedulable):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def _after_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the rejected pod itself now tolerates the unschedulable taint."""
        if not isinstance(new, Pod) or (old is not None and not isinstance(old, Pod)):
            raise TypeError(f"expected Pod objects, got {type(old).__name__} and {type(new).__name__}")
        if (new.uid or new.key) != (pod.uid or pod.key):
            return QueueingHint.QUEUE_SKIP
        if tolerations_tolerate_taint(new.tolerations, UNSCHEDULABLE_TAINT):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
