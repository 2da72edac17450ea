"""Errors with field paths, as the API server reports them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field: ``spec.containers[0].resources.requests.cpu: invalid quantity "1.2.3"``."""

    path: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class ValidationError(Exception):
    """An object that failed validation; carries every field error found."""

    kind: str
    name: str
    errors: list[FieldError] = field(default_factory=list)
    namespace: str = ""

    def __post_init__(self) -> None:
        Exception.__init__(self, str(self))

    def __str__(self) -> str:
        ref = f"{self.namespace}/{self.name}" if self.namespace else self.name
        details = "; ".join(str(e) for e in self.errors)
        return f"{self.kind} {ref!r} is invalid: {details}"


class Path:
    """Builds field paths: ``Path("spec").child("containers").index(0)`` -> ``spec.containers[0]``."""

    __slots__ = ("_s",)

    def __init__(self, s: str = "") -> None:
        self._s = s

    def child(self, name: str) -> Path:
        return Path(f"{self._s}.{name}" if self._s else name)

    def index(self, i: int) -> Path:
        return Path(f"{self._s}[{i}]")

    def key(self, k: str) -> Path:
        return Path(f"{self._s}[{k}]")

    def __str__(self) -> str:
        return self._s

    def __repr__(self) -> str:
        return f"Path({self._s!r})"
