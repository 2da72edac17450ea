"""Namespace."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["Namespace"]


class Namespace(KubeObject):
    KIND: ClassVar[str] = "Namespace"
    PLURAL: ClassVar[str] = "namespaces"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ns",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("phase",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.phase: str = (raw.get("status") or {}).get("phase") or "Active"
