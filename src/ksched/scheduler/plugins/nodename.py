"""NodeName: a pod with ``spec.nodeName`` fits only that node."""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    RowLocal,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
)
from ksched.scheduler.framework.signers import NODE_NAME_SIGNER_NAME
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo

__all__ = ["ERR_REASON", "NodeName"]

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin, EnqueueExtensions, RowLocal, VectorizedFilter, SignPlugin):
    name = "NodeName"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON, plugin=self.name)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.node_name or pod.node_name == node_info.name:
            return None
        return self._status

    def row_local_key(self, pod: Pod) -> Any:
        return pod.node_name

    def row_local_key_templated(self, pod: Pod) -> bool:
        """The key is spec.nodeName (which the row cache checks against a kept key)."""
        return True

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The verdict depends on the pod's spec.nodeName (as upstream)."""
        return [SignFragment(NODE_NAME_SIGNER_NAME, pod.node_name)], None

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        if not pod.node_name:
            return np.ones(len(rows), dtype=bool)
        r = snapshot.row_of.get(pod.node_name, -1)
        return rows == r

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # As upstream (1.36): a new node always triggers a retry (no hint, the same as Queue).
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))]
