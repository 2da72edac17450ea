"""Event (core/v1), as the scheduler records FailedScheduling, Scheduled and Preempted."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["Event"]


class Event(KubeObject):
    KIND: ClassVar[str] = "Event"
    PLURAL: ClassVar[str] = "events"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ev",)

    __slots__ = ("count", "involved_object", "message", "reason", "source", "type")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.involved_object: dict[str, Any] = raw.get("involvedObject") or {}
        self.reason: str = raw.get("reason") or ""
        self.message: str = raw.get("message") or ""
        self.type: str = raw.get("type") or "Normal"
        self.count: int = int(raw.get("count") or 1)
        self.source: dict[str, Any] = raw.get("source") or {}
