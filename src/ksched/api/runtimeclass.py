"""RuntimeClass (node.k8s.io/v1): a container runtime configuration a pod may ask for, with the
pod overhead it costs and where it is available (``staging/src/k8s.io/api/node/v1/types.go``).
The RuntimeClass admission plugin copies both into the pod."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["RuntimeClass"]


class RuntimeClass(KubeObject):
    KIND: ClassVar[str] = "RuntimeClass"
    API_VERSION: ClassVar[str] = "node.k8s.io/v1"
    PLURAL: ClassVar[str] = "runtimeclasses"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ("handler", "node_selector", "overhead", "tolerations")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.handler: str = raw.get("handler") or ""
        overhead = raw.get("overhead") or {}
        # The manifest's quantities, as the admission plugin copies them into spec.overhead.
        self.overhead: dict[str, Any] | None = overhead.get("podFixed") if "podFixed" in overhead else None
        sched = raw.get("scheduling") or {}
        self.node_selector: dict[str, str] = sched.get("nodeSelector") or {}
        self.tolerations: list[dict[str, Any]] = sched.get("tolerations") or []
