"""Taints and tolerations, with upstream's matching rules (``v1.Toleration.ToleratesTaint``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "EFFECTS",
    "Taint",
    "Toleration",
    "find_untolerated_taint",
    "fixed_toleration",
    "tolerations_tolerate_taint",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


class Taint:
    __slots__ = ("effect", "key", "time_added", "value")

    def __init__(self, key: str, value: str = "", effect: str = NO_SCHEDULE, time_added: str | None = None) -> None:
        self.key = key
        self.value = value
        self.effect = effect
        self.time_added = time_added

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Taint:
        return cls(d.get("key", ""), str(d.get("value") or ""), d.get("effect", ""), d.get("timeAdded"))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value:
            d["value"] = self.value
        if self.time_added:
            d["timeAdded"] = self.time_added
        return d

    def __str__(self) -> str:
        """``key=value:effect`` as upstream's Taint.ToString."""
        if not self.value:
            return f"{self.key}:{self.effect}" if self.effect else self.key
        return f"{self.key}={self.value}:{self.effect}" if self.effect else f"{self.key}={self.value}"

    def __repr__(self) -> str:
        return f"Taint({self!s})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Taint) and (self.key, self.value, self.effect) == (
            other.key, other.value, other.effect)

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.effect))


class Toleration:
    __slots__ = ("effect", "key", "operator", "toleration_seconds", "value")

    def __init__(self, key: str = "", operator: str = "", value: str = "", effect: str = "",
                 toleration_seconds: int | None = None) -> None:
        self.key = key
        self.operator = operator
        self.value = value
        self.effect = effect
        self.toleration_seconds = toleration_seconds

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Toleration:
        """The toleration of a manifest's entry. Tolerations are never changed once made, so equal
        ones are one object (every pod carries the same two defaults of DefaultTolerationSeconds)."""
        fixed = _FIXED.get(id(d))
        if fixed is not None and fixed[0] is d and cls is Toleration:
            return fixed[1]
        args = (d.get("key") or "", d.get("operator") or "", str(d.get("value") or ""), d.get("effect") or "",
                d.get("tolerationSeconds"))
        if cls is not Toleration:
            return cls(*args)
        key = (*args, *map(type, args))  # 300 and 300.0 are equal keys but not the same value
        try:
            t = _SHARED_TOLERATIONS.get(key)
        except TypeError:  # an unhashable field (a malformed entry)
            return cls(*args)
        if t is None:
            t = cls(*args)
            if len(_SHARED_TOLERATIONS) < 4096:
                _SHARED_TOLERATIONS[key] = t
        return t

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        op = self.operator
        if op in ("", "Equal"):
            return self.value == taint.value
        # Gt/Lt come with the alpha TaintTolerationComparisonOperators gate (off by default in
        # 1.36): without it they tolerate nothing, and validation refuses them.
        return op == "Exists"

    def key_tuple(self) -> tuple[str, str, str, str]:
        return (self.key, self.operator, self.value, self.effect)

    def __repr__(self) -> str:
        return f"Toleration({self.key!r}, {self.operator!r}, {self.value!r}, {self.effect!r})"


_SHARED_TOLERATIONS: dict[tuple[Any, ...], Toleration] = {}
# Toleration entries never changed once made (``fixed_toleration``), by identity (each held
# here, so its id is not reused), with their parse.
_FIXED: dict[int, tuple[dict[str, Any], Toleration]] = {}


def fixed_toleration(d: dict[str, Any]) -> dict[str, Any]:
    """Register a toleration entry that nobody will change (DefaultTolerationSeconds appends
    the same two to every pod's manifest): ``Toleration.from_dict`` of this very dict is then
    its parse, without reading it again. Returns ``d``."""
    _FIXED[id(d)] = (d, Toleration.from_dict(d))
    return d


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for t in tolerations:
        if t.tolerates(taint):
            return True
    return False


def find_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration],
                           effects: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE)) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates (upstream's
    ``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None
