"""EndpointSlice (discovery.k8s.io/v1): the network endpoints of a Service, as the endpointslice
controller writes them (``staging/src/k8s.io/api/discovery/v1/types.go``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["LABEL_MANAGED_BY", "LABEL_SERVICE_NAME", "EndpointSlice"]

LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


class EndpointSlice(KubeObject):
    KIND: ClassVar[str] = "EndpointSlice"
    API_VERSION: ClassVar[str] = "discovery.k8s.io/v1"
    PLURAL: ClassVar[str] = "endpointslices"

    __slots__ = ("address_type", "endpoints", "ports", "service_name")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.address_type: str = raw.get("addressType") or ""
        self.endpoints: list[dict[str, Any]] = raw.get("endpoints") or []
        self.ports: list[dict[str, Any]] = raw.get("ports") or []
        self.service_name: str = self.labels.get(LABEL_SERVICE_NAME, "")
