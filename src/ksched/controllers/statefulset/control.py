"""The StatefulSet update algorithm (upstream's ``pkg/controller/statefulset/stateful_set_control.go``):
revisions of the set's template (current and update), then per ordinal: failed or succeeded
pods are deleted and re-created under the same name, missing pods created -- with
``OrderedReady`` one at a time, ascending, each waiting for its predecessors to be Running,
Ready and available, with ``Parallel`` all at once --, surplus ordinals deleted from the
highest, one at a time while the others are healthy, and a RollingUpdate deletes the
highest-ordinal pod at or above the partition that is not at the update revision once every
other pod is healthy. The status counts replicas, ready, available, current and updated pods.

Divergence: ``maxUnavailable`` for StatefulSets (MaxUnavailableStatefulSet, off by default in
1.36) is not implemented: a rolling update replaces one pod at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ksched.api.apps import ON_DELETE, PARALLEL, ROLLING_UPDATE, ControllerRevision, StatefulSet
from ksched.api.errors import ApiError, NotFound
from ksched.api.pod import Pod
from ksched.client.informer import SharedInformer
from ksched.clock import Clock
from ksched.controllers.controller_utils import slow_start_batch
from ksched.controllers.history import (
    create_controller_revision,
    equal_revision,
    list_controller_revisions,
    update_revision_number,
)
from ksched.controllers.statefulset.pod_control import StatefulPodControl
from ksched.controllers.statefulset.utils import (
    end_ordinal,
    identity_matches,
    in_ordinal_range,
    is_healthy,
    is_running_and_available,
    is_running_and_ready,
    new_pod,
    new_revision,
    ordinal_of,
    pod_revision,
    revision_template,
    start_ordinal,
    storage_matches,
)

__all__ = ["StatefulSetControl"]

MAX_BATCH_SIZE = 500


@dataclass
class _Replica:
    """An ordinal's pod: the stored one, or the one to create (``created`` False)."""

    pod: Pod
    created: bool
    manifest: dict[str, Any] | None = None


def _run_for_all(n: int, fn: Callable[[int], bool], monotonic: bool) -> tuple[bool, ApiError | None]:
    """``runForAll``: one by one until one blocks or fails (monotonic), else all in slow-start
    batches. Returns (stop here, the error)."""
    if monotonic:
        for i in range(n):
            try:
                if fn(i):
                    return True, None
            except ApiError as e:
                return True, e
        return False, None
    _, err = slow_start_batch(n, 1, fn, max_batch=MAX_BATCH_SIZE)
    return err is not None, err


class StatefulSetControl:
    def __init__(self, client: Any, clock: Clock, pod_control: StatefulPodControl,
                 revisions: SharedInformer) -> None:
        self.client = client
        self.clock = clock
        self.pod_control = pod_control
        self.revisions = revisions

    # ---- revisions ------------------------------------------------------------------------

    def list_revisions(self, s: StatefulSet) -> list[ControllerRevision]:
        return list_controller_revisions(self.revisions, s, s.selector)

    def _revisions(self, s: StatefulSet,
                   revisions: list[ControllerRevision]) -> tuple[ControllerRevision, ControllerRevision, int]:
        """(current, update, collision count) (``getStatefulSetRevisions``): the update revision is
        the set's template, an equal earlier revision renumbered (a rollback) or a new one."""
        collision = s.collision_count or 0
        number = revisions[-1].revision + 1 if revisions else 1
        candidate = ControllerRevision(new_revision(s, number, collision))
        equal = [r for r in revisions if equal_revision(r, candidate)]
        if equal and equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]
        elif equal:
            update = update_revision_number(self.client, equal[-1], number)
        else:
            update, collision = create_controller_revision(self.client, s, candidate.raw, collision)
        current = next((r for r in revisions if r.name == s.current_revision), None) or update
        return current, update, collision

    def _truncate_history(self, s: StatefulSet, pods: list[Pod], revisions: list[ControllerRevision],
                          current: ControllerRevision, update: ControllerRevision) -> None:
        live = {current.name, update.name, *(pod_revision(p) for p in pods)}
        history = [r for r in revisions if r.name not in live]
        excess = len(history) - s.revision_history_limit
        for r in history[:max(0, excess)]:
            try:
                self.client.delete("ControllerRevision", r.namespace, r.name)
            except NotFound:
                pass

    # ---- the update -----------------------------------------------------------------------

    def update(self, s: StatefulSet, pods: list[Pod]) -> dict[str, Any]:
        """One pass of the algorithm; the status written. Raises the pass's first error after the
        status and history are written (``UpdateStatefulSet``)."""
        revisions = self.list_revisions(s)
        current, update, collision = self._revisions(s, revisions)
        status, err = self._update_stateful_set(s, current, update, collision, pods)
        self._write_status(s, status)
        self._truncate_history(s, pods, revisions, current, update)
        if err is not None:
            raise err
        return status

    def _status(self, s: StatefulSet, current: ControllerRevision, update: ControllerRevision, collision: int,
                pods: list[Pod], now: float) -> dict[str, Any]:
        replicas = ready = available = cur = upd = 0
        for p in pods:
            replicas += 1
            if is_running_and_ready(p):
                ready += 1
                if is_running_and_available(p, s.min_ready_seconds, now):
                    available += 1
            if p.deletion_timestamp is None:
                rev = pod_revision(p)
                if rev == current.name:
                    cur += 1
                if rev == update.name:
                    upd += 1
        status: dict[str, Any] = {}
        if s.generation:
            status["observedGeneration"] = s.generation
        status["replicas"] = replicas
        for key, n in (("readyReplicas", ready), ("currentReplicas", cur), ("updatedReplicas", upd)):
            if n:
                status[key] = n
        status["currentRevision"] = current.name
        status["updateRevision"] = update.name
        status["collisionCount"] = collision
        status["availableReplicas"] = available
        return status

    def _update_stateful_set(self, s: StatefulSet, current: ControllerRevision, update: ControllerRevision,
                             collision: int, pods: list[Pod]) -> tuple[dict[str, Any], ApiError | None]:
        now = self.clock.now()
        current_tpl = revision_template(s, current)
        update_tpl = revision_template(s, update)
        start = start_ordinal(s)
        replicas: list[_Replica | None] = [None] * max(0, s.replicas)
        condemned: list[Pod] = []
        for p in pods:
            if in_ordinal_range(p, s):
                replicas[ordinal_of(p) - start] = _Replica(p, True)
            elif ordinal_of(p) >= 0:
                condemned.append(p)
        us = s.spec.get("updateStrategy") or {}
        ru = us.get("rollingUpdate")
        for ordinal in range(start, end_ordinal(s) + 1):
            if replicas[ordinal - start] is None:
                at_current = (s.update_strategy_type == ROLLING_UPDATE and ru is None
                              and ordinal < start + s.current_replicas) or \
                             (ru is not None and ordinal < start + (s.partition or 0))
                manifest = new_pod(s, current_tpl if at_current else update_tpl, ordinal,
                                   current.name if at_current else update.name)
                replicas[ordinal - start] = _Replica(Pod(manifest), False, manifest)
        slots = [r for r in replicas if r is not None]
        condemned.sort(key=ordinal_of, reverse=True)

        def healthy(r: _Replica) -> bool:
            return r.created and is_healthy(r.pod)

        first_unhealthy: Pod | None = next((r.pod for r in slots if not healthy(r)), None)
        if first_unhealthy is None:
            first_unhealthy = next((p for p in reversed(condemned) if not is_healthy(p)), None)

        def status() -> dict[str, Any]:
            return self._status(s, current, update, collision,
                                [r.pod for r in slots if r.created] + condemned, now)

        if s.deletion_timestamp is not None:
            return status(), None
        monotonic = s.pod_management_policy != PARALLEL
        stop, err = _run_for_all(len(slots), lambda i: self._process_replica(s, monotonic, slots[i], now), monotonic)
        if stop or err is not None:
            return status(), err

        def fix_claims(i: int) -> bool:
            if not self.pod_control.claims_match_retention_policy(s, condemned[i]):
                self.pod_control.update_claims_for_retention_policy(s, condemned[i])
            return False

        stop, err = _run_for_all(len(condemned), fix_claims, monotonic)
        if stop or err is not None:
            return status(), err
        stop, err = _run_for_all(
            len(condemned), lambda i: self._process_condemned(s, first_unhealthy, monotonic, condemned[i], now),
            monotonic)
        if stop or err is not None:
            return status(), err
        out = status()
        if s.update_strategy_type == ON_DELETE:
            return out, None
        update_min = (s.partition or 0) if ru is not None else 0
        for target in range(len(slots) - 1, update_min - 1, -1):
            r = slots[target]
            if pod_revision(r.pod) != update.name and r.pod.deletion_timestamp is None:
                try:
                    if r.created:
                        self.pod_control.delete_pod(s, r.pod)
                except NotFound:
                    pass
                except ApiError as e:
                    return out, e
                out["currentReplicas"] = int(out.get("currentReplicas") or 0) - 1
                return out, None
            if not healthy(r):
                return out, None
        return out, None

    def _process_replica(self, s: StatefulSet, monotonic: bool, r: _Replica, now: float) -> bool:
        """Whether the pass stops at this ordinal (``processReplica``); raises ApiError."""
        pod = r.pod
        if r.created and pod.phase in ("Failed", "Succeeded"):
            # Re-created under the same name once it is gone.
            if pod.deletion_timestamp is None:
                self.pod_control.delete_pod(s, pod)
            return True
        if not r.created:
            if self.pod_control.claim_is_stale(s, pod):
                return True
            assert r.manifest is not None
            self.pod_control.create_pod(s, r.manifest, pod)
            # The pod as created is not seen until the informer delivers it.
            return monotonic
        if pod.phase == "Pending":
            self.pod_control.create_missing_claims(s, pod)
        if pod.deletion_timestamp is not None and monotonic:
            return True
        if not is_running_and_ready(pod) and monotonic:
            return True
        if not is_running_and_available(pod, s.min_ready_seconds, now) and monotonic:
            return True
        retention = self.pod_control.claims_match_retention_policy(s, pod)
        if identity_matches(s, pod) and storage_matches(s, pod) and retention:
            return False
        self.pod_control.update_pod(s, pod)
        return False

    def _process_condemned(self, s: StatefulSet, first_unhealthy: Pod | None, monotonic: bool, pod: Pod,
                           now: float) -> bool:
        if pod.deletion_timestamp is not None:
            return monotonic  # wait for it to go
        if not is_running_and_ready(pod) and monotonic and pod is not first_unhealthy:
            return True
        if not is_running_and_available(pod, s.min_ready_seconds, now) and monotonic and pod is not first_unhealthy:
            return True
        self.pod_control.delete_pod(s, pod)
        return True

    # ---- status ---------------------------------------------------------------------------

    def _write_status(self, s: StatefulSet, status: dict[str, Any]) -> None:
        """Complete a finished rolling update, then write the status if it differs
        (``updateStatefulSetStatus``)."""
        n = s.replicas
        if s.update_strategy_type == ROLLING_UPDATE and int(status.get("updatedReplicas") or 0) == n and \
                int(status.get("readyReplicas") or 0) == n and status["replicas"] == n:
            if status.get("updatedReplicas"):
                status["currentReplicas"] = status["updatedReplicas"]
            else:
                status.pop("currentReplicas", None)
            status["currentRevision"] = status["updateRevision"]
        old = s.status
        keys = ("replicas", "currentReplicas", "readyReplicas", "updatedReplicas", "currentRevision",
                "availableReplicas", "updateRevision")
        if int(status.get("observedGeneration") or 0) <= s.observed_generation and \
                all((old.get(k) or 0) == (status.get(k) or 0) for k in keys):
            return
        raw = dict(s.raw)
        raw["status"] = status
        try:
            self.client.update_status(raw)
        except NotFound:
            return
        except ApiError:
            fresh = self.client.get("StatefulSet", s.namespace, s.name)
            raw = dict(fresh.raw)
            raw["status"] = status
            self.client.update_status(raw)
