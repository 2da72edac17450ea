"""Watch events as the API reports them (upstream's ``apimachinery/pkg/watch``): the event
types and one event. Shared by the embedded store, the HTTP front, the REST client and the
informers."""

from __future__ import annotations

from dataclasses import dataclass

from ksched.api.meta import KubeObject

__all__ = ["ADDED", "BOOKMARK", "DELETED", "ERROR", "MODIFIED", "WatchEvent"]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


@dataclass(slots=True, frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: KubeObject | None  # None for BOOKMARK and ERROR
    resource_version: int
    # The object before the change (set in the store's history, whose events unfiltered
    # watches also receive; read only when history is replayed): lets a filtered watch that
    # resumes from an older resourceVersion see a change out of its selection as a DELETED,
    # as the watch cache does.
    prev: KubeObject | None = None

    def __repr__(self) -> str:
        return f"WatchEvent({self.type}, {self.object!r}, rv={self.resource_version})"
