"""Plugin interfaces, one class per extension point, as upstream's framework/interface.go.

A plugin is a class with a ``name`` that derives from the classes of the extension points it
implements. Plugins that can evaluate all candidate nodes at once also define the vectorized
form (``filter_nodes`` / ``score_nodes``) over rows of the snapshot's node table; the runtime
uses it when present and the per-node form otherwise. Both forms must agree.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ClusterEventWithHint
from ksched.scheduler.framework.status import Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from ksched.scheduler.cache.snapshot import Snapshot

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "BindPlugin",
    "EnqueueExtensions",
    "FilterPlugin",
    "Handle",
    "NodeList",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "ReservePlugin",
    "ScorePlugin",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
MAX_TOTAL_SCORE = 2**63 - 1


class NodeList(Sequence[NodeInfo]):
    """Nodes as rows of a snapshot: ``rows`` (NumPy int array) index ``infos`` and the node table."""

    __slots__ = ("_names", "infos", "rows")

    def __init__(self, infos: list[NodeInfo], rows: np.ndarray) -> None:
        self.infos = infos
        self.rows = rows
        self._names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> NodeInfo:  # type: ignore[override]
        return self.infos[self.rows[i]]

    def __iter__(self) -> Iterator[NodeInfo]:
        infos = self.infos
        for r in self.rows.tolist():
            yield infos[r]

    @property
    def names(self) -> list[str]:
        if self._names is None:
            infos = self.infos
            self._names = [infos[r].name for r in self.rows.tolist()]
        return self._names


class PreFilterResult:
    """A subset of nodes the pod can go to (None: all nodes)."""

    __slots__ = ("node_names",)

    def __init__(self, node_names: set[str] | None) -> None:
        self.node_names = node_names

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return self
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()))
        return PreFilterResult((self.node_names or set()) & (other.node_names or set()))


class PostFilterResult:
    __slots__ = ("mode", "nominated_node_name")

    MODE_NOOP = 0
    MODE_OVERRIDE = 1

    def __init__(self, nominated_node_name: str = "", mode: int = 1) -> None:
        self.nominated_node_name = nominated_node_name
        self.mode = mode


class Handle(Protocol):
    """What plugins may use of the scheduler (upstream's framework.Handle)."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def client(self) -> Any: ...

    @property
    def informers(self) -> Any: ...

    @property
    def clock(self) -> Any: ...

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: Pod,
                                               node_info: NodeInfo) -> Status | None: ...

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, pod_info_to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, pod_info_to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None: ...


class Plugin(ABC):  # noqa: B024 - the extension-point subclasses carry the abstract methods
    """Base of every plugin. ``args`` is the plugin's configuration (a dict, already defaulted)."""

    name: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args: dict[str, Any] = args or {}
        self.handle = handle

    def __repr__(self) -> str:
        return f"<plugin {self.name}>"


class EnqueueExtensions(ABC):
    """Plugins that reject pods say which cluster events may make those pods schedulable."""

    @abstractmethod
    def events_to_register(self) -> list[ClusterEventWithHint]:
        ...


class PreEnqueuePlugin(Plugin):
    @abstractmethod
    def pre_enqueue(self, pod: Pod) -> Status | None:
        ...


class QueueSortPlugin(Plugin):
    @abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ...

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        """Optional fast path: a key with ``less(a, b) == sort_key(a) < sort_key(b)``; None if
        the plugin has no such key (the queue then compares with ``less``)."""
        return None


class PreFilterExtensions(ABC):
    """Incremental updates of PreFilter state when pods are added to or removed from a node
    (nominated pods, preemption victims)."""

    @abstractmethod
    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        ...

    @abstractmethod
    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        ...


class PreFilterPlugin(Plugin):
    @abstractmethod
    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    """``filter`` per node. A plugin may also define
    ``filter_nodes(state, pod, snapshot, rows) -> np.ndarray[bool]`` over rows of the node table;
    returning None there means "not this time": ``filter`` then runs per node for this cycle."""

    @abstractmethod
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        ...


class PostFilterPlugin(Plugin):
    @abstractmethod
    def post_filter(self, state: CycleState, pod: Pod,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        ...


class PreScorePlugin(Plugin):
    @abstractmethod
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        ...


class ScorePlugin(Plugin):
    """``score`` per node. Optional: ``score_nodes(state, pod, snapshot, rows) -> np.ndarray[int64]``
    (vectorized) and ``normalize_score(state, pod, nodes, scores)`` (in place on an int64 array)."""

    @abstractmethod
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        ...


class ReservePlugin(Plugin):
    @abstractmethod
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        ...

    @abstractmethod
    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        ...


class PermitPlugin(Plugin):
    @abstractmethod
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout in seconds); a Wait status holds the pod until allowed, rejected or timed out."""
        ...


class PreBindPlugin(Plugin):
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Skip when the plugin has nothing to do for this pod (default)."""
        return Status.skip()

    @abstractmethod
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        ...


class BindPlugin(Plugin):
    @abstractmethod
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Skip lets the next bind plugin try."""
        ...


class PostBindPlugin(Plugin):
    @abstractmethod
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        ...
