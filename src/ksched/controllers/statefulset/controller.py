"""The StatefulSet controller (upstream's ``pkg/controller/statefulset/stateful_set.go``): watches
StatefulSets and pods, adopts orphaned revisions and claims the pods named after the set that
its selector matches, then runs the update algorithm (:mod:`.control`).

Divergences: no periodic resync; a set with ``minReadySeconds`` re-queues itself for the moment
its next ready pod turns available (upstream: after ``minReadySeconds``).
"""

from __future__ import annotations

from typing import Any

from ksched.api.apps import StatefulSet
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.controller_utils import (
    ControllerRefManager,
    available_at,
    is_pod_available,
    is_pod_ready,
)
from ksched.controllers.podupdates import unowned_pod_update
from ksched.controllers.statefulset.control import StatefulSetControl
from ksched.controllers.statefulset.pod_control import StatefulPodControl
from ksched.controllers.statefulset.utils import is_member_of

__all__ = ["StatefulSetController"]


def _target(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _ref_key(ref: Any) -> tuple[str, str, str] | None:
    return None if ref is None else (ref.kind, ref.name, ref.uid)


class StatefulSetController(Controller):
    """Keys are ``namespace/name`` of StatefulSets."""

    name = "statefulset"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.set_informer = informers.informer("StatefulSet")
        self.pod_informer = informers.informer("Pod")
        revisions = informers.informer("ControllerRevision")
        claims = informers.informer("PersistentVolumeClaim")
        self.recorder = EventRecorder(client, clock, component="statefulset-controller")
        self.control = StatefulSetControl(client, clock, StatefulPodControl(client, self.recorder, claims), revisions)
        self.set_informer.add_handler(EventHandler(self._enqueue, lambda old, new: self._enqueue(new),
                                                   self._enqueue))
        self.pod_informer.add_handler(EventHandler(self._pod_added, self._pod_updated, self._pod_deleted,
                                                    skip_update=unowned_pod_update))

    # ---- events ---------------------------------------------------------------------------

    def _enqueue(self, s: Any) -> None:
        self.queue.add(_target(s).key)

    def _resolve(self, namespace: str, ref: Any) -> StatefulSet | None:
        if ref is None or ref.kind != "StatefulSet":
            return None
        s = self.set_informer.get(f"{namespace}/{ref.name}")
        if not isinstance(s, StatefulSet) or s.uid != ref.uid:
            return None
        return s

    def _sets_for(self, pod: Pod) -> list[StatefulSet]:
        return [s for s in self.set_informer.indexer.by_index("namespace", pod.namespace)
                if isinstance(s, StatefulSet) and not s.selector.is_empty() and s.selector.matches(pod.labels)]

    def _pod_added(self, pod: Pod) -> None:
        if pod.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        ref = pod.controller_ref()
        if ref is not None:
            s = self._resolve(pod.namespace, ref)
            if s is not None:
                self.queue.add(s.key)
            return
        for s in self._sets_for(pod):
            self.queue.add(s.key)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.resource_version == new.resource_version:
            return
        cur_ref, old_ref = new.controller_ref(), old.controller_ref()
        ref_changed = _ref_key(cur_ref) != _ref_key(old_ref)
        if ref_changed and old_ref is not None:
            s = self._resolve(old.namespace, old_ref)
            if s is not None:
                self.queue.add(s.key)
        if cur_ref is not None:
            s = self._resolve(new.namespace, cur_ref)
            if s is None:
                return
            self.queue.add(s.key)
            if not is_pod_ready(old) and is_pod_ready(new) and s.min_ready_seconds > 0:
                self.queue.add_after(s.key, s.min_ready_seconds + 1.0)
            return
        if old.labels != new.labels or ref_changed:
            for s in self._sets_for(new):
                self.queue.add(s.key)

    def _pod_deleted(self, obj: Any) -> None:
        pod = _target(obj)
        s = self._resolve(pod.namespace, pod.controller_ref())
        if s is not None:
            self.queue.add(s.key)

    # ---- sync -----------------------------------------------------------------------------

    def sync(self, key: Any) -> None:
        s = self.set_informer.get(key)
        if not isinstance(s, StatefulSet):
            return

        def fresh() -> StatefulSet:
            return self.client.get("StatefulSet", s.namespace, s.name)  # type: ignore[no-any-return]

        # Adopt orphaned revisions the selector matches (adoptOrphanRevisions).
        orphans = [r for r in self.control.list_revisions(s) if r.controller_ref() is None]
        if orphans:
            _, errors = ControllerRefManager(self.client, s, s.selector, fresh).claim(orphans)
            if errors:
                raise errors[0]
        pods = sorted((p for p in self.pod_informer.indexer.by_index("namespace", s.namespace)
                       if isinstance(p, Pod)), key=lambda p: p.name)
        claimed, errors = ControllerRefManager(self.client, s, s.selector, fresh).claim(
            pods, (lambda p: is_member_of(s, p),))
        if errors:
            raise errors[0]
        status = self.control.update(s, [p for p in claimed if isinstance(p, Pod)])
        if s.min_ready_seconds > 0 and int(status.get("availableReplicas") or 0) != s.replicas:
            now = self.clock.now()
            due = [t for p in claimed if isinstance(p, Pod) and is_pod_ready(p)
                   and not is_pod_available(p, s.min_ready_seconds, now)
                   and (t := available_at(p, s.min_ready_seconds)) is not None]
            if due:
                self.queue.add_after(key, max(0.0, min(due) - now) + 0.001)


