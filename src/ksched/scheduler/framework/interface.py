"""Plugin interfaces, one class per extension point, as upstream's ``framework/interface.go``.

A plugin is a class with a ``name`` that derives from the classes of the extension points it
implements (``FilterPlugin``, ``ScorePlugin``, ...), and from ``EnqueueExtensions`` when it
rejects pods and can say which cluster events may make them schedulable.

The fast path
-------------
Every plugin works node by node (``filter``, ``score``), and that per-node form is the
reference: it alone decides what is right. A plugin may also declare, by deriving from the
classes below, that it can do the same work faster:

* :class:`VectorizedFilter` -- ``filter_nodes``: a verdict for many nodes in one NumPy call;
* :class:`VectorizedScore` -- ``score_nodes``: raw scores for many nodes in one call;
* :class:`RowLocal` -- ``row_local_key``: its Filter verdict and raw Score on a node depend only
  on that node and a key of the pod, so results are kept across scheduling cycles and only
  the rows of nodes that changed are recomputed;
* :class:`VectorizedFilterStatuses` -- ``filter_statuses``: the Filter *statuses* (reasons) of
  many nodes at once, for the diagnosis of a pod that fits nowhere.

From these the runtime picks each plugin's :class:`FastPath` (``CACHED``, ``VECTOR`` or
``NODE``) once per profile. Whatever it picks, the result must be identical to calling the
per-node form on every node: same feasible nodes, same scores, same statuses and messages.
Every fast form of ksched's own plugins is checked against its per-node form by tests
(``tests/scheduler/test_fast_paths_agree.py``, ``ksched.testing.PluginRunner``); a plugin
author should check theirs the same way. ``Framework.vectorize = False`` turns every fast
path off.

``ScoreExtensions`` (upstream's name) adds ``normalize_score`` to a Score plugin.

Pod signatures (opportunistic batching)
---------------------------------------
:class:`SignPlugin` -- ``sign_pod``: the plugin's part of a pod's scheduling signature
(upstream's ``SignPlugin``). When every PreFilter, Filter, PreScore and Score plugin of a profile
signs a pod, pods with equal signatures ask the same question of every node, and the framework
may reuse the previous pod's scored nodes for the next one (``framework/batch.py``). The promise
behind a fragment, for two pods whose fragments from this plugin are equal: the same PreFilter
result and skip decisions, the same Filter verdict and the same raw Score on every node, for the
same snapshot, nominated pods and cluster objects; and, for a pod it signs, the verdicts and raw
scores on a node neither change when a pod with the same signature is added to another node nor
depend on which other nodes are feasible (only NormalizeScore looks across nodes). A plugin whose
answers for a pod depend on anything else (objects it reads through informers, other nodes'
pods) refuses that pod: a non-success status, and the pod is not batched. A plugin that does not
derive from :class:`SignPlugin` makes every pod of its profiles unsignable; nothing else breaks.
As for the fast paths, a plugin that defines ``sign_pod`` without deriving from the class is
refused when the profile is built, and a whole-scheduler test proves batching changes no
placement (``tests/scheduler/test_batching_agrees.py``).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ClusterEventWithHint
from ksched.scheduler.framework.status import Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, NodeList, PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from ksched.scheduler.cache.snapshot import Snapshot

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "BindPlugin",
    "EnqueueExtensions",
    "ExplainedPostFilter",
    "FastPath",
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
    "RowLocal",
    "ScoreExtensions",
    "ScorePlugin",
    "ScorePluginForm",
    "SignFragment",
    "SignPlugin",
    "VectorizedFilter",
    "VectorizedFilterStatuses",
    "UniformScore",
    "VectorizedScore",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
MAX_TOTAL_SCORE = 2**63 - 1


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
    """What a PostFilter plugin decided: the node to nominate the pod for (preemption), and
    whether that overrides the pod's current nomination (``MODE_OVERRIDE``) or leaves it
    (``MODE_NOOP``)."""

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
    """Base of every plugin. ``args`` is the plugin's configuration (a dict, already defaulted);
    ``handle`` is the framework (see :class:`Handle`). ``name`` is what configurations, weights,
    statuses and events call the plugin."""

    name: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args: dict[str, Any] = args or {}
        self.handle = handle

    def __repr__(self) -> str:
        return f"<plugin {self.name}>"


class EnqueueExtensions(ABC):
    """Plugins that reject pods say which cluster events may make those pods schedulable, each
    with an optional queueing hint ``fn(pod, old, new) -> QueueingHint`` that looks closer. A
    rejecting plugin without it is requeued by every event (upstream's default)."""

    @abstractmethod
    def events_to_register(self) -> list[ClusterEventWithHint]:
        ...


class PreEnqueuePlugin(Plugin):
    """Runs before a pod enters activeQ; anything but Success keeps it waiting (gated) until an
    event for the plugin moves it again. Must be cheap: it runs on every queue add."""

    @abstractmethod
    def pre_enqueue(self, pod: Pod) -> Status | None:
        ...


class QueueSortPlugin(Plugin):
    """Orders activeQ; exactly one per profile (and the same in every profile)."""

    @abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ...

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        """Optional fast path: a key with ``less(a, b) == sort_key(a) < sort_key(b)``; None if
        the plugin has no such key (the queue then compares with ``less``)."""
        return None


class PreFilterExtensions(ABC):
    """Incremental updates of PreFilter state when pods are added to or removed from a node
    (nominated pods, preemption victims): what the plugin's Filter then reads must be as if
    PreFilter had run on a cluster with that change."""

    @abstractmethod
    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        ...

    @abstractmethod
    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        ...


class PreFilterPlugin(Plugin):
    """Runs once per cycle before Filter: computes state for Filter (``state.write``), may
    narrow the candidate nodes (a PreFilterResult), may reject the pod on every node
    (Unschedulable or UnschedulableAndUnresolvable), or Skip (its Filter then does not run).

    Optionally, for the runtime's ``TEMPLATE_SKIPS``, functions of the pod's template
    (``template_cache``: namespace, labels, spec) and the plugin's arguments alone, asked once
    per template: ``pre_filter_skips(pod) -> bool``, True only when ``pre_filter`` would do
    nothing but return Skip (the runtime then does not call it), and
    ``pre_filter_template_state(pod) -> (key, value) | None``, a pair only when ``pre_filter``
    would do nothing but ``state.write(key, value)`` of that very (immutable) value and succeed
    (the runtime then writes it in the plugin's turn), and ``pre_filter_skip_state(pod) ->
    (key, factory) | None``, a pair only when ``pre_filter`` would do nothing but
    ``state.write(key, factory())`` (a new value, or one shared immutable value) and return Skip
    (the runtime then writes ``factory()`` in the plugin's turn and skips it; ``SKIP_STATES``).
    The factory is kept in template dicts, which outlive the simulation: a class or a
    module-level function, never a bound method."""

    @abstractmethod
    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    """Whether the pod fits one node: None (Success), Unschedulable (preemption may help) or
    UnschedulableAndUnresolvable (it cannot); the first rejecting plugin decides, and its
    reasons are counted per node in the pod's FailedScheduling message. For speed, see
    :class:`VectorizedFilter`, :class:`RowLocal` and :class:`VectorizedFilterStatuses`."""

    @abstractmethod
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        ...


class PostFilterPlugin(Plugin):
    """Runs when no node fits (the ``diagnosis`` says why, node by node): preemption. May
    nominate a node for the pod."""

    @abstractmethod
    def post_filter(self, state: CycleState, pod: Pod,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        ...


class PreScorePlugin(Plugin):
    """Runs once per cycle on the feasible nodes before Score; Skip turns the plugin's Score
    off for this pod. Optionally ``pre_score_skips(pod)`` and ``pre_score_template_state(pod)``,
    as :class:`PreFilterPlugin`'s ``pre_filter_skips`` and ``pre_filter_template_state``."""

    @abstractmethod
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        ...


class ScorePlugin(Plugin):
    """A raw score for one feasible node. Raw scores may have any range if the plugin
    normalizes them (:class:`ScoreExtensions`); after that every score is in 0..100 and is
    multiplied by the plugin's weight. For speed, see :class:`VectorizedScore` and
    :class:`RowLocal`."""

    @abstractmethod
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        ...


class ScoreExtensions(ABC):
    """A Score plugin that normalizes its raw scores over all scored nodes (upstream's
    ScoreExtensions.NormalizeScore): ``scores`` (int64, aligned with ``nodes``) is changed in
    place, ending in 0..100."""

    @abstractmethod
    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        ...


class ReservePlugin(Plugin):
    """Claims what the pod will use on the chosen node before binding (``reserve``) and gives
    it back (``unreserve``, in reverse plugin order) when anything after fails. Unreserve must
    be idempotent and must not fail."""

    @abstractmethod
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        ...

    @abstractmethod
    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        ...


class PermitPlugin(Plugin):
    """The last say before binding: allow, reject, or Wait (the binding cycle holds the pod
    until every waiting plugin allows it, one rejects it, or the timeout passes)."""

    @abstractmethod
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout in seconds); a Wait status holds the pod until allowed, rejected or timed out."""
        ...


class PreBindPlugin(Plugin):
    """Work the binding needs first (volumes, claims), in the binding cycle; a failure
    unreserves and requeues the pod."""

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Skip when the plugin has nothing to do for this pod (default)."""
        return Status.skip()

    @abstractmethod
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        ...


class BindPlugin(Plugin):
    """Binds the pod (the ``pods/binding`` subresource); plugins are tried in order until one
    does not Skip."""

    @abstractmethod
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Skip lets the next bind plugin try."""
        ...


class PostBindPlugin(Plugin):
    """Informational, after a successful binding (clean-up); cannot fail."""

    @abstractmethod
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        ...


# ---------------------------------------------------------------------------------------------
# The fast-path contract (see the module docstring)


class VectorizedFilter(ABC):
    """A Filter plugin that judges many nodes in one call.

    ``filter_nodes(state, pod, snapshot, rows)`` gets the CycleState after PreFilter and
    ``rows``, an int array of rows of the snapshot (``snapshot.infos[row]`` is a NodeInfo;
    ``snapshot.table`` holds allocatable/requested per row and resource column), and returns a
    bool array aligned with ``rows``: True exactly where ``filter`` would return Success on
    that node. It may return None to decline for this pod: ``filter`` then runs per node for
    this cycle. It must not change ``state`` or the snapshot. Statuses (the reasons in a
    FailedScheduling message) always come from ``filter`` (or ``filter_statuses``), which the
    framework calls on the nodes it has to explain."""

    @abstractmethod
    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray | None:
        ...


class VectorizedScore(ABC):
    """A Score plugin that scores many nodes in one call.

    ``score_nodes(state, pod, snapshot, rows)`` returns an int64 array aligned with ``rows``
    equal to ``score`` on each node (the raw score, before NormalizeScore and weight). Only a
    plugin whose ``score`` cannot fail may implement it: the vectorized form reports no
    errors."""

    @abstractmethod
    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        ...


class RowLocal(ABC):
    """A Filter and/or Score plugin whose verdict and raw score on a node depend only on that
    node's NodeInfo and on ``row_local_key(pod)`` (plus the plugin's own configuration).

    The framework then keeps one array of verdicts / raw scores over every node row per key
    (replicas of one template share it) and recomputes only the rows whose NodeInfo changed
    since (one node after a binding, not all). The key must capture everything ``filter`` and
    ``score`` read of the pod and of the CycleState; they must read no other node, no other
    cluster state (informers) and nothing PreFilter/PreScore derive from anything but the pod.
    A wrong key gives wrong placements silently: the agreement tests catch it.

    Optionally, ``row_local_key_templated(pod) -> bool``: True when ``row_local_key(pod)`` is a
    function of the pod's template (``template_cache``: namespace, labels, spec) and of its
    spec.nodeName alone, so the row cache may keep a combination's key per template
    (``rowcache.TEMPLATED_KEYS``); a plugin without it keeps its combinations on the per-cycle
    path."""

    @abstractmethod
    def row_local_key(self, pod: Pod) -> Hashable:
        ...


class ZeroScore(ABC):
    """A Score plugin that can tell, after PreScore, that its score (normalized) is 0 on every
    node this cycle, whatever the nodes (DynamicResources for a pod without claims). The runtime
    then leaves it out of Score: a weighted 0 adds nothing to any node's total. It still runs
    where every plugin's scores are shown (``--explain``). Opportunistic batching keeps no scores
    of it: a pod with an equal signature must score 0 as well (a plugin whose zero depends on
    more than its signature part must not say so). ``scores_zero`` must be cheap and must not
    change ``state``."""

    @abstractmethod
    def scores_zero(self, state: CycleState, pod: Pod) -> bool:
        ...


class UniformScore(ABC):
    """A Score plugin that can tell, after PreScore, that its normalized score is one and the
    same value on every node this cycle, whatever the nodes: TaintToleration when no node has a
    PreferNoSchedule taint the pod does not tolerate (every raw score 0, which its reverse
    normalization turns into the maximum everywhere). That adds the same to every node's total,
    so it changes neither the best total nor the ties: the runtime adds the weighted value to
    every total without scoring node by node, except where every plugin's scores are shown
    (``--explain``) or kept per node (opportunistic batching), where the plugin runs as usual.
    ``uniform_score`` returns that value (within [MIN_NODE_SCORE, MAX_NODE_SCORE]) or None
    (score node by node); it must be cheap and must not change ``state``."""

    @abstractmethod
    def uniform_score(self, state: CycleState, pod: Pod) -> int | None:
        ...


class VectorizedFilterStatuses(ABC):
    """A Filter plugin that gives its *statuses* for many nodes at once, for the diagnosis of
    a pod that fits nowhere (every node needs its reason then, and there may be thousands).

    ``filter_statuses(state, pod, snapshot, rows)`` returns ``(which, distinct)``: ``distinct``
    the distinct statuses, ``which`` an int array aligned with ``rows`` indexing into it (-1
    where the node passes), each status equal (code and reasons, in order) to what ``filter``
    returns on that node; or None to decline (``filter`` then runs per node)."""

    @abstractmethod
    def filter_statuses(self, state: CycleState, pod: Pod, snapshot: Snapshot,
                        rows: np.ndarray) -> tuple[np.ndarray, list[Status]] | None:
        ...


class SignFragment(NamedTuple):
    """One part of a pod's signature: ``key`` names what ``value`` is (a signer name of
    ``framework/signers.py`` where upstream has one); ``value`` is hashable and compared with
    ``==``. Plugins that give the same key must give equal values for a pod (else the pod is
    not signed)."""

    key: str
    value: Hashable


class SignPlugin(ABC):
    """A PreFilter/Filter/PreScore/Score plugin that can sign pods (see the module docstring).

    ``sign_pod(pod)`` returns ``(fragments, None)`` -- the parts of the pod this plugin's
    answers depend on, possibly none -- or ``(None, status)`` with a non-success status when it
    cannot promise that pods with equal fragments get equal answers. It is called once per
    scheduling cycle, after PreFilter, and must be cheap (cache derived values on the pod with
    ``pod.cached()``)."""

    @abstractmethod
    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        ...


class ExplainedPostFilter(ABC):
    """A PostFilter plugin whose last decision ``ksched simulate --explain`` can show:
    ``last_decision`` is None or has ``to_dict()``."""

    @property
    @abstractmethod
    def last_decision(self) -> Any:
        ...


class FastPath(enum.Enum):
    """How the runtime runs a Filter or Score plugin (chosen once per profile)."""

    CACHED = "cached"  # RowLocal: results over all rows kept across cycles, changed rows recomputed
    VECTOR = "vector"  # VectorizedFilter / VectorizedScore over the candidate rows
    NODE = "node"  # the per-node reference form


class ScorePluginForm(NamedTuple):
    """A Score plugin as the runtime runs it: its fast path, its normalization (None without
    ScoreExtensions), its weight, and whether its scores' range is checked (out-of-tree
    plugins; in-tree plugins' ranges are proven by their tests)."""

    plugin: ScorePlugin
    form: FastPath
    normalize: Any
    weight: int
    check_range: bool
