"""The delay before a Job's failed pods are replaced, as upstream's
``pkg/controller/job/backoff_utils.go``: 10 s doubling per failure since the last success,
capped at 10 minutes, counted from the last failure's finish time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ksched.api.meta import parse_time
from ksched.api.pod import Pod

__all__ = ["DEFAULT_POD_FAILURE_BACKOFF", "MAX_POD_FAILURE_BACKOFF", "BackoffRecord", "BackoffStore",
           "finished_time", "remaining_time"]

DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0


def finished_time(pod: Pod) -> float:
    """getFinishedTime: the last container's finish, else when Ready turned False, else the
    deletion (deletionTimestamp - grace period), else the creation."""
    statuses = (pod.raw.get("status") or {}).get("containerStatuses") or []
    latest: float | None = None
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated")
        t = parse_time((term or {}).get("finishedAt"))
        if t is None:
            latest = None
            break
        latest = t if latest is None else max(latest, t)
    if latest is not None:
        return latest
    ready = pod.condition("Ready")
    if ready is not None and ready.get("status") == "False":
        t = parse_time(ready.get("lastTransitionTime"))
        if t is not None:
            return t
    if pod.deletion_timestamp is not None:
        return pod.deletion_timestamp - (pod.deletion_grace_period_seconds or 0)
    return pod.creation_timestamp or 0.0


def remaining_time(now: float, failures: int, last_failure: float | None,
                   default: float = DEFAULT_POD_FAILURE_BACKOFF, maximum: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """getRemainingTimeForFailuresCount."""
    if failures == 0 or last_failure is None:
        return 0.0
    backoff = default
    for _ in range(1, failures):
        backoff *= 2
        if backoff >= maximum:
            backoff = maximum
            break
    elapsed = now - last_failure
    return 0.0 if backoff < elapsed else backoff - elapsed


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    key: str
    failures_after_last_success: int = 0
    last_failure_time: float | None = None

    def remaining(self, now: float) -> float:
        return remaining_time(now, self.failures_after_last_success, self.last_failure_time)


class BackoffStore:
    """The records of the Jobs the controller is syncing (in memory, as upstream's)."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def update(self, record: BackoffRecord) -> None:
        self._records[record.key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)

    def new_record(self, key: str, succeeded: Sequence[Pod], failed: Sequence[Pod]) -> BackoffRecord:
        """newBackoffRecord: the record after the pods that finished since the last sync."""
        old = self._records.get(key) or BackoffRecord(key)
        succ = sorted(finished_time(p) for p in succeeded)
        fail = sorted(finished_time(p) for p in failed)
        if not succ:
            if not fail:
                return old
            return BackoffRecord(key, old.failures_after_last_success + len(fail), fail[-1])
        if not fail:
            return BackoffRecord(key)
        last_success = succ[-1]
        count = 0
        last_failure: float | None = None
        for t in reversed(fail):
            if not t > last_success:
                break
            if last_failure is None:
                last_failure = t
            count += 1
        return BackoffRecord(key, count, last_failure)
