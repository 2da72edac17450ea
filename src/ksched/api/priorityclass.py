"""PriorityClass (scheduling.k8s.io/v1) and the two system classes every cluster has."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = [
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "PriorityClass",
    "system_priority_classes",
]

SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY


class PriorityClass(KubeObject):
    KIND: ClassVar[str] = "PriorityClass"
    API_VERSION: ClassVar[str] = "scheduling.k8s.io/v1"
    PLURAL: ClassVar[str] = "priorityclasses"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pc",)

    __slots__ = ("description", "global_default", "preemption_policy", "value")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.value: int = int(raw.get("value") or 0)
        self.global_default: bool = bool(raw.get("globalDefault", False))
        self.preemption_policy: str = raw.get("preemptionPolicy") or "PreemptLowerPriority"
        self.description: str = raw.get("description") or ""


def system_priority_classes() -> list[dict[str, Any]]:
    """The classes the API server creates at start-up (``SystemPriorityClasses``)."""
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": SYSTEM_NODE_CRITICAL}, "value": SYSTEM_CRITICAL_PRIORITY + 1000,
         "description": "Used for system critical pods that must not be moved from their current node."},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": SYSTEM_CLUSTER_CRITICAL}, "value": SYSTEM_CRITICAL_PRIORITY,
         "description": "Used for system critical pods that must run in the cluster, but can be moved "
                        "to another node if necessary."},
    ]
