"""The in-process ``ClusterClient``: calls the embedded store directly (no serialization; the
objects handed out are the store's immutable objects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme
from ksched.apiserver.store import Store
from ksched.apiserver.watch import Watch

__all__ = ["InProcessClient"]


class InProcessClient:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def scheme(self) -> Scheme:
        """The kinds the store serves (its custom ones included)."""
        return self.store.scheme

    def list(self, kind: str, namespace: str | None = None, label_selector: LabelSelector | None = None,
             field_selector: FieldSelector | None = None) -> tuple[list[KubeObject], str]:
        items, rv, _ = self.store.list(kind, namespace, label_selector, field_selector)
        return items, str(rv)

    def watch(self, kind: str, namespace: str | None = None, resource_version: str = "",
              label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
              bookmarks: bool = True) -> Watch:
        return self.store.watch(kind, namespace, resource_version, label_selector, field_selector, bookmarks)

    def get(self, kind: str, namespace: str, name: str) -> KubeObject:
        return self.store.get(kind, namespace, name)

    def create(self, obj: dict[str, Any] | KubeObject, owned: bool = False, validated: bool = False) -> KubeObject:
        """``owned``: the caller built the manifest for this call alone (no copy is made);
        ``validated``: it is valid as given (``Store.create``)."""
        return self.store.create(obj, owned=owned, validated=validated)

    def create_recorded_event(self, name: str, namespace: str, involved: tuple[Any, ...], reason: str,
                              message: str, etype: str, action: str, timestamp: str,
                              component: str) -> KubeObject | None:
        """The event recorder's new Event as its values (``Store.create_recorded_event``): the
        stored Event, or None where the recorder must create its manifest instead."""
        return self.store.create_recorded_event(name, namespace, involved, reason, message, etype, action,
                                                timestamp, component)

    def update(self, obj: dict[str, Any] | KubeObject, subresource: str = "") -> KubeObject:
        return self.store.update(obj, subresource)

    def update_status(self, obj: dict[str, Any] | KubeObject) -> KubeObject:
        return self.store.update(obj, "status")

    def patch(self, kind: str, namespace: str, name: str, patch: Any,
              content_type: str = "application/merge-patch+json", subresource: str = "",
              owned: bool = False) -> KubeObject:
        """``owned``: the caller built the patch for this call alone (``Store.patch``)."""
        return self.store.patch(kind, namespace, name, patch, content_type, subresource, owned=owned)

    def pod_status_writer(self) -> Callable[[str, str, dict[str, Any]], KubeObject]:
        """``write(namespace, name, status)``: ``patch("Pod", namespace, name, {"status": status},
        subresource="status", owned=True)`` (``Store.patch_pod_status``) -- the kubelet's status
        writes (``ksched.kubelet.fake.DIRECT_STATUS_WRITE``)."""
        return self.store.patch_pod_status

    def delete(self, kind: str, namespace: str, name: str, grace_period_seconds: int | None = None,
               uid: str | None = None, propagation_policy: str | None = None,
               resource_version: str | None = None) -> KubeObject | None:
        return self.store.delete(kind, namespace, name, grace_period_seconds=grace_period_seconds, uid=uid,
                                 propagation_policy=propagation_policy, resource_version=resource_version)

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        self.store.bind(pod.namespace, pod.name, node_name, uid=pod.uid, annotations=annotations)

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        self.store.evict(namespace, name, grace_period_seconds)
