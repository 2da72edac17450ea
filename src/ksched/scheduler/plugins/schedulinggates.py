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
        """Queue when the gated pod itself had its gates removed (upstream's
        isSchedulableAfterUpdatePodSchedulingGatesEliminated; the event only fires then)."""
        if not isinstance(new, Pod) or (old is not None and not isinstance(old, Pod)):
            raise TypeError(f"expected Pod objects, got {type(old).__name__} and {type(new).__name__}")
        if (new.uid or new.key) != (pod.uid or pod.key):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
