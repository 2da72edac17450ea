"""PodDisruptionBudget (policy/v1)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject

__all__ = ["PodDisruptionBudget", "set_disruption_allowed_condition"]


def set_disruption_allowed_condition(status: dict[str, Any], now: str) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition with apimeta.SetStatusCondition: the
    ``DisruptionAllowed`` condition (SufficientPods / InsufficientPods) as a full
    metav1.Condition -- message, observedGeneration and a lastTransitionTime that changes only
    with the status (``now``: RFC 3339)."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    want = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods", "message": "",
            "observedGeneration": int(status.get("observedGeneration") or 0)}
    conds = [dict(c) for c in status.get("conditions") or ()]
    for c in conds:
        if c.get("type") == "DisruptionAllowed":
            if c.get("status") != want["status"] or not c.get("lastTransitionTime"):
                c["lastTransitionTime"] = now
            c.update(want)
            break
    else:
        conds.append({**want, "lastTransitionTime": now})
    status["conditions"] = conds


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
