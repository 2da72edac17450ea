"""batch/v1 Job and CronJob, as the controllers read them (``staging/src/k8s.io/api/batch/v1/types.go``),
with the well-known labels, annotations, finalizer and condition types of that package.

The typed attributes are a read-only view of the manifest, which the API server has defaulted
(``ksched.apiserver.batch``); absent fields read as upstream's defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject, parse_time

__all__ = [
    "CONTROLLER_UID_LABEL",
    "CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION",
    "JOB_COMPLETE",
    "JOB_COMPLETION_INDEX_ANNOTATION",
    "JOB_FAILED",
    "JOB_FAILURE_TARGET",
    "JOB_INDEX_FAILURE_COUNT_ANNOTATION",
    "JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION",
    "JOB_NAME_LABEL",
    "JOB_SUCCESS_CRITERIA_MET",
    "JOB_SUSPENDED",
    "JOB_TRACKING_FINALIZER",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "CronJob",
    "Job",
]

# Labels the API server puts on a Job's pod template (and so on its pods).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
# On a pod of an Indexed Job (annotation and label), and its per-index failure counts.
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
# The Job controller's finalizer on the pods it counts.
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
# On a Job a CronJob created: the scheduled time it stands for (RFC 3339, in the CronJob's zone).
CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"

JOB_SUSPENDED = "Suspended"
JOB_COMPLETE = "Complete"
JOB_FAILED = "Failed"
JOB_FAILURE_TARGET = "FailureTarget"
JOB_SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"


def _opt_int(v: Any) -> int | None:
    return int(v) if v is not None else None


class Job(KubeObject):
    KIND: ClassVar[str] = "Job"
    API_VERSION: ClassVar[str] = "batch/v1"
    PLURAL: ClassVar[str] = "jobs"
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("active", "active_deadline_seconds", "backoff_limit", "backoff_limit_per_index",
                 "completed_indexes", "completion_mode", "completion_time", "completions", "conditions",
                 "failed", "failed_indexes", "manual_selector", "max_failed_indexes", "parallelism",
                 "pod_failure_policy", "pod_replacement_policy", "ready", "selector", "start_time",
                 "succeeded", "suspend", "template", "terminating", "ttl_seconds_after_finished",
                 "uncounted_failed", "uncounted_succeeded")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        completions = spec.get("completions")
        parallelism = spec.get("parallelism")
        if completions is None and parallelism is None:
            completions = parallelism = 1
        self.parallelism: int = int(parallelism if parallelism is not None else 1)
        self.completions: int | None = _opt_int(completions)
        self.backoff_limit_per_index: int | None = _opt_int(spec.get("backoffLimitPerIndex"))
        bl = spec.get("backoffLimit")
        self.backoff_limit: int = int(bl) if bl is not None else (
            2**31 - 1 if self.backoff_limit_per_index is not None else 6)
        self.max_failed_indexes: int | None = _opt_int(spec.get("maxFailedIndexes"))
        self.completion_mode: str = spec.get("completionMode") or "NonIndexed"
        self.active_deadline_seconds: int | None = _opt_int(spec.get("activeDeadlineSeconds"))
        self.ttl_seconds_after_finished: int | None = _opt_int(spec.get("ttlSecondsAfterFinished"))
        self.suspend: bool = bool(spec.get("suspend", False))
        self.manual_selector: bool = bool(spec.get("manualSelector", False))
        self.selector = LabelSelector.from_dict(spec.get("selector"))
        self.template: dict[str, Any] = spec.get("template") or {}
        self.pod_failure_policy: dict[str, Any] | None = spec.get("podFailurePolicy")
        self.pod_replacement_policy: str = spec.get("podReplacementPolicy") or (
            "Failed" if self.pod_failure_policy is not None else "TerminatingOrFailed")
        self.active: int = int(status.get("active") or 0)
        self.succeeded: int = int(status.get("succeeded") or 0)
        self.failed: int = int(status.get("failed") or 0)
        self.ready: int | None = _opt_int(status.get("ready"))
        self.terminating: int | None = _opt_int(status.get("terminating"))
        self.conditions: list[dict[str, Any]] = status.get("conditions") or []
        self.start_time: float | None = parse_time(status.get("startTime"))
        self.completion_time: float | None = parse_time(status.get("completionTime"))
        self.completed_indexes: str = status.get("completedIndexes") or ""
        self.failed_indexes: str | None = status.get("failedIndexes")
        unc = status.get("uncountedTerminatedPods") or {}
        self.uncounted_succeeded: list[str] = list(unc.get("succeeded") or ())
        self.uncounted_failed: list[str] = list(unc.get("failed") or ())

    @property
    def is_indexed(self) -> bool:
        return self.completion_mode == "Indexed"

    @property
    def restart_policy(self) -> str:
        return str((self.template.get("spec") or {}).get("restartPolicy") or "")

    def condition(self, ctype: str) -> dict[str, Any] | None:
        for c in self.conditions:
            if c.get("type") == ctype:
                return c
        return None

    def has_condition(self, ctype: str) -> bool:
        c = self.condition(ctype)
        return c is not None and c.get("status") == "True"

    def finished_condition(self) -> dict[str, Any] | None:
        """The Complete or Failed condition that is True (util.IsJobFinished), if any."""
        for c in self.conditions:
            if c.get("type") in (JOB_COMPLETE, JOB_FAILED) and c.get("status") == "True":
                return c
        return None

    @property
    def is_finished(self) -> bool:
        return self.finished_condition() is not None

    @property
    def is_succeeded(self) -> bool:
        return self.has_condition(JOB_COMPLETE)


class CronJob(KubeObject):
    KIND: ClassVar[str] = "CronJob"
    API_VERSION: ClassVar[str] = "batch/v1"
    PLURAL: ClassVar[str] = "cronjobs"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cj",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("active", "concurrency_policy", "failed_jobs_history_limit", "job_template",
                 "last_schedule_time", "last_successful_time", "schedule", "starting_deadline_seconds",
                 "successful_jobs_history_limit", "suspend", "time_zone")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self.schedule: str = spec.get("schedule") or ""
        self.time_zone: str | None = spec.get("timeZone")
        self.starting_deadline_seconds: int | None = _opt_int(spec.get("startingDeadlineSeconds"))
        self.concurrency_policy: str = spec.get("concurrencyPolicy") or "Allow"
        self.suspend: bool = bool(spec.get("suspend", False))
        self.job_template: dict[str, Any] = spec.get("jobTemplate") or {}
        sl = spec.get("successfulJobsHistoryLimit")
        fl = spec.get("failedJobsHistoryLimit")
        self.successful_jobs_history_limit: int | None = int(sl) if sl is not None else 3
        self.failed_jobs_history_limit: int | None = int(fl) if fl is not None else 1
        self.active: list[dict[str, Any]] = list(status.get("active") or ())
        self.last_schedule_time: float | None = parse_time(status.get("lastScheduleTime"))
        self.last_successful_time: float | None = parse_time(status.get("lastSuccessfulTime"))
