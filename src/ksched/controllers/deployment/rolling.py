"""The RollingUpdate strategy (upstream's ``pkg/controller/deployment/rolling.go``): scale the new
ReplicaSet up while all pods stay within ``replicas + maxSurge``, then the old ones down while at
least ``replicas - maxUnavailable`` pods stay available -- unhealthy old replicas first, then
the oldest ReplicaSets first.
"""

from __future__ import annotations

from typing import Any

from ksched.api.apps import Deployment, ReplicaSet
from ksched.controllers.deployment.util import (
    available_replica_count,
    by_creation,
    deployment_complete,
    filter_active,
    max_unavailable,
    new_rs_new_replicas,
    replica_count,
)

__all__ = ["RollingMixin"]


class RollingMixin:
    """Mixed into DeploymentController (which provides the sync helpers used here)."""

    def _rollout_rolling(self: Any, d: Deployment, rs_list: list[ReplicaSet]) -> None:
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, True)
        all_rss = [*old, new]
        # The status is computed from the ReplicaSets as listed (their spec may lag a scale here),
        # as upstream does.
        scaled_up, _ = self._reconcile_new_replica_set(all_rss, new, d)
        if scaled_up:
            self._sync_rollout_status(all_rss, new, d)
            return
        if self._reconcile_old_replica_sets(all_rss, filter_active(old), new, d):
            self._sync_rollout_status(all_rss, new, d)
            return
        if deployment_complete(d, d.status):
            self._cleanup_deployment(old, d)
        self._sync_rollout_status(all_rss, new, d)

    def _reconcile_new_replica_set(self: Any, all_rss: list[ReplicaSet], new: ReplicaSet,
                                   d: Deployment) -> tuple[bool, ReplicaSet]:
        if new.replicas == d.replicas:
            return False, new
        if new.replicas > d.replicas:
            return self._scale_and_record(new, d.replicas, d)  # type: ignore[no-any-return]
        count = new_rs_new_replicas(d, all_rss, new.replicas)
        return self._scale_and_record(new, count, d)  # type: ignore[no-any-return]

    def _reconcile_old_replica_sets(self: Any, all_rss: list[ReplicaSet], old: list[ReplicaSet],
                                    new: ReplicaSet, d: Deployment) -> bool:
        if replica_count(old) == 0:
            return False  # nothing left to scale down
        min_avail = d.replicas - max_unavailable(d)
        new_unavailable = new.replicas - new.available_replicas
        # Not only maxUnavailable and the surge, but the new ReplicaSet's unavailable pods too: scaling
        # old ones down on their account would lower availability further.
        max_scaled_down = replica_count(all_rss) - min_avail - new_unavailable
        if max_scaled_down <= 0:
            return False
        old, cleaned = self._cleanup_unhealthy_replicas(old, d, max_scaled_down)
        scaled = self._scale_down_old_replica_sets_for_rolling_update([*old, new], old, d)
        return cleaned + scaled > 0

    def _cleanup_unhealthy_replicas(self: Any, old: list[ReplicaSet], d: Deployment,
                                    max_cleanup: int) -> tuple[list[ReplicaSet], int]:
        """Scale old ReplicaSets down by their unavailable replicas, oldest first (they are deleted
        first by the ReplicaSet controller, so availability does not drop)."""
        old = by_creation(old)
        total = 0
        for i, rs in enumerate(old):
            if total >= max_cleanup:
                break
            if rs.replicas == 0 or rs.replicas == rs.available_replicas:
                continue
            down = min(max_cleanup - total, rs.replicas - rs.available_replicas)
            _, old[i] = self._scale_and_record(rs, rs.replicas - down, d)
            total += down
        return old, total

    def _scale_down_old_replica_sets_for_rolling_update(self: Any, all_rss: list[ReplicaSet],
                                                        old: list[ReplicaSet], d: Deployment) -> int:
        min_avail = d.replicas - max_unavailable(d)
        available = available_replica_count(all_rss)
        if available <= min_avail:
            return 0
        total = 0
        budget = available - min_avail
        for rs in by_creation(old):
            if total >= budget:
                break
            if rs.replicas == 0:
                continue
            down = min(rs.replicas, budget - total)
            self._scale_and_record(rs, rs.replicas - down, d)
            total += down
        return total
