"""Cluster events and queueing hints: which changes can make a rejected pod schedulable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

__all__ = [
    "ActionType",
    "ClusterEvent",
    "ClusterEventWithHint",
    "EventResource",
    "QueueingHint",
    "QueueingHintFn",
]


class ActionType(IntFlag):
    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_NODE_DECLARED_FEATURE = 1 << 7
    UPDATE_POD_LABEL = 1 << 8
    UPDATE_POD_SCALE_DOWN = 1 << 9
    UPDATE_POD_TOLERATION = 1 << 10
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 11
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 1 << 12
    UPDATE_POD_OTHER = 1 << 13
    UPDATE_NODE_OTHER = 1 << 14
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
              | UPDATE_NODE_ANNOTATION | UPDATE_NODE_DECLARED_FEATURE | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN
              | UPDATE_POD_TOLERATION | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
              | UPDATE_POD_GENERATED_RESOURCE_CLAIM | UPDATE_POD_OTHER | UPDATE_NODE_OTHER)
    ALL = ADD | DELETE | UPDATE
    NONE = 0


class EventResource:
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    NAMESPACE = "Namespace"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: ActionType
    label: str = field(default="", compare=False)

    def match(self, other: ClusterEvent) -> bool:
        """Whether this (registered) event covers ``other`` (an event that happened)."""
        if self.resource == EventResource.WILDCARD and self.action == ActionType.ALL:
            return True
        # A plugin registered for Pod hears about assigned and unscheduled pods alike.
        if self.resource != other.resource and self.resource != EventResource.WILDCARD and not (
                self.resource == EventResource.POD
                and other.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)):
            return False
        return bool(self.action & other.action)

    def is_wildcard(self) -> bool:
        return self.resource == EventResource.WILDCARD and self.action == ActionType.ALL

    def __str__(self) -> str:
        return self.label or f"{self.resource}{self.action!r}"


class QueueingHint(IntEnum):
    QUEUE_SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[[Any, Any, Any], QueueingHint]
"""``fn(pod, old_obj, new_obj) -> QueueingHint``; an exception counts as QUEUE."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


# Events the scheduler itself raises.
NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")
ASSIGNED_POD_UPDATE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE, "AssignedPodUpdate")
UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")
