"""The ReplicaSet controller (upstream's ``pkg/controller/replicaset/replica_set.go`` and
``replica_set_utils.go``): keeps ``spec.replicas`` pods of each ReplicaSet, creating them from its
template (``generateName: <rs>-``, a controller reference) in slow-start batches of at most 500,
deleting the surplus in ``ActivePodsWithRanks`` order (pods of the same Deployment on the same
node first), adopting orphans its selector matches and releasing pods it no longer matches; and
its status: replicas, fully labeled, ready and available (``minReadySeconds`` on the cluster's
clock), terminating replicas, the ``ReplicaFailure`` condition, ``observedGeneration``.

Expectations keep a sync from acting on a cache that has not yet seen the controller's own
creations and deletions (the informers are delivered between syncs).

Divergences: no periodic resync; a pod turning ready re-syncs its ReplicaSet after
``minReadySeconds`` + 1 s as upstream, and the sync re-queues itself for the moment the next
ready pod turns available instead of after ``minReadySeconds`` (on a virtual clock a wait of
exactly ``minReadySeconds`` lands on the boundary, which does not count as available yet).
"""

from __future__ import annotations

import logging
from typing import Any

from ksched.api.apps import ReplicaSet
from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.controller_utils import (
    SLOW_START_INITIAL_BATCH_SIZE,
    ControllerRefManager,
    Expectations,
    PodControl,
    active_pods_ranked,
    add_owner_index,
    available_at,
    controller_ref,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    is_pod_terminating,
    owned_pods,
    slow_start_batch,
)
from ksched.controllers.podupdates import unowned_pod_update

__all__ = ["BURST_REPLICAS", "ReplicaSetController", "calculate_status"]

log = logging.getLogger(__name__)

# At most this many creations or deletions per sync (--replicaset-burst... BurstReplicas).
BURST_REPLICAS = 500
REPLICA_FAILURE = "ReplicaFailure"


def _target(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def calculate_status(rs: ReplicaSet, active: list[Pod], terminating: list[Pod], manage_error: ApiError | None,
                     now: float) -> dict[str, Any]:
    """The status the pods give the ReplicaSet (``calculateStatus``); observedGeneration is set
    when it is written."""
    template_labels = rs.template_labels
    fully_labeled = ready = available = 0
    for p in active:
        if all(p.labels.get(k) == v for k, v in template_labels.items()):
            fully_labeled += 1
        if is_pod_ready(p):
            ready += 1
            if is_pod_available(p, rs.min_ready_seconds, now):
                available += 1
    conds = [c for c in rs.conditions if isinstance(c, dict)]
    failure = next((c for c in conds if c.get("type") == REPLICA_FAILURE), None)
    if manage_error is not None and failure is None:
        reason = "FailedDelete" if len(active) > rs.replicas else "FailedCreate"
        conds.append({"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": format_time(now),
                      "reason": reason, "message": manage_error.message})
    elif manage_error is None and failure is not None:
        conds = [c for c in conds if c.get("type") != REPLICA_FAILURE]
    status: dict[str, Any] = {"replicas": len(active)}
    for key, n in (("fullyLabeledReplicas", fully_labeled), ("readyReplicas", ready),
                   ("availableReplicas", available)):
        if n:
            status[key] = n
    status["terminatingReplicas"] = len(terminating)
    if rs.observed_generation:
        status["observedGeneration"] = rs.observed_generation
    if conds:
        status["conditions"] = conds
    return status


class ReplicaSetController(Controller):
    """Keys are ``namespace/name`` of ReplicaSets."""

    name = "replicaset"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.rs_informer = informers.informer("ReplicaSet")
        self.pod_informer = informers.informer("Pod")
        add_owner_index(self.pod_informer)
        self.recorder = EventRecorder(client, clock, component="replicaset-controller")
        self.pod_control = PodControl(client, self.recorder)
        self.expectations = Expectations(clock)
        self.rs_informer.add_handler(EventHandler(self._enqueue, lambda old, new: self._enqueue(new),
                                                  self._rs_deleted))
        self.pod_informer.add_handler(EventHandler(self._pod_added, self._pod_updated, self._pod_deleted,
                                                    skip_update=unowned_pod_update))

    # ---- events ---------------------------------------------------------------------------

    def _enqueue(self, rs: Any) -> None:
        self.queue.add(_target(rs).key)

    def _rs_deleted(self, obj: Any) -> None:
        rs = _target(obj)
        self.expectations.delete(rs.key)
        self.queue.add(rs.key)

    def _resolve(self, namespace: str, ref: Any) -> ReplicaSet | None:
        if ref is None or ref.kind != "ReplicaSet":
            return None
        rs = self.rs_informer.get(f"{namespace}/{ref.name}")
        if not isinstance(rs, ReplicaSet) or rs.uid != ref.uid:
            return None
        return rs

    def _replica_sets_for(self, pod: Pod) -> list[ReplicaSet]:
        """The ReplicaSets whose selector matches an orphan (``GetPodReplicaSets``)."""
        out = []
        for rs in self.rs_informer.indexer.by_index("namespace", pod.namespace):
            if isinstance(rs, ReplicaSet) and not rs.selector.is_empty() and rs.selector.matches(pod.labels):
                out.append(rs)
        return out

    def _pod_added(self, pod: Pod) -> None:
        if pod.deletion_timestamp is not None:
            # A pod that shows up already being deleted (a restart, a relist): not a creation.
            self._pod_deleted(pod)
            return
        ref = pod.controller_ref()
        if ref is not None:
            rs = self._resolve(pod.namespace, ref)
            if rs is not None:
                self.expectations.creation_observed(rs.key)
                self.queue.add(rs.key)
            return
        for rs in self._replica_sets_for(pod):
            self.queue.add(rs.key)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.resource_version == new.resource_version:
            return
        labels_changed = old.labels != new.labels
        if new.deletion_timestamp is not None:
            # Deleted gracefully: tell the owner now rather than when the pod is gone.
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        cur_ref, old_ref = new.controller_ref(), old.controller_ref()
        ref_changed = _ref_key(cur_ref) != _ref_key(old_ref)
        if ref_changed and old_ref is not None:
            rs = self._resolve(old.namespace, old_ref)
            if rs is not None:
                self.queue.add(rs.key)
        if cur_ref is not None:
            rs = self._resolve(new.namespace, cur_ref)
            if rs is None:
                return
            self.queue.add(rs.key)
            if not is_pod_ready(old) and is_pod_ready(new) and rs.min_ready_seconds > 0:
                self.queue.add_after(rs.key, rs.min_ready_seconds + 1.0)
            return
        if labels_changed or ref_changed:
            for rs in self._replica_sets_for(new):
                self.queue.add(rs.key)

    def _pod_deleted(self, obj: Any) -> None:
        pod = _target(obj)
        ref = pod.controller_ref()
        rs = self._resolve(pod.namespace, ref)
        if rs is None:
            return
        self.expectations.deletion_observed(rs.key, pod.key)
        self.queue.add(rs.key)

    # ---- sync -----------------------------------------------------------------------------

    def sync(self, key: Any) -> None:
        rs = self.rs_informer.get(key)
        if not isinstance(rs, ReplicaSet):
            self.expectations.delete(key)
            return
        needs_sync = self.expectations.satisfied(key)
        all_pods = owned_pods(self.pod_informer, rs)
        manager = ControllerRefManager(self.client, rs, rs.selector,
                                       lambda: self.client.get("ReplicaSet", rs.namespace, rs.name))
        claimed, errors = manager.claim([p for p in all_pods if is_pod_active(p)])
        if errors:
            raise errors[0]
        active = [p for p in claimed if isinstance(p, Pod)]
        terminating = [p for p in all_pods if is_pod_terminating(p) and _controlled_by(p, rs)
                       and rs.selector.matches(p.labels)]
        manage_error: ApiError | None = None
        if needs_sync and rs.deletion_timestamp is None:
            manage_error = self._manage_replicas(active, rs)
        now = self.clock.now()
        status = calculate_status(rs, active, terminating, manage_error, now)
        self._update_status(rs, status)
        if manage_error is not None:
            raise manage_error
        if rs.min_ready_seconds > 0:
            due = [t for p in active if is_pod_ready(p) and not is_pod_available(p, rs.min_ready_seconds, now)
                   and (t := available_at(p, rs.min_ready_seconds)) is not None]
            if due:
                self.queue.add_after(key, max(0.0, min(due) - now) + 0.001)

    def _manage_replicas(self, active: list[Pod], rs: ReplicaSet) -> ApiError | None:
        diff = len(active) - rs.replicas
        key = rs.key
        if diff < 0:
            n = min(-diff, BURST_REPLICAS)
            # Expect the creations first: the informer may see a pod before create returns.
            self.expectations.expect(key, adds=n)
            ref = controller_ref(rs)
            successes, err = slow_start_batch(
                n, SLOW_START_INITIAL_BATCH_SIZE, lambda _: self.pod_control.create_pod(rs.template, rs, ref))
            if n - successes > 0:
                self.expectations.lower(key, adds=n - successes)
            return err
        if diff > 0:
            n = min(diff, BURST_REPLICAS)
            doomed = active_pods_ranked(active, self._related_pods(rs), self.clock.now())[:n] \
                if n < len(active) else list(active)
            self.expectations.expect(key, deletes=[p.key for p in doomed])
            first: ApiError | None = None
            for p in doomed:
                try:
                    self.pod_control.delete_pod(p.namespace, p.name, rs)
                except ApiError as e:
                    # The deletion will not be observed: expect it no more.
                    self.expectations.deletion_observed(key, p.key)
                    if not isinstance(e, NotFound) and first is None:
                        first = e
            return first
        return None

    def _related_pods(self, rs: ReplicaSet) -> list[Pod]:
        """Pods of every ReplicaSet with the same controller as ``rs`` (``getIndirectlyRelatedPods``)."""
        ref = rs.controller_ref()
        if ref is None:
            siblings: list[ReplicaSet] = [rs]
        else:
            siblings = [o for o in self.rs_informer.indexer.by_index("namespace", rs.namespace)
                        if isinstance(o, ReplicaSet) and (r := o.controller_ref()) is not None and r.uid == ref.uid]
        out: list[Pod] = []
        for s in siblings:
            out.extend(owned_pods(self.pod_informer, s, include_orphans=False))
        return out

    def _update_status(self, rs: ReplicaSet, status: dict[str, Any]) -> None:
        """Write the status when it changed or the generation is new (``updateReplicaSetStatus``)."""
        old = rs.status
        same = all(old.get(k) == status.get(k) for k in ("replicas", "fullyLabeledReplicas", "readyReplicas",
                                                         "availableReplicas", "terminatingReplicas",
                                                         "conditions"))
        if same and rs.generation == rs.observed_generation:
            return
        status = dict(status)
        if rs.generation:
            status["observedGeneration"] = rs.generation
        raw = dict(rs.raw)
        raw["status"] = status
        try:
            self.client.update_status(raw)
        except NotFound:
            return
        except ApiError:
            # Stale: retry once on the latest version (statusUpdateRetries).
            fresh = self.client.get("ReplicaSet", rs.namespace, rs.name)
            raw = dict(fresh.raw)
            raw["status"] = status
            self.client.update_status(raw)


def _ref_key(ref: Any) -> tuple[str, str, str] | None:
    return None if ref is None else (ref.kind, ref.name, ref.uid)


def _controlled_by(obj: Any, owner: Any) -> bool:
    ref = obj.controller_ref()
    return ref is not None and ref.uid == owner.uid
