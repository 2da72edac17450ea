"""ResourceQuota (core/v1): aggregate limits per namespace, and the usage the resourcequota
controller (and quota admission) keep in ``status.used``
(``staging/src/k8s.io/api/core/v1/types.go``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["ResourceQuota"]


class ResourceQuota(KubeObject):
    KIND: ClassVar[str] = "ResourceQuota"
    PLURAL: ClassVar[str] = "resourcequotas"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("quota",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("hard", "scope_selector", "scopes", "status_hard", "status_used")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self.hard: dict[str, Any] = spec.get("hard") or {}
        self.scopes: list[str] = spec.get("scopes") or []
        self.scope_selector: list[dict[str, Any]] = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
        self.status_hard: dict[str, Any] = status.get("hard") or {}
        self.status_used: dict[str, Any] = status.get("used") or {}

    def scope_requirements(self) -> list[dict[str, Any]]:
        """``spec.scopes`` as Exists requirements, then ``spec.scopeSelector``'s (upstream's
        getScopeSelectorsFromQuota)."""
        return [*({"scopeName": s, "operator": "Exists"} for s in self.scopes), *self.scope_selector]
