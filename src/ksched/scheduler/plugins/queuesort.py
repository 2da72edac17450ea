"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

from typing import Any

from ksched.scheduler.framework.interface import QueueSortPlugin
from ksched.scheduler.framework.types import QueuedPodInfo

__all__ = ["PrioritySort"]


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1 = a.pod.priority
        p2 = b.pod.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        return (-qpi.pod.priority, qpi.timestamp)
