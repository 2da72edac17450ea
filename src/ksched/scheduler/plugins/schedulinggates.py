"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of activeQ until they are removed."""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import EnqueueExtensions, PreEnqueuePlugin
from ksched.scheduler.framework.status import Code, Status

__all__ = ["SchedulingGates"]


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]", plugin=self.name)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
            self._after_update)]

    @staticmethod
    def _after_update(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if new is None or (new.uid or new.key) != (pod.uid or pod.key):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if not new.scheduling_gates else QueueingHint.QUEUE_SKIP
