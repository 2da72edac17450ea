"""The decision record of one scheduling attempt, for ``ksched simulate --explain``
(kube-scheduler-simulator style): per node the Filter verdict or the plugin and reason that
rejected it, per scored node each Score plugin's raw, normalized and weighted score, the
chosen node, and the preemption decision if there was one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Explanation"]


@dataclass(slots=True)
class Explanation:
    """The decision record of one attempt (kube-scheduler-simulator style)."""

    filters: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    selected: str | None = None
    message: str = ""
    preemption: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"filter": self.filters, "score": self.scores, "selectedNode": self.selected,
             "message": self.message}
        if self.preemption is not None:
            d["preemption"] = self.preemption
        return d
