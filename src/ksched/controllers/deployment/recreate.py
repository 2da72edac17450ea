"""The Recreate strategy (upstream's ``pkg/controller/deployment/recreate.go``): scale every old
ReplicaSet to 0, wait until none of their pods is left (a terminating pod still counts), then
create or scale up the new ReplicaSet to the full size.
"""

from __future__ import annotations

from typing import Any

from ksched.api.apps import Deployment, ReplicaSet
from ksched.api.pod import Pod
from ksched.controllers.deployment.util import actual_replica_count, deployment_complete, filter_active

__all__ = ["RecreateMixin", "old_pods_running"]


def old_pods_running(new: ReplicaSet | None, old: list[ReplicaSet], pod_map: dict[str, list[Pod]]) -> bool:
    """Whether an old ReplicaSet still reports replicas or has a pod that has not finished."""
    if actual_replica_count(old) > 0:
        return True
    for uid, pods in pod_map.items():
        if new is not None and new.uid == uid:
            continue
        if any(p.phase not in ("Failed", "Succeeded") for p in pods):
            return True
    return False


class RecreateMixin:
    """Mixed into DeploymentController."""

    def _rollout_recreate(self: Any, d: Deployment, rs_list: list[ReplicaSet],
                          pod_map: dict[str, list[Pod]]) -> None:
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, False)
        all_rss: list[ReplicaSet | None] = [*old, new]
        scaled_down = False
        for rs in filter_active(old):
            scaled, _ = self._scale_and_record(rs, 0, d)
            scaled_down = scaled_down or scaled
        if scaled_down:
            self._sync_rollout_status(all_rss, new, d)
            return
        if old_pods_running(new, old, pod_map):
            self._sync_rollout_status(all_rss, new, d)
            return
        if new is None:
            new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, True)
            all_rss = [*old, new]
        assert new is not None
        self._scale_and_record(new, d.replicas, d)
        if deployment_complete(d, d.status):
            self._cleanup_deployment(old, d)
        self._sync_rollout_status(all_rss, new, d)
