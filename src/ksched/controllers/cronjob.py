"""The CronJob controller, as upstream's ``pkg/controller/cronjob/cronjob_controllerv2.go`` and
``utils.go``: at each scheduled time (robfig/cron v3 semantics, ``ksched.api.cron``; the
CronJob's ``timeZone``, else UTC) a Job named ``<cronjob>-<scheduled time in minutes>`` from the
job template, annotated with ``batch.kubernetes.io/cronjob-scheduled-timestamp``; only the most
recent missed time runs, within ``startingDeadlineSeconds``; concurrencyPolicy Allow, Forbid
(skip while a Job is active) or Replace (delete the active Jobs, Background); the active list,
``lastScheduleTime`` and ``lastSuccessfulTime`` in the status; finished Jobs beyond the history
limits deleted oldest first. The controller wakes at the next scheduled time plus 100 ms, on
the cluster's clock. Events carry upstream's reasons and messages.

Divergences: none known beyond the cron parser's (see ``ksched.api.cron``).
"""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from typing import Any

from ksched.api.batch import CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION, CronJob, Job
from ksched.api.cron import CronError, Schedule, load_location, parse_standard
from ksched.api.errors import AlreadyExists, ApiError, NotFound
from ksched.api.meta import format_time, parse_time
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["NEXT_SCHEDULE_DELTA", "CronJobController", "job_name", "most_recent_schedule_time"]

log = logging.getLogger(__name__)

NEXT_SCHEDULE_DELTA = 0.1
TOO_MANY_MISSED = 100

NONE_MISSED, FEW_MISSED, MANY_MISSED = "none", "few", "many"


def job_name(cj: CronJob, scheduled: float) -> str:
    """``<cronjob>-<scheduled time in minutes since the epoch>`` (getJobName)."""
    return f"{cj.name}-{int(scheduled) // 60}"


def format_schedule(cj: CronJob, recorder: EventRecorder | None) -> str:
    """formatSchedule: the schedule with the CronJob's time zone as a TZ= prefix."""
    if "TZ" in cj.schedule:
        if recorder is not None:
            recorder.event(cj, "Warning", "UnsupportedSchedule", "",
                           f'CRON_TZ or TZ used in schedule "{cj.schedule}" is not officially supported, see '
                           "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details")
        return cj.schedule
    if cj.time_zone is not None:
        try:
            load_location(cj.time_zone)
        except CronError:
            return cj.schedule
        return f"TZ={cj.time_zone} {cj.schedule}"
    return cj.schedule


def most_recent_schedule_time(cj: CronJob, now: float, schedule: Schedule,
                              include_starting_deadline: bool) -> tuple[float, float | None, str]:
    """mostRecentScheduleTime: (earliest time considered, the most recent scheduled time not
    after ``now`` or None, how many were missed). Raises CronError for a schedule whose next
    two times are less than a second apart (one that never fires)."""
    earliest = cj.last_schedule_time if cj.last_schedule_time is not None else (cj.creation_timestamp or now)
    if include_starting_deadline and cj.starting_deadline_seconds is not None:
        earliest = max(earliest, now - cj.starting_deadline_seconds)
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is not None and now < t1:
        return earliest, None, NONE_MISSED
    if t1 is not None and t2 is not None and now < t2:
        return earliest, t1, FEW_MISSED
    if t1 is None or t2 is None or round(t2 - t1) < 1:
        raise CronError("time difference between two schedules is less than 1 second")
    missed = int(now - t1) // round(t2 - t1) + 1
    most_recent = t2
    if missed <= 10 * TOO_MANY_MISSED:
        t: float | None = t2
        while t is not None and t <= now:
            most_recent = t
            t = schedule.next(t)
    else:  # far too many to walk: the rough estimate, as upstream's count
        most_recent = t1 + (missed - 1) * round(t2 - t1)
    return earliest, most_recent, MANY_MISSED if missed > TOO_MANY_MISSED else FEW_MISSED


def _rfc1123z(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")


def _rfc3339_in(t: float, zone: str | None) -> str:
    loc = load_location(zone or "")
    d = datetime.fromtimestamp(t, UTC).astimezone(loc)
    if d.utcoffset() == UTC.utcoffset(None):
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    return d.isoformat(timespec="seconds")


class CronJobController(Controller):
    """Keys are CronJob keys (namespace/name)."""

    name = "cronjob"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.recorder = EventRecorder(client, clock, component="cronjob-controller")
        self.cronjobs = informers.informer("CronJob")
        self.jobs = informers.informer("Job")
        self.cronjobs.add_handler(EventHandler(lambda cj: self.queue.add(cj.key), self._update_cronjob))
        self.jobs.add_handler(EventHandler(self._on_job, lambda old, new: self._on_job(new), self._on_job))

    def _on_job(self, obj: Any) -> None:
        job = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = job.controller_ref()
        if ref is None or ref.kind != "CronJob":
            return
        cj = self.cronjobs.get(f"{job.namespace}/{ref.name}")
        if isinstance(cj, CronJob) and cj.uid == ref.uid:
            self.queue.add(cj.key)

    def _update_cronjob(self, old: CronJob, new: CronJob) -> None:
        if old.schedule != new.schedule or old.time_zone != new.time_zone:
            try:
                sched = parse_standard(format_schedule(new, None))
            except CronError as e:
                self.recorder.event(new, "Warning", "UnParseableCronJobSchedule", "",
                                    f"unparseable schedule for cronjob: {new.schedule}")
                log.debug("cronjob %s: %s", new.key, e)
                return
            t = self._next_schedule_duration(new, self.clock.now(), sched)
            if t is not None:
                self.queue.add_after(new.key, t)
            return
        self.queue.add(new.key)

    def _next_schedule_duration(self, cj: CronJob, now: float, sched: Schedule) -> float | None:
        """nextScheduleTimeDuration: how long until the next scheduled time (plus 100 ms)."""
        try:
            earliest, recent, missed = most_recent_schedule_time(cj, now, sched, False)
        except CronError:
            recent, missed, earliest = now, FEW_MISSED, now
        if recent is None:
            recent = earliest if missed == NONE_MISSED else now
        nxt = sched.next(recent)
        return None if nxt is None else nxt + NEXT_SCHEDULE_DELTA - now

    # ---------------------------------------------------------------- sync

    def sync(self, key: Any) -> None:
        cj = self.cronjobs.get(key)
        if not isinstance(cj, CronJob):
            return
        jobs = [j for j in self.jobs.indexer.by_index("namespace", cj.namespace)
                if isinstance(j, Job) and (r := j.controller_ref()) is not None and r.name == cj.name]
        status = copy.deepcopy(cj.raw.get("status") or {})
        try:
            requeue, update = self._sync_cronjob(cj, status, jobs)
        except ApiError:
            self._update_status(cj, status)
            raise
        if self._cleanup_finished_jobs(cj, status, jobs):
            update = True
        if update:
            self._update_status(cj, status)
        if requeue is not None:
            self.queue.add_after(key, requeue)

    def _update_status(self, cj: CronJob, status: dict[str, Any]) -> None:
        if status == (cj.raw.get("status") or {}):
            return
        raw = dict(cj.raw)
        raw["status"] = status
        self.client.update_status(raw)

    def _sync_cronjob(self, cj: CronJob, status: dict[str, Any], jobs: list[Job]) -> tuple[float | None, bool]:
        now = self.clock.now()
        update = False
        active: list[dict[str, Any]] = status.setdefault("active", [])
        uids = {r.get("uid") for r in active}
        children: set[str] = set()
        for j in jobs:
            children.add(j.uid)
            in_active = j.uid in uids
            finished = j.finished_condition()
            if not in_active and finished is None:
                self.recorder.event(cj, "Warning", "UnexpectedJob", "",
                                    f"Saw a job that the controller did not create or forgot: {j.name}")
            elif in_active and finished is not None:
                active[:] = [r for r in active if r.get("uid") != j.uid]
                self.recorder.event(cj, "Normal", "SawCompletedJob", "",
                                    f"Saw completed job: {j.name}, condition: {finished.get('type')}")
                update = True
            elif j.is_succeeded and j.completion_time is not None:
                # Seen finished before (not in the active list): its completion time counts.
                last = parse_time(status.get("lastSuccessfulTime"))
                if last is None or j.completion_time > last:
                    status["lastSuccessfulTime"] = format_time(j.completion_time)
                    update = True
        for r in list(active):
            if r.get("uid") in children:
                continue
            try:
                self.client.get("Job", r.get("namespace") or cj.namespace, r.get("name") or "")
            except NotFound:
                self.recorder.event(cj, "Normal", "MissingJob", "", f"Active job went missing: {r.get('name')}")
                active[:] = [x for x in active if x.get("uid") != r.get("uid")]
                update = True
        if not active:
            status.pop("active", None)
        if cj.deletion_timestamp is not None:
            return None, update
        if cj.time_zone is not None:
            try:
                load_location(cj.time_zone)
            except CronError as e:
                self.recorder.event(cj, "Warning", "UnknownTimeZone", "", f'invalid timeZone: "{cj.time_zone}": {e}')
                return None, update
        if cj.suspend:
            return None, update
        try:
            sched = parse_standard(format_schedule(cj, self.recorder))
        except CronError as e:
            self.recorder.event(cj, "Warning", "UnparseableSchedule", "",
                                f'unparseable schedule: "{cj.schedule}" : {e}')
            return None, update
        try:
            _, scheduled, missed = most_recent_schedule_time(cj, now, sched, True)
        except CronError as e:
            self.recorder.event(cj, "Warning", "InvalidSchedule", "", f"invalid schedule: {cj.schedule} : {e}")
            return None, update
        if scheduled is not None and missed == MANY_MISSED:
            self.recorder.event(cj, "Warning", "TooManyMissedTimes", "",
                                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or "
                                "check clock skew")
        nxt = self._next_schedule_duration(cj, now, sched)
        if scheduled is None or scheduled > now:
            return nxt, update
        if cj.starting_deadline_seconds is not None and scheduled + cj.starting_deadline_seconds < now:
            self.recorder.event(cj, "Warning", "MissSchedule", "",
                                f"Missed scheduled time to start a job: {_rfc1123z(scheduled)}")
            return nxt, update
        name = job_name(cj, scheduled)
        if any(r.get("name") == name for r in status.get("active") or ()) or \
                (cj.last_schedule_time is not None and cj.last_schedule_time == scheduled):
            return nxt, update
        if cj.concurrency_policy == "Forbid" and status.get("active"):
            self.recorder.event(cj, "Normal", "JobAlreadyActive", "",
                                "Not starting job because prior execution is running and concurrency policy is "
                                "Forbid")
            return nxt, update
        if cj.concurrency_policy == "Replace":
            for r in list(status.get("active") or ()):
                try:
                    job = self.client.get("Job", r.get("namespace") or cj.namespace, r.get("name") or "")
                except ApiError as e:
                    self.recorder.event(cj, "Warning", "FailedGet", "", f"Get job: {e.message}")
                    raise
                self._delete_job(cj, status, job)
                update = True
        job_raw = self._job_from_template(cj, scheduled, name)
        try:
            created = self.client.create(job_raw)
            self.recorder.event(cj, "Normal", "SuccessfulCreate", "", f"Created job {created.name}")
        except AlreadyExists:
            created = self.client.get("Job", cj.namespace, name)
            ref = created.controller_ref()
            if ref is None or ref.uid != cj.uid:
                return None, update  # another actor's Job: it keeps the status
            if any(r.get("uid") == created.uid for r in status.get("active") or ()):
                return None, update
        except ApiError as e:
            if any(c.get("reason") == "NamespaceTerminating" for c in e.causes):
                raise
            self.recorder.event(cj, "Warning", "FailedCreate", "", f"Error creating job: {e.message}")
            raise
        status.setdefault("active", []).append({
            "kind": "Job", "namespace": created.namespace, "name": created.name, "uid": created.uid,
            "apiVersion": "batch/v1", "resourceVersion": created.resource_version})
        status["lastScheduleTime"] = format_time(scheduled)
        return nxt, True

    def _job_from_template(self, cj: CronJob, scheduled: float, name: str) -> dict[str, Any]:
        """getJobFromTemplate2."""
        tmpl = cj.job_template
        md = tmpl.get("metadata") or {}
        annotations = dict(md.get("annotations") or {})
        annotations[CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] = _rfc3339_in(scheduled, cj.time_zone)
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "namespace": cj.namespace, "labels": dict(md.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cj.name, "uid": cj.uid,
                                 "controller": True, "blockOwnerDeletion": True}]},
            "spec": copy.deepcopy(tmpl.get("spec") or {})}

    def _delete_job(self, cj: CronJob, status: dict[str, Any], job: Any) -> bool:
        try:
            self.client.delete("Job", job.namespace, job.name, propagation_policy="Background")
        except NotFound:
            pass
        except ApiError as e:
            self.recorder.event(cj, "Warning", "FailedDelete", "", f"Deleted job: {e.message}")
            return False
        active = [r for r in status.get("active") or () if r.get("uid") != job.uid]
        if active:
            status["active"] = active
        else:
            status.pop("active", None)
        self.recorder.event(cj, "Normal", "SuccessfulDelete", "", f"Deleted job {job.name}")
        return True

    def _cleanup_finished_jobs(self, cj: CronJob, status: dict[str, Any], jobs: list[Job]) -> bool:
        """cleanupFinishedJobs: finished Jobs beyond the history limits, oldest start first."""
        if cj.successful_jobs_history_limit is None and cj.failed_jobs_history_limit is None:
            return False
        done = [j for j in jobs if j.finished_condition() is not None]
        ok = [j for j in done if j.is_succeeded]
        failed = [j for j in done if not j.is_succeeded]
        changed = False
        for group, limit in ((ok, cj.successful_jobs_history_limit), (failed, cj.failed_jobs_history_limit)):
            if limit is None or len(group) <= limit:
                continue
            # byJobStartTime: jobs that never started last, ties by name.
            group.sort(key=lambda j: (j.start_time is None, j.start_time or 0.0, j.name))
            for j in group[:len(group) - limit]:
                if self._delete_job(cj, status, j):
                    changed = True
        return changed

