"""Role-based access control (rbac.authorization.k8s.io/v1): Role, ClusterRole, RoleBinding and
ClusterRoleBinding, stored and served so deployment manifests apply
(``staging/src/k8s.io/api/rbac/v1/types.go``).

Divergence: nothing is enforced. The embedded API server has one authenticated user, who may
do everything; the objects are kept for the clients that read them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]

_GROUP_VERSION = "rbac.authorization.k8s.io/v1"


class _Rules(KubeObject):
    __slots__ = ("rules",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.rules: list[dict[str, Any]] = raw.get("rules") or []


class Role(_Rules):
    KIND: ClassVar[str] = "Role"
    API_VERSION: ClassVar[str] = _GROUP_VERSION
    PLURAL: ClassVar[str] = "roles"

    __slots__ = ()


class ClusterRole(_Rules):
    KIND: ClassVar[str] = "ClusterRole"
    API_VERSION: ClassVar[str] = _GROUP_VERSION
    PLURAL: ClassVar[str] = "clusterroles"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ()


class _Binding(KubeObject):
    __slots__ = ("role_ref", "subjects")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.role_ref: dict[str, Any] = raw.get("roleRef") or {}
        self.subjects: list[dict[str, Any]] = raw.get("subjects") or []


class RoleBinding(_Binding):
    KIND: ClassVar[str] = "RoleBinding"
    API_VERSION: ClassVar[str] = _GROUP_VERSION
    PLURAL: ClassVar[str] = "rolebindings"

    __slots__ = ()


class ClusterRoleBinding(_Binding):
    KIND: ClassVar[str] = "ClusterRoleBinding"
    API_VERSION: ClassVar[str] = _GROUP_VERSION
    PLURAL: ClassVar[str] = "clusterrolebindings"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ()
