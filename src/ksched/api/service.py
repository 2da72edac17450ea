"""Service (core/v1): what the scheduler's default topology spread selector and the
endpointslice controller read of it (``staging/src/k8s.io/api/core/v1/types.go``); the rest of
the manifest stays in ``raw``."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["Service", "ServicePort"]


class ServicePort:
    __slots__ = ("name", "node_port", "port", "protocol", "target_port")

    def __init__(self, d: dict[str, Any]) -> None:
        self.name: str = d.get("name") or ""
        self.protocol: str = d.get("protocol") or "TCP"
        self.port: int = int(d.get("port") or 0)
        self.target_port: int | str = d.get("targetPort") if d.get("targetPort") not in (None, "") else self.port
        self.node_port: int = int(d.get("nodePort") or 0)


class Service(KubeObject):
    KIND: ClassVar[str] = "Service"
    PLURAL: ClassVar[str] = "services"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("svc",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("cluster_ip", "ports", "selector", "type")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        # A Service without a selector (or with an empty one, which protobuf storage cannot tell
        # from none) selects no pods: its endpoints are managed by someone else.
        sel = spec.get("selector")
        self.selector: dict[str, str] | None = {k: str(v) for k, v in sel.items()} if sel else None
        self.type: str = spec.get("type") or "ClusterIP"
        self.cluster_ip: str = spec.get("clusterIP") or ""
        self.ports: tuple[ServicePort, ...] = tuple(ServicePort(p) for p in spec.get("ports") or ()
                                                    if isinstance(p, dict))

    def selects(self, namespace: str, labels: dict[str, str]) -> bool:
        """Whether the Service selects a pod with these labels in ``namespace``."""
        sel = self.selector
        if sel is None or namespace != self.namespace:
            return False
        for k, v in sel.items():
            if labels.get(k) != v:
                return False
        return True
