"""Node, as the scheduler reads it."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject
from ksched.api.pod import resource_map
from ksched.api.taints import Taint

__all__ = ["ContainerImage", "Node"]

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"


class ContainerImage:
    __slots__ = ("names", "size_bytes")

    def __init__(self, d: dict[str, Any]) -> None:
        self.names: tuple[str, ...] = tuple(d.get("names") or ())
        self.size_bytes: int = int(d.get("sizeBytes") or 0)


class Node(KubeObject):
    KIND: ClassVar[str] = "Node"
    PLURAL: ClassVar[str] = "nodes"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("no",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("allocatable", "capacity", "conditions", "images", "taints", "unschedulable")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self.unschedulable: bool = bool(spec.get("unschedulable", False))
        self.taints: tuple[Taint, ...] = tuple(Taint.from_dict(t) for t in spec.get("taints") or ())
        cap = status.get("capacity") or {}
        self.capacity: dict[str, int] = resource_map(cap)
        alloc = status.get("allocatable")
        # Allocatable defaults to capacity when a node does not report it (as the fake nodes of
        # scheduler_perf do).
        self.allocatable: dict[str, int] = resource_map(alloc) if alloc is not None else dict(self.capacity)
        self.conditions: list[dict[str, Any]] = status.get("conditions") or []
        self.images: tuple[ContainerImage, ...] = tuple(ContainerImage(i) for i in status.get("images") or ())

    def condition_status(self, ctype: str) -> str:
        for c in self.conditions:
            if c.get("type") == ctype:
                return str(c.get("status", "Unknown"))
        return "Unknown" if ctype == "Ready" else "False"

    @property
    def zone(self) -> str:
        return self.labels.get(LABEL_ZONE) or self.labels.get(LABEL_ZONE_BETA) or ""

    @property
    def region(self) -> str:
        return self.labels.get(LABEL_REGION) or self.labels.get(LABEL_REGION_BETA) or ""
