"""Syncing a Deployment's ReplicaSets and status (upstream's ``pkg/controller/deployment/sync.go``):
finding or creating the new ReplicaSet (``<deployment>-<pod-template-hash>``, revision max+1,
the Deployment's annotations copied, collisions counted in ``status.collisionCount``),
proportional scaling of every active ReplicaSet on a scaling event or while paused, removing
old ReplicaSets beyond ``revisionHistoryLimit``, and the status with its ``Available``
condition.

Divergence: after writing the Deployment's status the sync carries on with the written object
(upstream keeps its pre-write copy, whose stale resourceVersion makes a second write in the same
sync fail and the sync retry).
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, Deployment, ReplicaSet
from ksched.api.errors import AlreadyExists, ApiError, NotFound
from ksched.client.informer import SharedInformer
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller_utils import compute_hash, controller_ref
from ksched.controllers.deployment.util import (
    AVAILABLE,
    FAILED_RS_CREATE,
    FOUND_NEW_RS,
    MINIMUM_REPLICAS_AVAILABLE,
    MINIMUM_REPLICAS_UNAVAILABLE,
    NEW_REPLICA_SET,
    PAUSED,
    PROGRESSING,
    RESUMED,
    REVISION_ANNOTATION,
    TIMED_OUT,
    actual_replica_count,
    available_replica_count,
    desired_replicas_annotation,
    equal_ignore_hash,
    filter_active,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    get_condition,
    get_proportion,
    has_progress_deadline,
    has_revision_history_limit,
    is_rolling_update,
    is_saturated,
    max_revision,
    max_surge,
    max_unavailable,
    new_condition,
    new_rs_new_replicas,
    ready_replica_count,
    replica_count,
    replicas_annotations_need_update,
    set_condition,
    set_new_rs_annotations,
    set_replicas_annotations,
    sort_by_revision,
    sort_by_size_newer,
    sort_by_size_older,
    terminating_replica_count,
)

__all__ = ["SyncMixin", "calculate_status"]


def calculate_status(all_rss: list[ReplicaSet | None], new_rs: ReplicaSet | None, d: Deployment,
                     now: float) -> dict[str, Any]:
    """The Deployment's status from its ReplicaSets (``calculateStatus``), with the Available
    condition; other conditions are carried over."""
    available = available_replica_count(all_rss)
    unavailable = max(0, replica_count(all_rss) - available)
    status: dict[str, Any] = {}
    for key, n in (("observedGeneration", d.generation), ("replicas", actual_replica_count(all_rss)),
                   ("updatedReplicas", actual_replica_count([new_rs])), ("readyReplicas", ready_replica_count(all_rss)),
                   ("availableReplicas", available), ("unavailableReplicas", unavailable)):
        if n:
            status[key] = n
    terminating = terminating_replica_count(all_rss)
    if terminating is not None:
        status["terminatingReplicas"] = terminating
    if d.conditions:
        status["conditions"] = [dict(c) for c in d.conditions]
    if available >= d.replicas - max_unavailable(d):
        set_condition(status, new_condition(AVAILABLE, "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    if d.collision_count is not None:
        status["collisionCount"] = d.collision_count
    return _ordered(status)


_STATUS_ORDER = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                 "unavailableReplicas", "terminatingReplicas", "conditions", "collisionCount")


def _ordered(status: dict[str, Any]) -> dict[str, Any]:
    """Fields in the order the API serializes them."""
    out = {k: status[k] for k in _STATUS_ORDER if k in status}
    out.update({k: v for k, v in status.items() if k not in out})
    return out


class SyncMixin:
    """The Deployment controller's ReplicaSet bookkeeping; mixed into DeploymentController."""

    client: Any
    clock: Clock
    recorder: EventRecorder
    rs_informer: SharedInformer

    # ---- writes ---------------------------------------------------------------------------

    def _update_status(self, d: Deployment, status: dict[str, Any],
                       annotations: dict[str, str] | None = None) -> Deployment:
        """Write the Deployment's status (and annotations: the status subresource of a
        Deployment takes them); the written Deployment."""
        raw = dict(d.raw)
        raw["status"] = _ordered(status)
        if annotations is not None:
            raw["metadata"] = {**(d.raw.get("metadata") or {}), "annotations": annotations}
        out = self.client.update_status(raw)
        assert isinstance(out, Deployment)
        return out

    def _scale_replica_set(self, rs: ReplicaSet, new_scale: int, d: Deployment,
                           operation: str) -> tuple[bool, ReplicaSet]:
        """Set a ReplicaSet's replicas and its desired/max-replicas annotations
        (``scaleReplicaSet``); whether it was scaled, and the ReplicaSet."""
        size_changes = rs.replicas != new_scale
        desired, maximum = d.replicas, d.replicas + max_surge(d)
        if not size_changes and not replicas_annotations_need_update(rs, desired, maximum):
            return False, rs
        old = rs.replicas
        raw = dict(rs.raw)
        md = dict(raw.get("metadata") or {})
        annotations = dict(md.get("annotations") or {})
        set_replicas_annotations(annotations, desired, maximum)
        md["annotations"] = annotations
        raw["metadata"] = md
        raw["spec"] = {**(raw.get("spec") or {}), "replicas": new_scale}
        out = self.client.update(raw)
        assert isinstance(out, ReplicaSet)
        if size_changes:
            self.recorder.event(d, "Normal", "ScalingReplicaSet", "Scale",
                                f"Scaled {operation} replica set {out.name} to {new_scale} from {old}")
        return size_changes, out

    def _scale_and_record(self, rs: ReplicaSet, new_scale: int, d: Deployment) -> tuple[bool, ReplicaSet]:
        if rs.replicas == new_scale:
            return False, rs
        return self._scale_replica_set(rs, new_scale, d, "up" if rs.replicas < new_scale else "down")

    # ---- the new ReplicaSet ---------------------------------------------------------------

    def _all_replica_sets_and_sync_revision(
            self, d: Deployment, rs_list: list[ReplicaSet],
            create: bool) -> tuple[ReplicaSet | None, list[ReplicaSet], Deployment]:
        """(new ReplicaSet or None, all old ReplicaSets, the Deployment) with the new one's and the
        Deployment's revision brought up to date (``getAllReplicaSetsAndSyncRevision``)."""
        _, old = find_old_replica_sets(d, rs_list)
        new, d = self._new_replica_set(d, rs_list, old, create)
        if new is not None:
            # Later steps of this sync read the list again: give them the written ReplicaSet.
            for i, rs in enumerate(rs_list):
                if rs.uid == new.uid:
                    rs_list[i] = new
        return new, old, d

    def _new_replica_set(self, d: Deployment, rs_list: list[ReplicaSet], old_rss: list[ReplicaSet],
                         create: bool) -> tuple[ReplicaSet | None, Deployment]:
        now = self.clock.now()
        existing = find_new_replica_set(d, rs_list)
        new_revision = max_revision(old_rss) + 1
        if existing is not None:
            annotations = dict(existing.annotations)
            changed = set_new_rs_annotations(d, annotations, new_revision, exists=True)
            if changed or existing.min_ready_seconds != d.min_ready_seconds:
                raw = dict(existing.raw)
                raw["metadata"] = {**(raw.get("metadata") or {}), "annotations": annotations}
                spec = dict(raw.get("spec") or {})
                if d.min_ready_seconds:
                    spec["minReadySeconds"] = d.min_ready_seconds
                else:
                    spec.pop("minReadySeconds", None)
                raw["spec"] = spec
                out = self.client.update(raw)
                assert isinstance(out, ReplicaSet)
                return out, d
            d_annotations = dict(d.annotations)
            needs = _set_revision(d_annotations, existing.annotations.get(REVISION_ANNOTATION, ""))
            status = copy.deepcopy(d.status)
            if has_progress_deadline(d) and get_condition(status, PROGRESSING) is None:
                set_condition(status, new_condition(PROGRESSING, "True", FOUND_NEW_RS,
                                                    f'Found new replica set "{existing.name}"', now))
                needs = True
            if needs:
                d = self._update_status(d, status, d_annotations)
            return existing, d
        if not create:
            return None, d
        template = copy.deepcopy(d.template)
        pth = compute_hash(template, d.collision_count)
        md = template.setdefault("metadata", {})
        md["labels"] = {**(md.get("labels") or {}), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pth}
        selector = copy.deepcopy(d.spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pth}
        name = f"{d.name[:253 - len(pth) - 1]}-{pth}"
        replicas = new_rs_new_replicas(d, old_rss, 0, others_replicas=replica_count(old_rss))
        annotations: dict[str, str] = {}
        set_new_rs_annotations(d, annotations, new_revision, exists=False)
        spec: dict[str, Any] = {"replicas": replicas}
        if d.min_ready_seconds:
            spec["minReadySeconds"] = d.min_ready_seconds
        spec["selector"] = selector
        spec["template"] = template
        raw = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": name, "namespace": d.namespace, "labels": dict(md["labels"]),
                            "annotations": annotations, "ownerReferences": [controller_ref(d)]},
               "spec": spec}
        already_exists = False
        try:
            created = self.client.create(raw)
        except AlreadyExists:
            rs = self.rs_informer.get(f"{d.namespace}/{name}")
            if rs is None:
                rs = self.client.get("ReplicaSet", d.namespace, name)
            ref = rs.controller_ref()
            if isinstance(rs, ReplicaSet) and ref is not None and ref.uid == d.uid and \
                    equal_ignore_hash(d.template, rs.template):
                created, already_exists = rs, True
            else:
                # A hash collision: count it, so the next sync hashes differently.
                status = copy.deepcopy(d.status)
                status["collisionCount"] = (d.collision_count or 0) + 1
                self._update_status(d, status)
                raise
        except ApiError as e:
            msg = f'Failed to create new replica set "{name}": {e.message}'
            if has_progress_deadline(d):
                status = copy.deepcopy(d.status)
                set_condition(status, new_condition(PROGRESSING, "False", FAILED_RS_CREATE, msg, now))
                try:
                    self._update_status(d, status)
                except ApiError:
                    pass  # the event below says it all
            self.recorder.event(d, "Warning", FAILED_RS_CREATE, "Create", msg)
            raise
        assert isinstance(created, ReplicaSet)
        if not already_exists and replicas > 0:
            self.recorder.event(d, "Normal", "ScalingReplicaSet", "Scale",
                                f"Scaled up replica set {created.name} to {replicas}")
        d_annotations = dict(d.annotations)
        needs = _set_revision(d_annotations, str(new_revision))
        status = copy.deepcopy(d.status)
        if not already_exists and has_progress_deadline(d):
            set_condition(status, new_condition(PROGRESSING, "True", NEW_REPLICA_SET,
                                                f'Created new replica set "{created.name}"', now))
            needs = True
        if needs:
            d = self._update_status(d, status, d_annotations)
        return created, d

    # ---- scaling, paused deployments, history ---------------------------------------------

    def _sync_status_only(self, d: Deployment, rs_list: list[ReplicaSet]) -> None:
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, False)
        self._sync_deployment_status([*old, new], new, d)

    def _sync(self, d: Deployment, rs_list: list[ReplicaSet]) -> None:
        """A scaling event or a paused Deployment: scale, no rollout (``sync``)."""
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, False)
        self._scale(d, new, old)
        if d.paused and d.annotations.get("deprecated.deployment.rollback.to") is None:
            self._cleanup_deployment(old, d)
        self._sync_deployment_status([*old, new], new, d)

    def _check_paused_conditions(self, d: Deployment) -> Deployment:
        if not has_progress_deadline(d):
            return d
        cond = get_condition(d.status, PROGRESSING)
        if cond is not None and cond.get("reason") == TIMED_OUT:
            return d  # a reported lack of progress stays
        paused_exists = cond is not None and cond.get("reason") == PAUSED
        now = self.clock.now()
        status = copy.deepcopy(d.status)
        if d.paused and not paused_exists:
            set_condition(status, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now))
        elif not d.paused and paused_exists:
            set_condition(status, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now))
        else:
            return d
        return self._update_status(d, status)

    def _scale(self, d: Deployment, new: ReplicaSet | None, old: list[ReplicaSet]) -> None:
        """Proportional scaling (``scale``): the one active ReplicaSet takes the whole size; a
        saturated new one means the old go to 0; else every active one grows or shrinks in
        proportion, leftovers to the largest."""
        only = find_active_or_latest(new, old)
        if only is not None:
            if only.replicas != d.replicas:
                self._scale_and_record(only, d.replicas, d)
            return
        if is_saturated(d, new):
            for rs in filter_active(old):
                self._scale_and_record(rs, 0, d)
            return
        if not is_rolling_update(d):
            return
        all_rss = filter_active([*old, new])
        allowed = d.replicas + max_surge(d) if d.replicas > 0 else 0
        to_add = allowed - replica_count(all_rss)
        operation = ""
        if to_add > 0:
            all_rss = sort_by_size_newer(all_rss)
            operation = "up"
        elif to_add < 0:
            all_rss = sort_by_size_older(all_rss)
            operation = "down"
        added = 0
        sizes: dict[str, int] = {}
        for rs in all_rss:
            if to_add != 0:
                p = get_proportion(rs, d, to_add, added)
                sizes[rs.name] = rs.replicas + p
                added += p
            else:
                sizes[rs.name] = rs.replicas
        for i, rs in enumerate(all_rss):
            if i == 0 and to_add != 0:
                sizes[rs.name] = max(0, sizes[rs.name] + to_add - added)
            self._scale_replica_set(rs, sizes[rs.name], d, operation)

    def _is_scaling_event(self, d: Deployment, rs_list: list[ReplicaSet]) -> tuple[bool, Deployment]:
        """Whether an active ReplicaSet's desired-replicas annotation differs from the Deployment's replicas."""
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, False)
        for rs in filter_active([*old, new]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != d.replicas:
                return True, d
        return False, d

    def _cleanup_deployment(self, old: list[ReplicaSet], d: Deployment) -> None:
        """Delete the oldest idle old ReplicaSets beyond revisionHistoryLimit (``cleanupDeployment``)."""
        if not has_revision_history_limit(d):
            return
        cleanable = [rs for rs in old if rs.deletion_timestamp is None]
        diff = len(cleanable) - d.revision_history_limit
        if diff <= 0:
            return
        for rs in sort_by_revision(cleanable)[:diff]:
            if rs.status_replicas != 0 or rs.replicas != 0 or rs.generation > rs.observed_generation:
                continue
            try:
                self.client.delete("ReplicaSet", rs.namespace, rs.name)
            except NotFound:
                pass

    def _sync_deployment_status(self, all_rss: list[ReplicaSet | None], new: ReplicaSet | None,
                                d: Deployment) -> None:
        status = calculate_status(all_rss, new, d, self.clock.now())
        if status != d.status:
            self._update_status(d, status)


def _set_revision(annotations: dict[str, str], revision: str) -> bool:
    if annotations.get(REVISION_ANNOTATION) != revision:
        annotations[REVISION_ANNOTATION] = revision
        return True
    return False
