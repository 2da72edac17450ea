"""The Job controller, as upstream's ``pkg/controller/job/job_controller.go`` (Kubernetes 1.36,
JobPodReplacementPolicy and JobManagedBy on): pods from the template up to the wanted number of
active pods, the tracking finalizer and ``status.uncountedTerminatedPods`` to count every
finished pod once, the pod failure back-off (10 s doubling to 10 min), ``backoffLimit`` (and the
restart counts of OnFailure pods), ``activeDeadlineSeconds``, suspension, Indexed completion
(``completedIndexes``, one pod per index, ``backoffLimitPerIndex`` and ``maxFailedIndexes``),
``podFailurePolicy`` and ``podReplacementPolicy``; the interim ``FailureTarget`` /
``SuccessCriteriaMet`` conditions, then ``Failed`` / ``Complete`` once no pod is terminating,
with upstream's reasons, messages and events.

Pod events are batched per Job (a sync a second after the first event), spec changes sync at
once, as upstream. In ``ksched simulate`` that second is virtual.

Divergences: ``successPolicy`` is not implemented (such a Job completes by its completions); the
API-error requeue uses the controllers' common back-off (5 ms doubling) rather than 1 s doubling
to a minute; pods are deleted one after another rather than concurrently (same calls, same
order of effects).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from ksched.api.batch import (
    JOB_COMPLETE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_FAILED,
    JOB_FAILURE_TARGET,
    JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    JOB_SUCCESS_CRITERIA_MET,
    JOB_SUSPENDED,
    JOB_TRACKING_FINALIZER,
    Job,
)
from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import OwnerReference, format_time, parse_time
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.job import indexed as ix
from ksched.controllers.job.backoff import BackoffRecord, BackoffStore, finished_time, remaining_time
from ksched.controllers.job.expectations import ControllerExpectations, UIDTrackingExpectations
from ksched.controllers.job.pod_failure_policy import match_pod_failure_policy
from ksched.controllers.podupdates import unowned_pod_update

__all__ = ["MAX_POD_CREATE_DELETE_PER_SYNC", "SYNC_JOB_BATCH_PERIOD", "JobController", "active_pods_order"]

log = logging.getLogger(__name__)

SYNC_JOB_BATCH_PERIOD = 1.0
MAX_POD_CREATE_DELETE_PER_SYNC = 500
MAX_UNCOUNTED_PODS = 500
CONTROLLER_NAME = "kubernetes.io/job-controller"
_SMP = "application/strategic-merge-patch+json"

JOB = "job"
ORPHAN_POD = "orphan-pod"


# ---------------------------------------------------------------- pods (pkg/controller/controller_utils.go)


def is_pod_active(p: Pod) -> bool:
    return p.phase not in ("Succeeded", "Failed") and p.deletion_timestamp is None


def is_pod_terminating(p: Pod) -> bool:
    return p.phase not in ("Succeeded", "Failed") and p.deletion_timestamp is not None


def is_pod_ready(p: Pod) -> bool:
    c = p.condition("Ready")
    return c is not None and c.get("status") == "True"


def _max_restarts(p: Pod) -> int:
    return max((int(c.get("restartCount") or 0) for c in (p.raw.get("status") or {}).get("containerStatuses") or ()),
               default=0)


_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def active_pods_order(p: Pod) -> tuple[Any, ...]:
    """controller.ActivePods as a sort key, smallest first (the first to delete): unassigned,
    then Pending < Unknown < Running, not ready, ready more recently, more restarts, created
    more recently (no creation time first); the name breaks ties."""
    ready = is_pod_ready(p)
    ready_since: float | None = None
    if ready:
        ready_since = parse_time((p.condition("Ready") or {}).get("lastTransitionTime"))
    created = p.creation_timestamp
    return (bool(p.node_name), _PHASE_ORDINAL.get(p.phase, 0), ready,
            (ready_since is not None, -(ready_since or 0.0)) if ready else (False, 0.0),
            -_max_restarts(p), (created is not None, -(created or 0.0)), p.name)


def has_tracking_finalizer(p: Pod) -> bool:
    return JOB_TRACKING_FINALIZER in p.finalizers


def _controller_of(p: Any) -> OwnerReference | None:
    return p.controller_ref()


def _job_ref(job: Job) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job.name, "uid": job.uid, "controller": True,
            "blockOwnerDeletion": True}


# ---------------------------------------------------------------- conditions


def new_condition(ctype: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    ts = format_time(now)
    return {"type": ctype, "status": status, "lastProbeTime": ts, "lastTransitionTime": ts, "reason": reason,
            "message": message}


def ensure_condition(conds: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str,
                     now: float) -> bool:
    """ensureJobConditionStatus: set a condition (a False one is not added where none is)."""
    for i, c in enumerate(conds):
        if c.get("type") == ctype:
            if (c.get("status"), c.get("reason", ""), c.get("message", "")) != (status, reason, message):
                conds[i] = new_condition(ctype, status, reason, message, now)
                return True
            return False
    if status != "False":
        conds.append(new_condition(ctype, status, reason, message, now))
        return True
    return False


def _find(conds: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    return next((c for c in conds if c.get("type") == ctype), None)


# ---------------------------------------------------------------- the sync's working state


@dataclass
class _SyncCtx:
    job: Job
    status: dict[str, Any]
    pods: list[Pod]
    active_pods: list[Pod]
    ready: int
    terminating: int
    uncounted_succeeded: set[str]
    uncounted_failed: set[str]
    expected_rm: set[str]
    succeeded: int = 0
    failed: int = 0
    finished: dict[str, Any] | None = None
    prev_succeeded_indexes: ix.Intervals = ()
    succeeded_indexes: ix.Intervals = ()
    failed_indexes: ix.Intervals | None = None
    delayed_deletion: dict[int, Pod] = field(default_factory=dict)
    backoff: BackoffRecord | None = None


class JobController(Controller):
    """Keys are ("job", namespace/name) and ("orphan-pod", namespace/name)."""

    name = "job"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.recorder = EventRecorder(client, clock, component="job-controller")
        self.expectations = ControllerExpectations(clock)
        self.finalizer_expectations = UIDTrackingExpectations()
        self.backoff_store = BackoffStore()
        self.jobs = informers.informer("Job")
        self.pods = informers.informer("Pod")
        self.pods.indexer.add_indexer("job-controller-uid", _job_controller_uid)
        self.jobs.add_handler(EventHandler(self._add_job, self._update_job, self._delete_job))
        self.pods.add_handler(EventHandler(self._add_pod, self._update_pod, lambda o: self._delete_pod(o, True),
                                            skip_update=unowned_pod_update))

    # ---------------------------------------------------------------- queueing

    def _enqueue(self, job: Job, delay: float = 0.0) -> None:
        self.queue.add_after((JOB, job.key), delay)

    def _enqueue_batched(self, job: Job) -> None:
        self._enqueue(job, SYNC_JOB_BATCH_PERIOD)

    def _enqueue_orphan(self, pod: Pod) -> None:
        self.queue.add((ORPHAN_POD, pod.key))

    def _resolve(self, namespace: str, ref: OwnerReference) -> Job | None:
        if ref.kind != "Job":
            return None
        job = self.jobs.get(f"{namespace}/{ref.name}")
        return job if isinstance(job, Job) and job.uid == ref.uid else None

    def _pod_jobs(self, pod: Pod) -> list[Job]:
        """The Jobs of the pod's namespace whose selector matches it (candidates to adopt it)."""
        out = []
        for j in self.jobs.indexer.by_index("namespace", pod.namespace):
            if isinstance(j, Job) and not j.selector.is_empty() and j.selector.matches(pod.labels):
                out.append(j)
        return out

    # ---------------------------------------------------------------- job handlers

    def _add_job(self, job: Job) -> None:
        self._enqueue(job)

    def _update_job(self, old: Job, cur: Job) -> None:
        if cur.generation == old.generation:
            self._enqueue_batched(cur)
        else:
            self._enqueue(cur)
        if cur.is_finished:
            self._cleanup_pod_finalizers(cur)
        if cur.start_time is not None and cur.active_deadline_seconds is not None and \
                old.active_deadline_seconds != cur.active_deadline_seconds:
            passed = self.clock.now() - cur.start_time
            self.queue.add_after((JOB, cur.key), cur.active_deadline_seconds - passed)

    def _delete_job(self, obj: Any) -> None:
        job = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.queue.add((JOB, job.key))
        self._cleanup_pod_finalizers(job)

    def _cleanup_pod_finalizers(self, job: Job) -> None:
        for p in self.pods.indexer.by_index("job-controller-uid", job.uid):
            if isinstance(p, Pod) and has_tracking_finalizer(p):
                self._enqueue_orphan(p)

    # ---------------------------------------------------------------- pod handlers

    def _add_pod(self, pod: Pod) -> None:
        if pod.deletion_timestamp is not None:
            self._delete_pod(pod, False)
            return
        ref = _controller_of(pod)
        if ref is not None:
            job = self._resolve(pod.namespace, ref)
            if job is not None:
                self.expectations.creation_observed(job.key)
                self._enqueue_batched(job)
            return
        if has_tracking_finalizer(pod):
            self._enqueue_orphan(pod)
        for job in self._pod_jobs(pod):
            self._enqueue_batched(job)

    def _update_pod(self, old: Pod, cur: Pod) -> None:
        if cur.resource_version == old.resource_version:
            return
        if cur.deletion_timestamp is not None:
            self._delete_pod(cur, False)
            return
        removed = not has_tracking_finalizer(cur)
        cur_ref, old_ref = _controller_of(cur), _controller_of(old)
        changed = (cur_ref.uid if cur_ref else None) != (old_ref.uid if old_ref else None)
        if changed and old_ref is not None:
            job = self._resolve(old.namespace, old_ref)
            if job is not None:
                if removed:
                    self.finalizer_expectations.removal_observed(job.key, cur.uid)
                self._enqueue_batched(job)
        if cur_ref is not None:
            job = self._resolve(cur.namespace, cur_ref)
            if job is None:
                return
            if removed:
                self.finalizer_expectations.removal_observed(job.key, cur.uid)
            self._enqueue_batched(job)
            return
        if has_tracking_finalizer(cur):
            self._enqueue_orphan(cur)
        if cur.labels != old.labels or changed:
            for job in self._pod_jobs(cur):
                self._enqueue_batched(job)

    def _delete_pod(self, obj: Any, final: bool) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = _controller_of(pod)
        finalizer = has_tracking_finalizer(pod)
        if ref is None:
            if finalizer:
                self._enqueue_orphan(pod)
            return
        job = self._resolve(pod.namespace, ref)
        if job is None or job.is_finished:
            if finalizer:
                self._enqueue_orphan(pod)
            return
        self.expectations.deletion_observed(job.key)
        if final or not finalizer:
            self.finalizer_expectations.removal_observed(job.key, pod.uid)
        self._enqueue_batched(job)

    # ---------------------------------------------------------------- sync

    def sync(self, key: Any) -> None:
        kind, okey = key
        if kind == ORPHAN_POD:
            self._sync_orphan_pod(okey)
        else:
            self._sync_job(okey)

    def _sync_orphan_pod(self, key: str) -> None:
        """syncOrphanPod: a pod no unfinished Job of ours controls loses the tracking finalizer."""
        pod = self.pods.get(key)
        if not isinstance(pod, Pod):
            return
        ref = _controller_of(pod)
        if ref is not None:
            if ref.kind != "Job" or ref.api_version != "batch/v1":
                return
            job = self._resolve(pod.namespace, ref)
            if job is not None and _managed_by_other(job):
                return
            if job is not None and not job.is_finished:
                return  # adopted
        self._remove_finalizer(pod)

    def _remove_finalizer(self, pod: Pod) -> None:
        if not has_tracking_finalizer(pod):
            return
        try:
            self.client.patch("Pod", pod.namespace, pod.name,
                              {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}, _SMP)
        except NotFound:
            pass

    def _pods_for_job(self, job: Job) -> list[Pod]:
        """getPodsForJob with ClaimPods: the pods the Job controls and matches, orphans it adopts;
        pods it controls that no longer match are released."""
        candidates: dict[str, Pod] = {}
        for p in self.pods.indexer.by_index("job-controller-uid", job.uid):
            if isinstance(p, Pod):
                candidates[p.key] = p
        if job.deletion_timestamp is None and not job.selector.is_empty():
            for p in self.pods.indexer.by_index("namespace", job.namespace):
                if isinstance(p, Pod) and _controller_of(p) is None and p.deletion_timestamp is None \
                        and job.selector.matches(p.labels):
                    candidates[p.key] = p
        out: list[Pod] = []
        adoption_checked = False
        for p in sorted(candidates.values(), key=lambda p: p.key):
            ref = _controller_of(p)
            matches = job.selector.matches(p.labels)
            if ref is not None:
                if matches:
                    out.append(p)
                elif job.deletion_timestamp is None:
                    self._release(job, p)
                continue
            if not adoption_checked:
                fresh = self.client.get("Job", job.namespace, job.name)
                if fresh.uid != job.uid or fresh.deletion_timestamp is not None:
                    break
                adoption_checked = True
            adopted = self._adopt(job, p)
            if adopted is not None:
                out.append(adopted)
        return out

    def _adopt(self, job: Job, pod: Pod) -> Pod | None:
        refs = [*(pod.raw["metadata"].get("ownerReferences") or ()), _job_ref(job)]
        fins = list(dict.fromkeys([*pod.finalizers, JOB_TRACKING_FINALIZER]))
        try:
            out = self.client.patch("Pod", pod.namespace, pod.name, {"metadata": {
                "ownerReferences": refs, "finalizers": fins, "resourceVersion": pod.resource_version}})
        except NotFound:
            return None
        return out if isinstance(out, Pod) else None

    def _release(self, job: Job, pod: Pod) -> None:
        refs = [r for r in pod.raw["metadata"].get("ownerReferences") or () if r.get("uid") != job.uid]
        try:
            self.client.patch("Pod", pod.namespace, pod.name, {"metadata": {
                "ownerReferences": refs or None, "resourceVersion": pod.resource_version}})
        except NotFound:
            pass

    def _sync_job(self, key: str) -> None:
        shared = self.jobs.get(key)
        if not isinstance(shared, Job):
            self.expectations.delete(key)
            self.finalizer_expectations.delete(key)
            self.backoff_store.remove(key)
            return
        job = shared
        if _managed_by_other(job):
            return
        if job.is_finished:
            self.backoff_store.remove(key)
            return
        if job.completion_mode not in ("NonIndexed", "Indexed"):
            self.recorder.event(job, "Warning", "UnknownCompletionMode", "",
                                "Skipped Job sync because completion mode is unknown")
            return
        now = self.clock.now()
        satisfied = self.expectations.satisfied(key)
        pods = self._pods_for_job(job)
        active_pods = [p for p in pods if is_pod_active(p)]
        status = copy.deepcopy(job.raw.get("status") or {})
        status.setdefault("uncountedTerminatedPods", {})
        ctx = _SyncCtx(job=job, status=status, pods=pods, active_pods=active_pods,
                       ready=sum(1 for p in active_pods if is_pod_ready(p)),
                       terminating=sum(1 for p in pods if is_pod_terminating(p)),
                       uncounted_succeeded=set(job.uncounted_succeeded), uncounted_failed=set(job.uncounted_failed),
                       expected_rm=set(self.finalizer_expectations.expected(key)))
        active = len(active_pods)
        new_succeeded = self._valid_pods(ctx, ctx.uncounted_succeeded, lambda p: p.phase == "Succeeded")
        new_failed = self._valid_pods(ctx, ctx.uncounted_failed, lambda p: is_pod_failed(p, job))
        ctx.succeeded = job.succeeded + len(new_succeeded) + len(ctx.uncounted_succeeded)
        ctx.failed = job.failed + _non_ignored(job, new_failed) + len(ctx.uncounted_failed)
        if job.start_time is None and not job.suspend:
            status["startTime"] = format_time(now)
        ctx.backoff = self.backoff_store.new_record(key, new_succeeded, new_failed)

        conds: list[dict[str, Any]] = status.setdefault("conditions", [])
        sc = _find(conds, JOB_SUCCESS_CRITERIA_MET)
        ctx.finished = sc if sc is not None and sc.get("status") == "True" else None
        if ctx.finished is None:
            ft = _find(conds, JOB_FAILURE_TARGET)
            if ft is not None and ft.get("status") == "True":
                ctx.finished = new_condition(JOB_FAILED, "True", ft.get("reason", ""), ft.get("message", ""), now)
            elif (msg := _fail_job_message(job, pods)) is not None:
                ctx.finished = new_condition(JOB_FAILURE_TARGET, "True", "PodFailurePolicy", msg, now)
        if ctx.finished is None:
            if ctx.failed > job.backoff_limit or _past_backoff_limit_on_failure(job, pods):
                ctx.finished = new_condition(JOB_FAILURE_TARGET, "True", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit", now)
            elif self._past_active_deadline(job, status):
                ctx.finished = new_condition(JOB_FAILURE_TARGET, "True", "DeadlineExceeded",
                                             "Job was active longer than specified deadline", now)
            elif job.active_deadline_seconds is not None and not job.suspend:
                started = parse_time(status.get("startTime")) or now
                self.queue.add_after((JOB, key), job.active_deadline_seconds - (now - started))
        if job.is_indexed:
            self._indexes(ctx, now)
        suspend_changed = False
        manage_error: ApiError | None = None
        if ctx.finished is not None:
            deleted_ready, deleted, manage_error = self._delete_active_pods(job, ctx.active_pods)
            if deleted != active or not satisfied:
                ctx.finished = None  # finalizers to remove, or pods not in the cache yet
            active -= deleted
            ctx.terminating += deleted
            ctx.ready -= deleted_ready
        else:
            manage_called = False
            if satisfied and job.deletion_timestamp is None:
                active, manage_error = self._manage_job(job, ctx, now)
                manage_called = True
            if job.completions is None:
                complete = ctx.succeeded > 0 and active == 0
            else:
                complete = ctx.succeeded >= job.completions and active == 0
            if complete:
                ctx.finished = new_condition(JOB_SUCCESS_CRITERIA_MET, "True", "CompletionsReached",
                                             "Reached expected number of succeeded pods", now)
            elif manage_called:
                if job.suspend:
                    if ensure_condition(conds, JOB_SUSPENDED, "True", "JobSuspended", "Job suspended", now):
                        suspend_changed = True
                        self.recorder.event(job, "Normal", "Suspended", "", "Job suspended")
                elif ensure_condition(conds, JOB_SUSPENDED, "False", "JobResumed", "Job resumed", now):
                    suspend_changed = True
                    self.recorder.event(job, "Normal", "Resumed", "", "Job resumed")
                    # ActiveDeadlineSeconds counts the time a Job is continuously active.
                    status["startTime"] = format_time(now)
        needs_update = suspend_changed or active != job.active or ctx.ready != job.ready or \
            ctx.terminating != job.terminating
        _set_count(status, "active", active)
        status["ready"] = ctx.ready
        status["terminating"] = ctx.terminating
        self._track_status_and_remove_finalizers(ctx, needs_update, now)
        if manage_error is not None:
            raise manage_error

    # ---------------------------------------------------------------- helpers of the sync

    @staticmethod
    def _valid_pods(ctx: _SyncCtx, uncounted: set[str], ok: Any) -> list[Pod]:
        """getValidPodsWithFilter: finished pods not yet counted (with the finalizer, not in the
        uncounted lists, with a valid index)."""
        out = []
        for p in ctx.pods:
            if not has_tracking_finalizer(p) or p.uid in uncounted or p.uid in ctx.expected_rm:
                continue
            if ctx.job.is_indexed:
                i = ix.completion_index(p)
                if i == ix.UNKNOWN_INDEX or i >= (ctx.job.completions or 0):
                    continue
            if ok(p):
                out.append(p)
        return out

    def _past_active_deadline(self, job: Job, status: dict[str, Any]) -> bool:
        started = parse_time(status.get("startTime"))
        if job.active_deadline_seconds is None or started is None or job.suspend:
            return False
        return self.clock.now() - started >= job.active_deadline_seconds

    def _indexes(self, ctx: _SyncCtx, now: float) -> None:
        job = ctx.job
        completions = job.completions or 0
        ctx.prev_succeeded_indexes = ix.parse(job.completed_indexes, completions)
        new = {ix.completion_index(p) for p in ctx.pods
               if p.phase == "Succeeded" and has_tracking_finalizer(p)
               and 0 <= ix.completion_index(p) < completions}
        ctx.succeeded_indexes = ix.with_indexes(ctx.prev_succeeded_indexes, new)
        ctx.succeeded = ix.total(ctx.succeeded_indexes)
        if job.backoff_limit_per_index is None:
            return
        prev_failed = ix.parse(job.failed_indexes, completions)
        failed = {ix.completion_index(p) for p in ctx.pods
                  if 0 <= ix.completion_index(p) < completions and has_tracking_finalizer(p)
                  and _is_index_failed(job, p)}
        ctx.failed_indexes = ix.with_indexes(prev_failed, failed)
        if ctx.finished is None:
            n_failed = ix.total(ctx.failed_indexes)
            if job.max_failed_indexes is not None and n_failed > job.max_failed_indexes:
                ctx.finished = new_condition(JOB_FAILURE_TARGET, "True", "MaxFailedIndexesExceeded",
                                             "Job has exceeded the specified maximal number of failed indexes", now)
            elif n_failed > 0 and n_failed + ix.total(ctx.succeeded_indexes) >= completions:
                ctx.finished = new_condition(JOB_FAILURE_TARGET, "True", "FailedIndexes", "Job has failed indexes", now)
        ctx.delayed_deletion = self._pods_with_delayed_deletion(ctx)

    @staticmethod
    def _pods_with_delayed_deletion(ctx: _SyncCtx) -> dict[int, Pod]:
        """getPodsWithDelayedDeletionPerIndex: per index, the last failed pod, kept until its
        replacement exists (it carries the index's failure count)."""
        job = ctx.job
        completions = job.completions or 0
        active_indexes = {ix.completion_index(p) for p in ctx.active_pods}
        out: dict[int, Pod] = {}
        for p in ctx.pods:
            if not has_tracking_finalizer(p) or p.uid in ctx.expected_rm or not is_pod_failed(p, job):
                continue
            i = ix.completion_index(p)
            if i == ix.UNKNOWN_INDEX or i >= completions:
                continue
            if ix.has(ctx.succeeded_indexes, i) or ix.has(ctx.failed_indexes or (), i) or i in active_indexes:
                continue
            prev = out.get(i)
            if prev is None or (_absolute_failures(prev) <= _absolute_failures(p)
                                and not finished_time(p) < finished_time(prev)):
                out[i] = p
        return out

    def _delete_active_pods(self, job: Job, pods: list[Pod]) -> tuple[int, int, ApiError | None]:
        """deleteActivePods: delete, keeping the finalizers (counted as they go)."""
        deleted = deleted_ready = 0
        err: ApiError | None = None
        for p in pods:
            try:
                self.client.delete("Pod", p.namespace, p.name)
                self.recorder.event(job, "Normal", "SuccessfulDelete", "", f"Deleted pod: {p.name}")
            except NotFound:
                pass
            except ApiError as e:
                err = e
                continue
            deleted += 1
            if is_pod_ready(p):
                deleted_ready += 1
        return deleted_ready, deleted, err

    def _delete_job_pods(self, job: Job, pods: list[Pod]) -> tuple[int, int, ApiError | None]:
        """deleteJobPods: remove the finalizer first (such pods are not counted), then delete."""
        deleted = deleted_ready = 0
        err: ApiError | None = None
        for p in pods:
            try:
                self._remove_finalizer(p)
                self.client.delete("Pod", p.namespace, p.name)
                self.recorder.event(job, "Normal", "SuccessfulDelete", "", f"Deleted pod: {p.name}")
            except NotFound:
                self.expectations.deletion_observed(job.key)
            except ApiError as e:
                self.expectations.deletion_observed(job.key)
                self.recorder.event(job, "Warning", "FailedDelete", "", f"Error deleting: {e.message}")
                err = e
                continue
            deleted += 1
            if is_pod_ready(p):
                deleted_ready += 1
        return deleted_ready, deleted, err

    def _manage_job(self, job: Job, ctx: _SyncCtx, now: float) -> tuple[int, ApiError | None]:
        """manageJob: create or delete pods to reach the wanted number of active ones."""
        key = job.key
        active = len(ctx.active_pods)
        if job.suspend:
            to_delete = _active_pods_for_removal(job, ctx.active_pods, active)
            self.expectations.expect_deletions(key, len(to_delete))
            ready, removed, err = self._delete_job_pods(job, to_delete)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, err
        if job.completions is None:
            want = active if ctx.succeeded > 0 else job.parallelism
        else:
            want = max(0, min(job.completions - ctx.succeeded, job.parallelism))
        to_delete = _active_pods_for_removal(job, ctx.active_pods, max(0, active - want))
        to_delete = to_delete[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if to_delete:
            self.expectations.expect_deletions(key, len(to_delete))
            ready, removed, err = self._delete_job_pods(job, to_delete)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, err
        terminating = ctx.terminating if _only_replace_failed(job) else 0
        diff = want - terminating - active
        if diff <= 0:
            return active, None
        remaining = 0.0
        if job.backoff_limit_per_index is None and ctx.backoff is not None:
            remaining = ctx.backoff.remaining(now)
        if remaining > 0:
            self.queue.add_after((JOB, key), max(remaining, SYNC_JOB_BATCH_PERIOD))
            return 0, None  # as upstream: the active count of this sync reads 0
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int] = []
        if job.is_indexed:
            non_pending = ix.with_indexes(ctx.succeeded_indexes,
                                          (ix.completion_index(p) for p in ctx.active_pods
                                           if ix.completion_index(p) != ix.UNKNOWN_INDEX))
            if _only_replace_failed(job):
                non_pending = ix.with_indexes(non_pending, (ix.completion_index(p) for p in ctx.pods
                                                            if is_pod_terminating(p)
                                                            and ix.completion_index(p) != ix.UNKNOWN_INDEX))
            if ctx.failed_indexes is not None:
                non_pending = ix.merge(non_pending, ctx.failed_indexes)
            indexes = ix.first_pending_indexes(non_pending, diff, job.completions or 0)
            if job.backoff_limit_per_index is not None:
                indexes, remaining = self._indexes_ready_to_create(indexes, ctx.delayed_deletion, now)
                if remaining > 0:
                    self.queue.add_after((JOB, key), max(remaining, SYNC_JOB_BATCH_PERIOD))
                    return 0, None
            diff = len(indexes)
        if diff <= 0:
            return active, None
        self.expectations.expect_creations(key, diff)
        active += diff
        err: ApiError | None = None
        batch = min(diff, 1)  # slow start: 1, 2, 4, ... stopping at the first batch with an error
        while diff > 0:
            errors_before = err
            for _ in range(batch):
                index = indexes.pop(0) if indexes else ix.UNKNOWN_INDEX
                try:
                    self._create_pod(job, index, ctx.delayed_deletion.get(index))
                except ApiError as e:
                    if any(c.get("reason") == "NamespaceTerminating" for c in e.causes):
                        continue  # the namespace goes away: nothing to create any more
                    self.expectations.creation_observed(key)
                    active -= 1
                    err = e
                    self.recorder.event(job, "Warning", "FailedCreate", "", f"Error creating: {e.message}")
            skipped = diff - batch
            if err is not errors_before and skipped > 0:
                active -= skipped
                for _ in range(skipped):
                    self.expectations.creation_observed(key)
                break
            diff -= batch
            batch = min(2 * batch, diff)
        return active, err

    def _indexes_ready_to_create(self, indexes: list[int], delayed: dict[int, Pod],
                                 now: float) -> tuple[list[int], float]:
        """getPodCreationInfoForIndependentIndexes: the indexes whose own back-off has passed, or
        the shortest wait when none has."""
        ready: list[int] = []
        shortest: float | None = None
        for i in indexes:
            last = delayed.get(i)
            wait = 0.0 if last is None else remaining_time(now, _absolute_failures(last) + 1, finished_time(last))
            if wait == 0:
                ready.append(i)
            elif shortest is None or wait < shortest:
                shortest = wait
        if ready:
            return ready, 0.0
        return [], shortest or 0.0

    def _create_pod(self, job: Job, index: int, replaced: Pod | None) -> None:
        """A pod from the template (PodControl.CreatePodsWithGenerateName)."""
        tpl = copy.deepcopy(job.template)
        md = dict(tpl.get("metadata") or {})
        spec = tpl.get("spec") or {}
        labels = dict(md.get("labels") or {})
        annotations = dict(md.get("annotations") or {})
        finalizers = list(dict.fromkeys([*(md.get("finalizers") or ()), JOB_TRACKING_FINALIZER]))
        generate_name = f"{job.name}-"
        if job.is_indexed:
            for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
                env = c.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                        "fieldPath": f"metadata.labels['{JOB_COMPLETION_INDEX_ANNOTATION}']"}}})
        if index != ix.UNKNOWN_INDEX:
            annotations[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
            labels[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
            spec["hostname"] = f"{job.name}-{index}"
            generate_name = ix.pod_generate_name(job.name, index)
            if job.backoff_limit_per_index is not None:
                failures, ignored = _new_index_failure_counts(job, replaced)
                annotations[JOB_INDEX_FAILURE_COUNT_ANNOTATION] = str(failures)
                if ignored > 0:
                    annotations[JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(ignored)
        pod_md: dict[str, Any] = {"generateName": generate_name, "namespace": job.namespace, "labels": labels,
                                  "annotations": annotations, "finalizers": finalizers,
                                  "ownerReferences": [_job_ref(job)]}
        pod = self.client.create({"apiVersion": "v1", "kind": "Pod", "metadata": pod_md, "spec": spec})
        self.recorder.event(job, "Normal", "SuccessfulCreate", "", f"Created pod: {pod.name}")

    # ---------------------------------------------------------------- status and finalizers

    def _track_status_and_remove_finalizers(self, ctx: _SyncCtx, needs_flush: bool, now: float) -> None:
        """trackJobStatusAndRemoveFinalizers: finished pods into uncountedTerminatedPods, their
        finalizers removed, the counters moved, then the terminal condition."""
        job = ctx.job
        status = ctx.status
        unc = status["uncountedTerminatedPods"]
        unc_succ: list[str] = list(unc.get("succeeded") or ())
        unc_fail: list[str] = list(unc.get("failed") or ())
        pods = sorted(ctx.pods, key=ix.completion_index) if job.is_indexed else ctx.pods
        with_finalizer = {p.uid for p in pods if has_tracking_finalizer(p) and p.uid not in ctx.expected_rm}
        if _clean_uncounted(status, unc_succ, unc_fail, with_finalizer):
            needs_flush = True
            unc_succ, unc_fail = list(unc.get("succeeded") or ()), list(unc.get("failed") or ())
        to_remove: list[Pod] = []
        new_succeeded_indexes: list[int] = []
        reached_max = False
        completions = job.completions or 0
        for p in pods:
            if not has_tracking_finalizer(p) or p.uid in ctx.expected_rm:
                continue
            failed = is_pod_failed(p, job)
            if not self._can_remove_finalizer(ctx, p, failed):
                continue
            to_remove.append(p)
            if p.phase == "Succeeded" and p.uid not in ctx.uncounted_failed:
                if job.is_indexed:
                    i = ix.completion_index(p)
                    if i != ix.UNKNOWN_INDEX and i < completions and not ix.has(ctx.prev_succeeded_indexes, i):
                        new_succeeded_indexes.append(i)
                        needs_flush = True
                elif p.uid not in ctx.uncounted_succeeded:
                    needs_flush = True
                    unc_succ.append(p.uid)
            elif failed or (ctx.finished is not None and ctx.finished.get("type") != JOB_SUCCESS_CRITERIA_MET):
                # When the Job is considered finished, every non-terminated pod counts as failed.
                i = ix.completion_index(p)
                if p.uid not in ctx.uncounted_failed and (not job.is_indexed or
                                                          (i != ix.UNKNOWN_INDEX and i < completions)):
                    _, counts, _ = match_pod_failure_policy(job.pod_failure_policy, p)
                    if counts:
                        needs_flush = True
                        unc_fail.append(p.uid)
            if len(new_succeeded_indexes) + len(unc_succ) + len(unc_fail) >= MAX_UNCOUNTED_PODS:
                reached_max = True
                break
        unc["succeeded"], unc["failed"] = unc_succ, unc_fail
        _tidy_uncounted(unc)
        if job.is_indexed:
            ctx.succeeded_indexes = ix.with_indexes(ctx.succeeded_indexes, new_succeeded_indexes)
            text = ix.to_string(ctx.succeeded_indexes)
            if text != job.completed_indexes:
                needs_flush = True
            _set_count(status, "succeeded", ix.total(ctx.succeeded_indexes))
            status["completedIndexes"] = text
            failed_text = ix.to_string(ctx.failed_indexes) if ctx.failed_indexes is not None else None
            if failed_text != job.failed_indexes:
                needs_flush = True
                if failed_text is None:
                    status.pop("failedIndexes", None)
                else:
                    status["failedIndexes"] = failed_text
        conds = status.setdefault("conditions", [])
        if ctx.finished is not None and ctx.finished["type"] == JOB_FAILURE_TARGET:
            conds.append(ctx.finished)
            needs_flush = True
            ctx.finished = new_condition(JOB_FAILED, "True", ctx.finished["reason"], ctx.finished["message"], now)
        if ctx.finished is not None and ctx.finished["type"] == JOB_SUCCESS_CRITERIA_MET:
            if _find(conds, JOB_SUCCESS_CRITERIA_MET) is None:
                conds.append(ctx.finished)
                needs_flush = True
            ctx.finished = new_condition(JOB_COMPLETE, "True", ctx.finished["reason"], ctx.finished["message"], now)
        job, needs_flush = self._flush_and_remove_finalizers(ctx, to_remove, with_finalizer, needs_flush)
        finished = not reached_max and self._enact_finished(ctx, now)
        if finished:
            needs_flush = True
        if needs_flush:
            job = self._update_status(job, ctx.status)
            if finished and ctx.finished is not None:
                self._record_finished(job, ctx.finished)

    def _can_remove_finalizer(self, ctx: _SyncCtx, pod: Pod, failed: bool) -> bool:
        if ctx.job.deletion_timestamp is not None or ctx.finished is not None or pod.phase == "Succeeded":
            return True
        if not failed:
            return False
        if ctx.job.backoff_limit_per_index is not None:
            i = ix.completion_index(pod)
            held = ctx.delayed_deletion.get(i)
            if held is not None and held.uid == pod.uid:
                return False  # kept until its replacement carries the index's failure count
        return True

    def _flush_and_remove_finalizers(self, ctx: _SyncCtx, to_remove: list[Pod], with_finalizer: set[str],
                                     needs_flush: bool) -> tuple[Job, bool]:
        """flushUncountedAndRemoveFinalizers."""
        job = ctx.job
        if needs_flush:
            job = self._update_status(job, ctx.status)
            ctx.job = job
            if ctx.backoff is not None:
                self.backoff_store.update(ctx.backoff)
            needs_flush = False
        err: ApiError | None = None
        if to_remove:
            self.finalizer_expectations.expect_removed(job.key, [p.uid for p in to_remove])
            for p in to_remove:
                try:
                    self._remove_finalizer(p)
                except ApiError as e:
                    self.finalizer_expectations.removal_observed(job.key, p.uid)
                    err = e
                    continue
                with_finalizer.discard(p.uid)
        unc = ctx.status["uncountedTerminatedPods"]
        if _clean_uncounted(ctx.status, list(unc.get("succeeded") or ()), list(unc.get("failed") or ()),
                            with_finalizer):
            needs_flush = True
        if err is not None:
            if needs_flush:
                self._update_status(job, ctx.status)
            raise err
        return job, needs_flush

    def _enact_finished(self, ctx: _SyncCtx, now: float) -> bool:
        """enactJobFinished: the terminal condition once nothing is uncounted or terminating."""
        if ctx.finished is None:
            return False
        unc = ctx.status["uncountedTerminatedPods"]
        if unc.get("succeeded") or unc.get("failed"):
            return False
        if ctx.terminating > 0:
            return False
        f = ctx.finished
        ensure_condition(ctx.status["conditions"], f["type"], f["status"], f["reason"], f["message"], now)
        if f["type"] == JOB_COMPLETE:
            ctx.status["completionTime"] = f["lastTransitionTime"]
        return True

    def _record_finished(self, job: Job, cond: dict[str, Any]) -> None:
        if cond["type"] == JOB_COMPLETE:
            if job.completions is not None and job.succeeded > job.completions:
                self.recorder.event(job, "Warning", "TooManySucceededPods", "",
                                    "Too many succeeded pods running after completion count reached")
            self.recorder.event(job, "Normal", "Completed", "", "Job completed")
        else:
            self.recorder.event(job, "Warning", cond["reason"], "", cond["message"])

    def _update_status(self, job: Job, status: dict[str, Any]) -> Job:
        raw = dict(job.raw)
        out = copy.deepcopy(status)
        if not out.get("conditions"):
            out.pop("conditions", None)
        raw["status"] = out
        new = self.client.update_status(raw)
        assert isinstance(new, Job)
        return new


# ---------------------------------------------------------------- module helpers


def _job_controller_uid(p: Any) -> list[str]:
    ref = p.controller_ref()
    return [ref.uid] if ref is not None and ref.kind == "Job" else []


def _managed_by_other(job: Job) -> bool:
    managed = (job.raw.get("spec") or {}).get("managedBy")
    return managed is not None and managed != CONTROLLER_NAME


def _only_replace_failed(job: Job) -> bool:
    return job.pod_replacement_policy == "Failed" or job.pod_failure_policy is not None


def is_pod_failed(p: Pod, job: Job) -> bool:
    """isPodFailed: Failed, or (unless only failed pods are replaced) deleted and not Succeeded."""
    if p.phase == "Failed":
        return True
    if _only_replace_failed(job):
        return False
    return p.deletion_timestamp is not None and p.phase != "Succeeded"


def _non_ignored(job: Job, failed: list[Pod]) -> int:
    if job.pod_failure_policy is None:
        return len(failed)
    return sum(1 for p in failed if match_pod_failure_policy(job.pod_failure_policy, p)[1])


def _fail_job_message(job: Job, pods: list[Pod]) -> str | None:
    if job.pod_failure_policy is None:
        return None
    for p in pods:
        if is_pod_failed(p, job):
            msg, _, _ = match_pod_failure_policy(job.pod_failure_policy, p)
            if msg is not None:
                return msg
    return None


def _past_backoff_limit_on_failure(job: Job, pods: list[Pod]) -> bool:
    """For restartPolicy OnFailure: the restarts of running and pending pods reach the limit."""
    if job.restart_policy != "OnFailure":
        return False
    total = 0
    for p in pods:
        if p.phase in ("Running", "Pending"):
            st = p.raw.get("status") or {}
            for cs in (*(st.get("initContainerStatuses") or ()), *(st.get("containerStatuses") or ())):
                total += int(cs.get("restartCount") or 0)
    if job.backoff_limit == 0:
        return total > 0
    return total >= job.backoff_limit


def _is_index_failed(job: Job, p: Pod) -> bool:
    counted = False
    if is_pod_failed(p, job):
        if job.pod_failure_policy is not None:
            _, counts, action = match_pod_failure_policy(job.pod_failure_policy, p)
            if action == "FailIndex":
                return True
            counted = counts
        else:
            counted = True
    return counted and ix.index_failure_count(p) >= (job.backoff_limit_per_index or 0)


def _absolute_failures(p: Pod) -> int:
    return ix.index_failure_count(p) + ix.index_ignored_failure_count(p)


def _new_index_failure_counts(job: Job, replaced: Pod | None) -> tuple[int, int]:
    if replaced is None:
        return 0, 0
    failures, ignored = ix.index_failure_count(replaced), ix.index_ignored_failure_count(replaced)
    if job.pod_failure_policy is not None and not match_pod_failure_policy(job.pod_failure_policy, replaced)[1]:
        return failures, ignored + 1
    return failures + 1, ignored


def _active_pods_for_removal(job: Job, pods: list[Pod], rm_at_least: int) -> list[Pod]:
    """activePodsForRemoval: for an Indexed Job, repeated and invalid indexes first; then the
    ActivePods order."""
    rm: list[Pod] = []
    left = list(pods)
    if job.is_indexed:
        rm, left = ix.split_duplicated_index_pods(pods, job.completions or 0, active_pods_order)
    if len(rm) < rm_at_least:
        left.sort(key=active_pods_order)
        rm.extend(left[:rm_at_least - len(rm)])
    return rm


def _set_count(status: dict[str, Any], key: str, n: int) -> None:
    """int32 fields with omitempty: absent when zero."""
    if n:
        status[key] = n
    else:
        status.pop(key, None)


def _tidy_uncounted(unc: dict[str, Any]) -> None:
    for k in ("succeeded", "failed"):
        if not unc.get(k):
            unc.pop(k, None)


def _clean_uncounted(status: dict[str, Any], succ: list[str], fail: list[str], with_finalizer: set[str]) -> bool:
    """cleanUncountedPodsWithoutFinalizers: uids whose finalizer is gone move to the counters."""
    unc = status["uncountedTerminatedPods"]
    changed = False
    keep_s = [u for u in succ if u in with_finalizer]
    if len(keep_s) != len(succ):
        changed = True
        _set_count(status, "succeeded", int(status.get("succeeded") or 0) + len(succ) - len(keep_s))
    keep_f = [u for u in fail if u in with_finalizer]
    if len(keep_f) != len(fail):
        changed = True
        _set_count(status, "failed", int(status.get("failed") or 0) + len(fail) - len(keep_f))
    unc["succeeded"], unc["failed"] = keep_s, keep_f
    _tidy_uncounted(unc)
    return changed
