"""The stable import surface for scheduler plugins: everything an out-of-tree plugin needs, from
one module. Upstream's counterpart is the staging module ``k8s.io/kube-scheduler/framework``,
which plugins import instead of ``k8s.io/kubernetes/pkg/scheduler/framework`` (kubernetes
issue #89930).

Divergence: upstream's staging module declares interfaces and leaves the implementations in
kubernetes/kubernetes; this module defines nothing and re-exports the classes themselves from
where they live (``ksched.scheduler.framework.interface``, ``.status``, ``.cycle_state``,
``.types``, ``.events``, ``ksched.scheduler.cache.snapshot`` and ``ksched.api``). Import from
here: those modules may be reorganized, these names stay.

The extension points (``FilterPlugin``, ``ScorePlugin``, ...), ``EnqueueExtensions``, the
fast-path contract (``VectorizedFilter``, ``VectorizedScore``, ``RowLocal``,
``VectorizedFilterStatuses``, ``ScoreExtensions``, ``ExplainedPostFilter``) and pod signatures
(``SignPlugin``, with ``SignFragment``) are classes a plugin derives from; see
``docs/writing-plugins.md``. For example::

    from ksched.plugins import Code, CycleState, FilterPlugin, NodeInfo, Pod, Status

    class OnlyLabelled(FilterPlugin):
        name = "OnlyLabelled"

        def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
            if node_info.node is not None and "example.com/ok" in node_info.node.labels:
                return None  # Success
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) not labelled example.com/ok")
"""

from __future__ import annotations

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
    MIN_NODE_SCORE,
    BindPlugin,
    EnqueueExtensions,
    ExplainedPostFilter,
    FastPath,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    RowLocal,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
    VectorizedFilterStatuses,
    VectorizedScore,
)
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, NodeList, PodInfo, QueuedPodInfo

__all__ = [
    # Extension points, and the base every plugin shares.
    "Plugin",
    "PreEnqueuePlugin",
    "QueueSortPlugin",
    "PreFilterPlugin",
    "PreFilterExtensions",
    "PreFilterResult",
    "FilterPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreScorePlugin",
    "ScorePlugin",
    "ScoreExtensions",
    "ReservePlugin",
    "PermitPlugin",
    "PreBindPlugin",
    "BindPlugin",
    "PostBindPlugin",
    "EnqueueExtensions",
    "Handle",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    # The fast-path contract.
    "VectorizedFilter",
    "VectorizedScore",
    "RowLocal",
    "VectorizedFilterStatuses",
    "ExplainedPostFilter",
    "FastPath",
    "Snapshot",
    # Pod signatures (opportunistic batching).
    "SignPlugin",
    "SignFragment",
    # Statuses.
    "Status",
    "Code",
    "Diagnosis",
    # Cycle state, nodes and pods as the framework sees them.
    "CycleState",
    "StateData",
    "NodeInfo",
    "NodeList",
    "PodInfo",
    "QueuedPodInfo",
    # Cluster events, for events_to_register and queueing hints.
    "ClusterEvent",
    "ClusterEventWithHint",
    "ActionType",
    "EventResource",
    "QueueingHint",
    # API objects.
    "Pod",
    "Node",
]
