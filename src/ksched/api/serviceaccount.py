"""ServiceAccount (core/v1): the identity pods run as; every namespace has a ``default`` one,
which the serviceaccount controller keeps (``staging/src/k8s.io/api/core/v1/types.go``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["DEFAULT_SERVICE_ACCOUNT", "ServiceAccount"]

DEFAULT_SERVICE_ACCOUNT = "default"


class ServiceAccount(KubeObject):
    KIND: ClassVar[str] = "ServiceAccount"
    PLURAL: ClassVar[str] = "serviceaccounts"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sa",)

    __slots__ = ("automount_token",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        a = raw.get("automountServiceAccountToken")
        self.automount_token: bool | None = a if isinstance(a, bool) else None
