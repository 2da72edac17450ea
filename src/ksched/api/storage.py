"""Storage kinds the volume plugins read: PersistentVolume, PersistentVolumeClaim (core/v1),
StorageClass and CSINode (storage.k8s.io/v1)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.labels import LabelSelector, NodeSelector
from ksched.api.meta import KubeObject
from ksched.api.quantity import value

__all__ = ["CSINode", "PersistentVolume", "PersistentVolumeClaim", "StorageClass"]

ANNOTATION_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANNOTATION_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANNOTATION_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class PersistentVolume(KubeObject):
    KIND: ClassVar[str] = "PersistentVolume"
    PLURAL: ClassVar[str] = "persistentvolumes"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pv",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("access_modes", "capacity", "claim_ref", "csi_driver", "csi_volume_handle", "node_affinity",
                 "phase", "reclaim_policy", "storage_class_name", "volume_mode")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        cap = (spec.get("capacity") or {}).get("storage")
        self.capacity: int = value(cap) if cap is not None else 0
        self.access_modes: tuple[str, ...] = tuple(spec.get("accessModes") or ())
        self.storage_class_name: str = spec.get("storageClassName") or ""
        self.volume_mode: str = spec.get("volumeMode") or "Filesystem"
        self.reclaim_policy: str = spec.get("persistentVolumeReclaimPolicy") or "Retain"
        cr = spec.get("claimRef")
        self.claim_ref: dict[str, Any] | None = cr if cr else None
        na = (spec.get("nodeAffinity") or {}).get("required")
        self.node_affinity: NodeSelector | None = NodeSelector.from_dict(na) if na is not None else None
        csi = spec.get("csi") or {}
        self.csi_driver: str = csi.get("driver") or ""
        self.csi_volume_handle: str = csi.get("volumeHandle") or ""
        self.phase: str = (raw.get("status") or {}).get("phase") or "Available"

    @property
    def claim_key(self) -> str:
        cr = self.claim_ref
        if not cr:
            return ""
        return f"{cr.get('namespace', '')}/{cr.get('name', '')}"


class PersistentVolumeClaim(KubeObject):
    KIND: ClassVar[str] = "PersistentVolumeClaim"
    PLURAL: ClassVar[str] = "persistentvolumeclaims"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pvc",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("access_modes", "phase", "request", "selector", "storage_class_name", "volume_mode",
                 "volume_name")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        self.volume_name: str = spec.get("volumeName") or ""
        scn = spec.get("storageClassName")
        # None means "use the default class"; "" means "no class".
        self.storage_class_name: str | None = scn
        self.access_modes: tuple[str, ...] = tuple(spec.get("accessModes") or ())
        req = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        self.request: int = value(req) if req is not None else 0
        sel = spec.get("selector")
        self.selector: LabelSelector | None = LabelSelector.from_dict(sel) if sel is not None else None
        self.volume_mode: str = spec.get("volumeMode") or "Filesystem"
        self.phase: str = (raw.get("status") or {}).get("phase") or "Pending"


class StorageClass(KubeObject):
    KIND: ClassVar[str] = "StorageClass"
    API_VERSION: ClassVar[str] = "storage.k8s.io/v1"
    PLURAL: ClassVar[str] = "storageclasses"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sc",)

    __slots__ = ("allowed_topologies", "is_default", "provisioner", "volume_binding_mode")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.provisioner: str = raw.get("provisioner") or ""
        self.volume_binding_mode: str = raw.get("volumeBindingMode") or BINDING_IMMEDIATE
        self.allowed_topologies: list[dict[str, Any]] = raw.get("allowedTopologies") or []
        self.is_default: bool = (self.annotations.get("storageclass.kubernetes.io/is-default-class") == "true")


class CSINode(KubeObject):
    KIND: ClassVar[str] = "CSINode"
    API_VERSION: ClassVar[str] = "storage.k8s.io/v1"
    PLURAL: ClassVar[str] = "csinodes"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ("drivers",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.drivers: dict[str, int | None] = {}
        for d in (raw.get("spec") or {}).get("drivers") or ():
            alloc = (d.get("allocatable") or {}).get("count")
            self.drivers[d.get("name", "")] = int(alloc) if alloc is not None else None
