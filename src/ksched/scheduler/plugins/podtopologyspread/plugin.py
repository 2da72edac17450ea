"""PodTopologySpread: spread matching pods evenly over topology domains (upstream's
``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go``). The package follows the
1.35/1.36 behaviour: plugin.go and common.go of the ``k8s.io/kube-scheduler/framework`` era with
SignPlugin and queueing hints, scoring.go with per-node hostname counting, filtering.go; feature
gates at their 1.36 values.

The plugin class, its args (``defaultingType``, ``defaultConstraints``; system defaulting), the
pod's constraints (its own or the defaults, ``getConstraints``), the listers the default
selector reads (Services, and ReplicationControllers, ReplicaSets and StatefulSets where ksched
serves those kinds: the plugin asks the handle's informer factory for them, as upstream's ``New``
does), and the **EnqueueExtensions** with upstream's queueing hints (pod add / label
update / toleration update / delete; node add / delete / label update / taint update). The
extension points live by concern, as upstream's files:

- ``filtering.py``: PreFilter, PreFilterExtensions (``add_pod``/``remove_pod``) and Filter;
- ``scoring.py``: PreScore, Score and NormalizeScore;
- ``common.py``: the parsed constraints, selectors, inclusion policies, default constraints;
- ``_index.py``: the columnar domain ids and matching-pod counts both of them read (ksched's).

Divergences from upstream, knowingly (the others are listed where they apply):

- Upstream's SignPlugin (opportunistic batching) has no counterpart in ksched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ksched.api.kinds import KINDS
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import EnqueueExtensions, SignFragment, SignPlugin
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.plugins.podtopologyspread._index import _RowCache
from ksched.scheduler.plugins.podtopologyspread.common import (
    _LISTER_KINDS,
    DO_NOT_SCHEDULE,
    LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
    NAME,
    SCHEDULE_ANYWAY,
    _build_default_constraints,
    _Constraint,
    _default_selector,
    _node_has_keys,
    _pod_constraints,
    _Selector,
    _tolerations_key,
)
from ksched.scheduler.plugins.podtopologyspread.filtering import _Filtering
from ksched.scheduler.plugins.podtopologyspread.scoring import _Scoring

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
]

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

# Default constraints kept per (action, namespace, labels, controller), at most this many.
_MAX_DEFAULTS = 4096


class PodTopologySpread(_Filtering, _Scoring, EnqueueExtensions, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        # Bumped by any change the listers see: default constraints computed for a pod are kept
        # until then, per (action, namespace, labels, controller): what the default selector
        # reads of the pod, so every replica of a template shares them.
        self._listers_generation = 0
        self._defaults: dict[tuple[Any, ...], tuple[_Constraint, ...]] = {}
        self._defaults_generation = 0
        self._listers_tracked = False
        self._listers_seen = False
        self._listers_checked_at = -2
        self._take_listers()
        a = self.args
        defaulting = a.get("defaultingType") or "System"
        if defaulting not in ("System", "List"):
            raise ValueError(f'defaultingType: Unsupported value: "{defaulting}": supported values: "List", "System"')
        self.system_defaulted = defaulting == "System"
        raw_defaults: Sequence[dict[str, Any]] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(a.get("defaultConstraints") or ()))
        self.default_constraints: tuple[dict[str, Any], ...] = tuple(raw_defaults)
        self._rows = _RowCache(self._incremental_counts)
        self._missing_label = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH,
                                     plugin=self.name)
        self._skew = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=self.name)
        self._unsignable_own = Status(Code.UNSCHEDULABLE, "pods with topology constraints are not signable")
        self._unsignable_defaults = Status(Code.UNSCHEDULABLE,
                                           "pods with default topology constraints are not signable")

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """Spreading depends on other pods across the cluster: a pod with constraints, its own
        or the defaults (system defaulting has some), is not signable; without any the plugin
        has nothing to say (as upstream)."""
        if pod.topology_spread_constraints:
            return None, self._unsignable_own
        if self.default_constraints:
            return None, self._unsignable_defaults
        return None, None

    # ------------------------------------------------------------ constraints

    def get_constraints(self, pod: Pod, action: str) -> tuple[_Constraint, ...]:
        """The pod's constraints for ``action`` or, when it has none at all, the default ones."""
        if pod.topology_spread_constraints:
            return _pod_constraints(pod, action)
        if not self.default_constraints or not self._have_listers():
            return ()  # without listers the default selector is empty (upstream's DefaultSelector)
        if not self._listers_tracked:
            return _build_default_constraints(self.default_constraints, pod, action, self.default_selector)
        # The default selector reads the pod's namespace, labels and controller reference, and
        # the listers: kept per those until a lister changes.
        if self._defaults_generation != self._listers_generation:
            self._defaults.clear()
            self._defaults_generation = self._listers_generation
        ref = pod.controller_ref()
        key = (action, pod.namespace, tuple(pod.labels.items()),
               (ref.api_version, ref.kind, ref.name) if ref is not None else None)
        try:
            got = self._defaults.get(key)
        except TypeError:  # a label value that is not a string (validation reports it elsewhere)
            return _build_default_constraints(self.default_constraints, pod, action, self.default_selector)
        if got is None:
            got = _build_default_constraints(self.default_constraints, pod, action, self.default_selector)
            if len(self._defaults) >= _MAX_DEFAULTS:
                self._defaults.clear()
            self._defaults[key] = got
        return got

    def _take_listers(self) -> None:
        """Upstream's New takes the Service, ReplicationController, ReplicaSet and StatefulSet
        listers from the shared informer factory: the informers of the kinds ksched serves are
        made here, and their changes tracked."""
        factory = getattr(self.handle, "informers", None) if self.handle is not None else None
        make = getattr(factory, "informer", None)
        if make is None:
            return
        tracked = True
        for kind in _LISTER_KINDS:
            if kind not in KINDS:
                continue
            inf = make(kind)
            add_handler = getattr(inf, "add_handler", None)
            if add_handler is None:
                tracked = False
                continue
            add_handler(EventHandler(self._listers_changed, lambda old, new: self._listers_changed(new),
                                     self._listers_changed))
        self._listers_tracked = tracked

    def _listers_changed(self, obj: Any) -> None:
        self._listers_generation += 1

    def _have_listers(self) -> bool:
        """Whether any Service/ReplicaSet/StatefulSet/ReplicationController informer exists (they
        only ever get added, so a True answer is remembered)."""
        if self._listers_seen:
            return True
        factory = getattr(self.handle, "informers", None) if self.handle is not None else None
        infs = getattr(factory, "informers", None)
        size = len(infs) if type(infs) is dict or isinstance(infs, Mapping) else -1
        if size == self._listers_checked_at:
            return False  # no informer was added since we last looked
        self._listers_checked_at = size
        self._listers_seen = any(self._lister(k) is not None for k in _LISTER_KINDS)
        return self._listers_seen

    def _lister(self, kind: str) -> Any:
        factory = getattr(self.handle, "informers", None) if self.handle is not None else None
        infs = getattr(factory, "informers", None)
        if isinstance(infs, Mapping):
            return infs.get(kind)
        return None

    def default_selector(self, pod: Pod) -> _Selector:
        """Upstream's helper.DefaultSelector over this plugin's listers (see ``common.py``)."""
        return _default_selector(pod, self._lister)

    # ------------------------------------------------------------ the snapshot (shared lister)

    def _incremental_counts(self) -> bool:
        """Matching pods from the snapshot's count index (the fast path), or counted again on every
        node (the reference, with the framework's ``vectorize`` off)."""
        return bool(getattr(self.handle, "vectorize", True)) if self.handle is not None else True

    def _snapshot(self) -> Snapshot | None:
        return getattr(self.handle, "snapshot", None) if self.handle is not None else None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = (ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
                       | ActionType.DELETE)
        node_actions = (ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                        | ActionType.UPDATE_NODE_TAINT)
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.POD, pod_actions), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, node_actions),
                                 self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        old, new = _unwrap(old), _unwrap(new)
        if (new is not None and not _involved(new, pod)) or (old is not None and not _involved(old, pod)):
            return QueueingHint.QUEUE_SKIP
        constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        if new is not None and old is not None:
            if (_same_uid(pod, new) and _tolerations_key(new.tolerations) != _tolerations_key(old.tolerations)
                    and any(c.honor_taints for c in constraints)):
                return QueueingHint.QUEUE
            if new.labels == old.labels:
                return QueueingHint.QUEUE_SKIP
            for c in constraints:
                if c.selector.matches(old) != c.selector.matches(new):
                    return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        changed = new if new is not None else old
        if changed is not None and any(c.selector.matches(changed) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        old, new = _unwrap(old), _unwrap(new)
        constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        old_match = old is not None and _node_has_keys(old.labels, constraints)
        new_match = new is not None and _node_has_keys(new.labels, constraints)
        if old is not None and new is not None:
            if old_match != new_match:
                return QueueingHint.QUEUE
            if new_match and (any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key)
                                  for c in constraints) or _taints_key(old) != _taints_key(new)):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        if new is not None:
            return QueueingHint.QUEUE if new_match else QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if old_match else QueueingHint.QUEUE_SKIP


def _unwrap(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _taints_key(node: Node) -> list[tuple[str, str, str, str | None]]:
    return [(t.key, t.value, t.effect, t.time_added) for t in node.taints]


def _same_uid(a: Pod, b: Pod) -> bool:
    return (a.uid or a.key) == (b.uid or b.key)


def _involved(incoming: Pod, pod_with_spreading: Pod) -> bool:
    """Upstream's involvedInTopologySpreading."""
    return _same_uid(incoming, pod_with_spreading) or (
        incoming.node_name != "" and incoming.namespace == pod_with_spreading.namespace)
