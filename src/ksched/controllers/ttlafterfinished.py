"""The TTL-after-finished controller, as upstream's
``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``: a finished Job (a Complete or
Failed condition) with ``spec.ttlSecondsAfterFinished`` is deleted, Foreground with a uid
precondition, that many seconds after the condition's lastTransitionTime -- re-read from the API
first, in case the TTL changed.

Divergences: none known.
"""

from __future__ import annotations

from typing import Any

from ksched.api.batch import Job
from ksched.api.errors import NotFound
from ksched.api.meta import parse_time
from ksched.client.informer import EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["TTLAfterFinishedController", "time_left"]


def _needs_cleanup(job: Job) -> bool:
    return job.ttl_seconds_after_finished is not None and job.is_finished


def time_left(job: Job, now: float) -> tuple[float, float]:
    """(seconds left before the Job expires, when it expires)."""
    cond = job.finished_condition() or {}
    finished = parse_time(cond.get("lastTransitionTime")) or now
    expire_at = finished + (job.ttl_seconds_after_finished or 0)
    return expire_at - now, expire_at


class TTLAfterFinishedController(Controller):
    """Keys are Job keys."""

    name = "ttl-after-finished"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.jobs = informers.informer("Job")
        self.jobs.add_handler(EventHandler(self._on_job, lambda old, new: self._on_job(new)))

    def _on_job(self, job: Job) -> None:
        if job.deletion_timestamp is None and _needs_cleanup(job):
            self.queue.add(job.key)

    def _process_ttl(self, job: Any) -> bool:
        """Whether the Job has expired; if not yet, look again when it will."""
        if not isinstance(job, Job) or job.deletion_timestamp is not None or not _needs_cleanup(job):
            return False
        left, _ = time_left(job, self.clock.now())
        if left <= 0:
            return True
        self.queue.add_after(job.key, left)
        return False

    def sync(self, key: Any) -> None:
        if not self._process_ttl(self.jobs.get(key)):
            return
        ns, _, name = str(key).partition("/")
        try:
            fresh = self.client.get("Job", ns, name)
        except NotFound:
            return
        if not self._process_ttl(fresh):
            return
        try:
            self.client.delete("Job", fresh.namespace, fresh.name, uid=fresh.uid, propagation_policy="Foreground")
        except NotFound:
            pass
