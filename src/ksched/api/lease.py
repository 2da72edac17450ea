"""Lease (coordination.k8s.io/v1): leader election and scheduler-instance heartbeats."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject, parse_time

__all__ = ["Lease"]


class Lease(KubeObject):
    KIND: ClassVar[str] = "Lease"
    API_VERSION: ClassVar[str] = "coordination.k8s.io/v1"
    PLURAL: ClassVar[str] = "leases"

    __slots__ = ("acquire_time", "holder_identity", "lease_duration_seconds", "lease_transitions", "renew_time")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        self.holder_identity: str = spec.get("holderIdentity") or ""
        lds = spec.get("leaseDurationSeconds")
        self.lease_duration_seconds: int = int(lds) if lds is not None else 0
        self.acquire_time: float | None = parse_time(spec.get("acquireTime"))
        self.renew_time: float | None = parse_time(spec.get("renewTime"))
        self.lease_transitions: int = int(spec.get("leaseTransitions") or 0)
