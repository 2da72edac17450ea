"""A Deployment's progress (upstream's ``pkg/controller/deployment/progress.go``): the
``Progressing`` condition (new ReplicaSet available, progressing, or past
``progressDeadlineSeconds``), ReplicaSet failures raised to the Deployment, and a re-sync at the
deadline of a rollout that shows no progress.
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import Deployment, ReplicaSet
from ksched.api.meta import parse_time
from ksched.controllers.deployment.sync import calculate_status
from ksched.controllers.deployment.util import (
    NEW_RS_AVAILABLE,
    PROGRESSING,
    REPLICA_FAILURE,
    REPLICA_SET_UPDATED,
    TIMED_OUT,
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    get_condition,
    has_progress_deadline,
    new_condition,
    remove_condition,
    rs_to_deployment_condition,
    set_condition,
)

__all__ = ["ProgressMixin", "replica_failures"]


def replica_failures(all_rss: list[ReplicaSet | None], new: ReplicaSet | None) -> list[dict[str, Any]]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any (``getReplicaFailures``)."""
    def of(rs: ReplicaSet) -> list[dict[str, Any]]:
        return [rs_to_deployment_condition(c) for c in rs.conditions if c.get("type") == REPLICA_FAILURE]

    if new is not None and (found := of(new)):
        return found
    return [c for rs in all_rss if rs is not None for c in of(rs)]


class ProgressMixin:
    """Mixed into DeploymentController."""

    def _sync_rollout_status(self: Any, all_rss: list[ReplicaSet | None], new: ReplicaSet | None,
                             d: Deployment) -> None:
        now = self.clock.now()
        status = calculate_status(all_rss, new, d, now)
        if not has_progress_deadline(d):
            remove_condition(status, PROGRESSING)
        current = get_condition(d.status, PROGRESSING)
        complete = int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0) and \
            current is not None and current.get("reason") == NEW_RS_AVAILABLE
        if has_progress_deadline(d) and not complete:
            if deployment_complete(d, status):
                msg = f'ReplicaSet "{new.name}" has successfully progressed.' if new is not None else \
                    f'Deployment "{d.name}" has successfully progressed.'
                set_condition(status, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, now))
            elif deployment_progressing(d, status):
                msg = f'ReplicaSet "{new.name}" is progressing.' if new is not None else \
                    f'Deployment "{d.name}" is progressing.'
                cond = new_condition(PROGRESSING, "True", REPLICA_SET_UPDATED, msg, now)
                # Progress updates lastUpdateTime even with the same reason (set_condition would not).
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, PROGRESSING)
                set_condition(status, cond)
            elif deployment_timed_out(d, status, now):
                msg = f'ReplicaSet "{new.name}" has timed out progressing.' if new is not None else \
                    f'Deployment "{d.name}" has timed out progressing.'
                set_condition(status, new_condition(PROGRESSING, "False", TIMED_OUT, msg, now))
        failures = replica_failures(all_rss, new)
        if failures:
            set_condition(status, failures[0])
        else:
            remove_condition(status, REPLICA_FAILURE)
        if status == d.status:
            self._requeue_stuck_deployment(d, status, now)
            return
        self._update_status(d, copy.deepcopy(status))

    def _requeue_stuck_deployment(self: Any, d: Deployment, status: dict[str, Any], now: float) -> None:
        """A rollout without progress is re-synced when its deadline passes."""
        current = get_condition(d.status, PROGRESSING)
        if not has_progress_deadline(d) or current is None:
            return
        if deployment_complete(d, status) or current.get("reason") == TIMED_OUT:
            return
        last = parse_time(current.get("lastUpdateTime"))
        if last is None:
            return
        after = last + d.progress_deadline_seconds - now
        if after < 1.0:
            self.queue.add_rate_limited(d.key)
        else:
            # A second more, against skew on the boundary (as upstream).
            self.queue.add_after(d.key, after + 1.0)
