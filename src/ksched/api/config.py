"""ConfigMap and Secret (core/v1): configuration data for pods. ksched runs no containers, so it
only stores them (``staging/src/k8s.io/api/core/v1/types.go``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["SECRET_TYPE_OPAQUE", "ConfigMap", "Secret"]

SECRET_TYPE_OPAQUE = "Opaque"


class ConfigMap(KubeObject):
    KIND: ClassVar[str] = "ConfigMap"
    PLURAL: ClassVar[str] = "configmaps"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cm",)

    __slots__ = ("data", "immutable")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.data: dict[str, str] = raw.get("data") or {}
        self.immutable: bool = bool(raw.get("immutable", False))


class Secret(KubeObject):
    KIND: ClassVar[str] = "Secret"
    PLURAL: ClassVar[str] = "secrets"

    __slots__ = ("immutable", "type")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.type: str = raw.get("type") or SECRET_TYPE_OPAQUE
        self.immutable: bool = bool(raw.get("immutable", False))
