"""The one interface through which ksched talks to a cluster. Two implementations: in-process
over the embedded store (``InProcessClient``) and over the Kubernetes REST API."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod

__all__ = ["ClusterClient", "WatchEvent", "WatchStream"]


class WatchEvent(Protocol):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: KubeObject | None
    resource_version: int


@runtime_checkable
class WatchStream(Protocol):
    closed: bool

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None on timeout / when the stream has ended."""
        ...

    def drain(self) -> list[WatchEvent]:
        """Every event already received, without waiting."""
        ...

    def stop(self) -> None: ...


@runtime_checkable
class ClusterClient(Protocol):
    """Everything ksched does to a cluster. Errors are ``ksched.api.errors.ApiError``."""

    def list(self, kind: str, namespace: str | None = None, label_selector: LabelSelector | None = None,
             field_selector: FieldSelector | None = None) -> tuple[list[KubeObject], str]:
        """Objects and the list's resourceVersion."""
        ...

    def watch(self, kind: str, namespace: str | None = None, resource_version: str = "",
              label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
              bookmarks: bool = True) -> WatchStream:
        """A watch from ``resource_version``; raises Gone (410) when it is too old."""
        ...

    def get(self, kind: str, namespace: str, name: str) -> KubeObject: ...

    def create(self, obj: dict[str, Any] | KubeObject) -> KubeObject: ...

    def update(self, obj: dict[str, Any] | KubeObject, subresource: str = "") -> KubeObject:
        """PUT of the object (or of a subresource that takes one: ``status``, namespaces' ``finalize``)."""
        ...

    def update_status(self, obj: dict[str, Any] | KubeObject) -> KubeObject: ...

    def patch(self, kind: str, namespace: str, name: str, patch: Any,
              content_type: str = "application/merge-patch+json", subresource: str = "") -> KubeObject: ...

    def delete(self, kind: str, namespace: str, name: str, grace_period_seconds: int | None = None,
               uid: str | None = None, propagation_policy: str | None = None,
               resource_version: str | None = None) -> KubeObject | None:
        """DELETE with DeleteOptions: grace period, propagation policy (Orphan, Background,
        Foreground; None for the kind's default) and uid / resourceVersion preconditions."""
        ...

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        """``pods/binding``: raises Conflict if the pod is bound already or the node would be
        over-committed (where a conflict resolver runs)."""
        ...

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        """``pods/eviction``: raises TooManyRequests (429) when a PDB forbids it."""
        ...
