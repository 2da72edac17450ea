"""PodDisruptionBudget (policy/v1)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject

__all__ = ["PodDisruptionBudget"]


class PodDisruptionBudget(KubeObject):
    KIND: ClassVar[str] = "PodDisruptionBudget"
    API_VERSION: ClassVar[str] = "policy/v1"
    PLURAL: ClassVar[str] = "poddisruptionbudgets"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pdb",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("current_healthy", "desired_healthy", "disrupted_pods", "disruptions_allowed",
                 "expected_pods", "max_unavailable", "min_available", "selector")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        # policy/v1: a nil selector selects nothing, an empty one selects every pod in the namespace.
        self.selector = LabelSelector.from_dict(spec.get("selector"))
        self.min_available: int | str | None = spec.get("minAvailable")
        self.max_unavailable: int | str | None = spec.get("maxUnavailable")
        self.disruptions_allowed: int = int(status.get("disruptionsAllowed") or 0)
        self.current_healthy: int = int(status.get("currentHealthy") or 0)
        self.desired_healthy: int = int(status.get("desiredHealthy") or 0)
        self.expected_pods: int = int(status.get("expectedPods") or 0)
        self.disrupted_pods: dict[str, Any] = status.get("disruptedPods") or {}

    def matches(self, pod: KubeObject) -> bool:
        """Whether the budget covers the pod: same namespace, selected by its labels."""
        return self.namespace == pod.namespace and self.selector.matches(pod.labels)
