"""Informer event handlers: assigned pods go to the cache, unscheduled pods of our profiles go
to the queue, nodes and storage objects go to the cache and wake the pods they may help
(upstream's eventhandlers.go).

With a pod filter (a scheduler instance that takes only the pods dispatched to it), the
unscheduled pods of our profiles dispatched elsewhere are still ours as far as nominations go:
their ``status.nominatedNodeName`` is kept in the nominator, so the room another instance's
preemption made is reserved here too, as one scheduler reserves it for a pod in its queue.

Divergence: upstream registers the assigned-pod and unscheduled-pod handlers as two filtered
handlers; here (``COMBINED_POD_HANDLERS``) they are one handler that decides both filters from one
read of the pod and makes the same calls in the same order (the filtered pair is the reference);
its updates of a pod's binding and status writes take short paths (``FAST_POD_UPDATES``, the
combined handler's general path the reference)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ksched.api.node import Node
from ksched.api.pod import PHASE_FAILED, PHASE_SUCCEEDED, Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler
from ksched.scheduler.cache.cache import Cache, CacheError
from ksched.scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    ActionType,
    ClusterEvent,
    EventResource,
)
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.queue.scheduling_queue import PriorityQueue

__all__ = ["COMBINED_POD_HANDLERS", "add_all_event_handlers", "node_update_events"]

log = logging.getLogger(__name__)

# The scheduler's two Pod handlers (assigned pods -> cache, unscheduled pods -> queue) registered
# as one unfiltered handler that reads each pod's node, phase and scheduler name once for both
# filters and calls what the filtered pair would call, in the same order; False: the two
# filtered handlers (the reference, upstream's pair of FilteringResourceEventHandlers). Read
# when the handlers are added.
COMBINED_POD_HANDLERS = True

# The combined handler's update of a Pod pair (``COMBINED_POD_HANDLERS``) taking the two updates
# every pod sees -- its binding (no node -> a node) and its status writes (a node both times) --
# by their own short paths: the phase read for terminality, the unscheduled-pod test not made for
# a pod on a node, an assigned pod's status write known to be ``UPDATE_POD_OTHER`` without
# ``_assigned_update_action``, and a profile without waiting pods not asked to reject one (it
# answers False, nothing else). False: the combined handler's general path for every update (the
# reference). Read when the handlers are added.
FAST_POD_UPDATES = True

_TERMINAL_PHASES = (PHASE_SUCCEEDED, PHASE_FAILED)  # Pod.is_terminal's


def _unwrap(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def node_update_events(old: Node, new: Node) -> list[ClusterEvent]:
    """Which scheduling-relevant properties of a node changed (upstream's
    nodeSchedulingPropertiesChange)."""
    evs: list[ClusterEvent] = []
    if old.unschedulable != new.unschedulable or old.taints != new.taints:
        evs.append(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "UpdateNodeTaint"))
    if old.allocatable != new.allocatable:
        evs.append(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE, "UpdateNodeAllocatable"))
    if old.labels != new.labels:
        evs.append(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL, "UpdateNodeLabel"))
    if _ready_changed(old, new):
        evs.append(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_CONDITION, "UpdateNodeCondition"))
    if old.annotations != new.annotations:
        evs.append(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ANNOTATION, "UpdateNodeAnnotation"))
    return evs


def _ready_changed(old: Node, new: Node) -> bool:
    def conds(n: Node) -> dict[str, str]:
        return {c.get("type", ""): c.get("status", "") for c in n.conditions}

    return conds(old) != conds(new)


class EventTarget(Protocol):
    """What the handlers feed: the Scheduler's cache, queue and profiles, and its choices of
    which pods and nodes are its own."""

    informers: Any
    cache: Cache
    queue: PriorityQueue
    profiles: dict[str, Framework]
    node_filter: Callable[[Any], bool] | None

    def responsible_for(self, pod: Pod) -> bool: ...

    def watches(self, kind: str) -> bool: ...


def add_all_event_handlers(sched: EventTarget) -> None:
    f = sched.informers
    pods = f.informer("Pod")
    nodes = f.informer("Node")

    def assigned(p: Any) -> bool:
        if type(p) is not Pod:  # (a Pod, nearly always: no unwrapping then)
            p = _unwrap(p)
            if not isinstance(p, Pod):
                return False
        return bool(p.node_name) and not p.is_terminal

    def unscheduled(p: Any) -> bool:
        """An unscheduled pod of our profiles, whichever instance it is dispatched to."""
        if type(p) is not Pod:
            p = _unwrap(p)
            if not isinstance(p, Pod):
                return False
        return not p.node_name and not p.is_terminal and p.scheduler_name in sched.profiles

    # Scheduled pods -> cache (registered first, as upstream).
    def add_pod_to_cache(pod: Pod) -> None:
        try:
            sched.cache.add_pod(pod)
        except CacheError as e:
            log.error("scheduler cache add_pod failed: %s", e)
        sched.queue.assigned_pod_added(pod, ASSIGNED_POD_ADD)

    def update_pod_in_cache(old: Pod, new: Pod) -> None:
        if old.resource_version == new.resource_version:
            return
        try:
            sched.cache.update_pod(old, new)
        except CacheError as e:
            log.error("scheduler cache update_pod failed: %s", e)
        action = _assigned_update_action(old, new)
        known = _ASSIGNED_POD_UPDATE.get(action)
        if known is None:
            known = _ASSIGNED_POD_UPDATE[action] = (
                ClusterEvent(EventResource.ASSIGNED_POD, action, "AssignedPodUpdate"),
                bool(action & ActionType.UPDATE_POD_SCALE_DOWN))
        ev, scale_down = known
        if scale_down:
            sched.queue.move_all_to_active_or_backoff(ev, old, new)
        else:
            sched.queue.assigned_pod_added(new, ev)

    def delete_pod_from_cache(obj: Any) -> None:
        pod = _unwrap(obj)
        try:
            sched.cache.remove_pod(pod)
        except CacheError as e:
            log.error("scheduler cache remove_pod failed: %s", e)
        sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)

    cache_handler = EventHandler(add_pod_to_cache, update_pod_in_cache, delete_pod_from_cache, filter=assigned)

    # Unscheduled pods -> queue (ours) or, dispatched to another instance, only the nominator.
    nominator = sched.queue.nominator

    def nominate_elsewhere(pod: Pod) -> None:
        # Upstream's nominator follows status.nominatedNodeName of the pods in its queue; the
        # pods of our profiles that another instance holds count the same way.
        if pod.nominated_node_name:
            nominator.add(PodInfo(pod))
        else:
            nominator.delete(pod)

    def add_pod_to_queue(pod: Pod) -> None:
        if sched.responsible_for(pod):
            sched.queue.add(pod)
        else:
            nominate_elsewhere(pod)

    def update_pod_in_queue(old: Pod, new: Pod) -> None:
        if old.resource_version == new.resource_version:
            return
        was, now = sched.responsible_for(old), sched.responsible_for(new)
        if not now:
            if was:  # handed to another instance
                delete_pod_from_queue(old)
            nominate_elsewhere(new)
            return
        if not was:  # handed to us: the queue takes over its nomination
            nominator.delete(old)
            sched.queue.add(new)
            return
        # An assumed pod's own status updates (e.g. our condition patch) are not new work.
        if sched.cache.is_assumed(new):
            return
        sched.queue.update(old, new)

    def delete_pod_from_queue(obj: Any) -> None:
        pod = _unwrap(obj)
        sched.queue.delete(pod)
        for fw in sched.profiles.values():
            fw.reject_waiting_pod(pod.uid or pod.key, "", "pod deleted")

    queue_handler = EventHandler(add_pod_to_queue, update_pod_in_queue, delete_pod_from_queue, filter=unscheduled)
    if not COMBINED_POD_HANDLERS:
        pods.add_handler(cache_handler)
        pods.add_handler(queue_handler)
    else:
        # One unfiltered handler doing what the two filtered ones do, in their order: each pod's
        # node, phase and scheduler name read once for both filters.
        def on_add(pod: Any) -> None:
            if type(pod) is not Pod:
                cache_handler.add(pod)
                queue_handler.add(pod)
                return
            if pod.is_terminal:
                return
            if pod.node_name:
                add_pod_to_cache(pod)
            elif pod.scheduler_name in sched.profiles:
                add_pod_to_queue(pod)

        def on_update(old: Any, new: Any) -> None:
            if type(old) is not Pod or type(new) is not Pod:
                cache_handler.update(old, new)
                queue_handler.update(old, new)
                return
            old_live, new_live = not old.is_terminal, not new.is_terminal
            old_node, new_node = old.node_name, new.node_name
            # assigned(): a node and not terminal.
            was = bool(old_node) and old_live
            now = bool(new_node) and new_live
            if was:
                if now:
                    update_pod_in_cache(old, new)
                else:
                    delete_pod_from_cache(old)
            elif now:
                add_pod_to_cache(new)
            # unscheduled(): no node, not terminal, one of our profiles.
            was = not old_node and old_live and old.scheduler_name in sched.profiles
            now = not new_node and new_live and new.scheduler_name in sched.profiles
            if was:
                if now:
                    update_pod_in_queue(old, new)
                else:
                    delete_pod_from_queue(old)
            elif now:
                add_pod_to_queue(new)

        def on_delete(obj: Any) -> None:
            cache_handler.delete(obj)
            queue_handler.delete(obj)

        def update_pod_in_cache_fast(old: Pod, new: Pod) -> None:
            """``update_pod_in_cache`` of two Pods."""
            if old.resource_version == new.resource_version:
                return
            try:
                sched.cache.update_pod(old, new)
            except CacheError as e:
                log.error("scheduler cache update_pod failed: %s", e)
            if old.labels is new.labels and old.containers is new.containers \
                    and old.init_containers is new.init_containers and old.overhead is new.overhead \
                    and old.pod_level_requests is new.pod_level_requests:
                # _assigned_update_action's first answer (a status write), without the call.
                action = ActionType.UPDATE_POD_OTHER
            else:
                action = _assigned_update_action(old, new)
            known = _ASSIGNED_POD_UPDATE.get(action)
            if known is None:
                known = _ASSIGNED_POD_UPDATE[action] = (
                    ClusterEvent(EventResource.ASSIGNED_POD, action, "AssignedPodUpdate"),
                    bool(action & ActionType.UPDATE_POD_SCALE_DOWN))
            ev, scale_down = known
            if scale_down:
                sched.queue.move_all_to_active_or_backoff(ev, old, new)
            else:
                sched.queue.assigned_pod_added(new, ev)

        def on_update_fast(old: Any, new: Any) -> None:
            """``on_update``: the same calls in the same order."""
            if type(old) is not Pod or type(new) is not Pod:
                on_update(old, new)
                return
            new_node = new.node_name
            if not new_node:
                on_update(old, new)
                return
            # On a node now: unscheduled(new) is false, and so is the queue's add.
            terminal = _TERMINAL_PHASES
            new_live = new.phase not in terminal
            if old.node_name:
                # A node both times (a status write): neither is unscheduled, only the cache's part.
                if old.phase not in terminal:
                    if new_live:
                        update_pod_in_cache_fast(old, new)
                    else:
                        delete_pod_from_cache(old)
                elif new_live:
                    add_pod_to_cache(new)
                return
            # Bound (no node before): assigned(old) is false.
            if new_live:
                add_pod_to_cache(new)
            if old.phase not in terminal and old.scheduler_name in sched.profiles:
                # delete_pod_from_queue(old), for a Pod.
                sched.queue.delete(old)
                for fw in sched.profiles.values():
                    if fw.waiting_pods:
                        fw.reject_waiting_pod(old.uid or old.key, "", "pod deleted")

        pods.add_handler(EventHandler(on_add, on_update_fast if FAST_POD_UPDATES else on_update, on_delete))

    # Nodes -> cache, and wake pods a node change may help.
    def add_node(node: Node) -> None:
        sched.cache.add_node(node)
        sched.queue.move_all_to_active_or_backoff(NODE_ADD, None, node)

    def update_node(old: Node, new: Node) -> None:
        sched.cache.update_node(old, new)
        for ev in node_update_events(old, new):
            sched.queue.move_all_to_active_or_backoff(ev, old, new)

    def delete_node(obj: Any) -> None:
        node = _unwrap(obj)
        try:
            sched.cache.remove_node(node)
        except CacheError as e:
            log.error("scheduler cache remove_node failed: %s", e)
        sched.queue.move_all_to_active_or_backoff(NODE_DELETE, node, None)

    # With a node filter (an instance owning a partition of the cluster), nodes outside it are
    # invisible: a node leaving the partition is a deletion, entering it an addition.
    nodes.add_handler(EventHandler(add_node, update_node, delete_node, filter=sched.node_filter))

    # Storage, DRA objects and namespaces: only events (plugins read them through their own informers).
    for kind, resource in (("PersistentVolume", EventResource.PERSISTENT_VOLUME),
                           ("PersistentVolumeClaim", EventResource.PERSISTENT_VOLUME_CLAIM),
                           ("StorageClass", EventResource.STORAGE_CLASS),
                           ("CSINode", EventResource.CSI_NODE),
                           ("ResourceClaim", EventResource.RESOURCE_CLAIM),
                           ("ResourceSlice", EventResource.RESOURCE_SLICE),
                           ("DeviceClass", EventResource.DEVICE_CLASS)):
        if not sched.watches(kind):
            continue
        inf = f.informer(kind)
        inf.add_handler(EventHandler(
            lambda o, r=resource: sched.queue.move_all_to_active_or_backoff(
                ClusterEvent(r, ActionType.ADD, f"{r}Add"), None, o),
            lambda a, b, r=resource: sched.queue.move_all_to_active_or_backoff(
                ClusterEvent(r, ActionType.UPDATE, f"{r}Update"), a, b),
            lambda o, r=resource: sched.queue.move_all_to_active_or_backoff(
                ClusterEvent(r, ActionType.DELETE, f"{r}Delete"), _unwrap(o), None),
        ))


# The ClusterEvent of an assigned pod's update, per action (immutable: one object each), and
# whether the action scales the pod down (a Flag's ``&`` costs about a microsecond).
_ASSIGNED_POD_UPDATE: dict[ActionType, tuple[ClusterEvent, bool]] = {}


def _same_requests_source(old: Pod, new: Pod) -> bool:
    """The very parsed parts ``pod_requests`` reads (a status write shares them:
    ``Pod.with_status``), so the requests are equal without adding them up."""
    return (old.containers is new.containers and old.init_containers is new.init_containers
            and old.overhead is new.overhead and old.pod_level_requests is new.pod_level_requests)


def _assigned_update_action(old: Pod, new: Pod, shortcut: bool = True) -> ActionType:
    """What an assigned pod's update changed (upstream's ``PodSchedulingPropertiesChange`` as
    far as assigned pods go). ``shortcut=False``: the requests are always compared (the
    reference for a status write sharing the parsed spec)."""
    if shortcut and old.labels is new.labels and _same_requests_source(old, new):
        return ActionType.UPDATE_POD_OTHER  # (a status write: nothing below can change)
    from ksched.api.resources import pod_requests
    action = ActionType.NONE
    if old.labels is not new.labels and old.labels != new.labels:
        action |= ActionType.UPDATE_POD_LABEL
    if not (shortcut and _same_requests_source(old, new)):
        a = pod_requests(old)
        b = pod_requests(new)
        if any(b.get(k, 0) < v for k, v in a.items()):
            action |= ActionType.UPDATE_POD_SCALE_DOWN
    if action == ActionType.NONE:
        action = ActionType.UPDATE_POD_OTHER
    return action
