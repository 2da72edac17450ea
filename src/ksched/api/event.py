"""Event (core/v1), as the scheduler records FailedScheduling, Scheduled and Preempted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["CompactEvent", "Event"]


class Event(KubeObject):
    KIND: ClassVar[str] = "Event"
    PLURAL: ClassVar[str] = "events"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ev",)

    __slots__ = ("count", "involved_object", "message", "reason", "source", "type")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.involved_object: dict[str, Any] = raw.get("involvedObject") or {}
        self.reason: str = raw.get("reason") or ""
        self.message: str = raw.get("message") or ""
        self.type: str = raw.get("type") or "Normal"
        self.count: int = int(raw.get("count") or 1)
        self.source: dict[str, Any] = raw.get("source") or {}


# The nesting and key order of a manifest (see :func:`_shape_of`), one object for every manifest
# built alike (the event recorder's all are): the interned shapes.
_SHAPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}


class _NotStringKey(Exception):
    """A manifest with a key that is not a string (a loaded YAML's ``1:``, ``true:``): equal
    keys of other types (1, True, 1.0) would make equal shapes, so it is not kept compact."""


def _shape_of(d: dict[str, Any], values: list[Any]) -> tuple[Any, ...]:
    """The shape of ``d``, appending its leaf values to ``values`` in order: a tuple with, per
    key, the key itself for a leaf (any value but a dict) or (key, shape) for a nested dict.
    Every key is a string (else :class:`_NotStringKey`), so a tuple entry is always a nested one."""
    out: list[Any] = []
    for k, v in d.items():
        if type(k) is not str:
            raise _NotStringKey
        if type(v) is dict:
            out.append((k, _shape_of(v, values)))
        else:
            out.append(k)
            values.append(v)
    return tuple(out)


def _build(shape: tuple[Any, ...], values: Iterator[Any]) -> dict[str, Any]:
    """The manifest of ``shape`` with its leaves from ``values`` (the inverse of :func:`_shape_of`)."""
    d: dict[str, Any] = {}
    for e in shape:
        if type(e) is tuple:
            d[e[0]] = _build(e[1], values)
        else:
            d[e] = next(values)
    return d


_NO_LABELS: dict[str, str] = {}
_NO_FINALIZERS: list[str] = []


class CompactEvent(Event):
    """An Event as the store keeps the ones it creates: its manifest held as a shared shape (the
    nesting and key order of its dicts, one object for every Event the recorder builds) and a
    tuple of its leaf values, about 2.2 KB less per Event than the manifest's five dicts (the
    recorder's Events were 43 MiB of ``ksched simulate``'s 350 at 20,000 pods). :attr:`raw`
    builds the manifest anew on each read, equal to the one it was made from, key order
    included (so every read path serializes the same bytes); ``involved_object`` and ``source``
    are read from it. Stored manifests are never changed in place, so what a reader gets being a
    fresh copy changes nothing but that its changes stay its own. Labels, annotations and
    finalizers when absent are one shared empty dict and list (read only, as every stored
    object's)."""

    __slots__ = ("_shape", "_values")

    def __init__(self, raw: dict[str, Any]) -> None:
        KubeObject.__init__(self, raw)  # sets raw: the compact form (below)
        self.reason = raw.get("reason") or ""
        self.message = raw.get("message") or ""
        self.type = raw.get("type") or "Normal"
        self.count = int(raw.get("count") or 1)
        if not self.labels:
            self.labels = _NO_LABELS
        if not self.annotations:
            self.annotations = _NO_LABELS
        if not self.finalizers:
            self.finalizers = _NO_FINALIZERS

    @classmethod
    def of(cls, event: Event) -> Event:
        """``event`` in compact form (its manifest as it is now); ``event`` itself when its
        manifest has a key that is not a string (kept as it is)."""
        new = object.__new__(cls)
        try:
            new.raw = event.raw
        except _NotStringKey:
            return event
        for a in _COPIED:
            setattr(new, a, getattr(event, a))
        if not new.labels:
            new.labels = _NO_LABELS
        if not new.annotations:
            new.annotations = _NO_LABELS
        if not new.finalizers:
            new.finalizers = _NO_FINALIZERS
        return new

    @property  # type: ignore[override]
    def raw(self) -> dict[str, Any]:
        return _build(self._shape, iter(self._values))

    @raw.setter
    def raw(self, raw: dict[str, Any]) -> None:
        values: list[Any] = []
        shape = _shape_of(raw, values)
        self._shape = _SHAPES.setdefault(shape, shape)
        self._values = tuple(values)

    @property  # type: ignore[override]
    def involved_object(self) -> dict[str, Any]:
        return self.raw.get("involvedObject") or {}

    @property  # type: ignore[override]
    def source(self) -> dict[str, Any]:
        return self.raw.get("source") or {}

    def __reduce__(self) -> tuple[Any, ...]:
        # (copy, deepcopy, pickle: every attribute is read from the manifest)
        return (type(self), (self.raw,))


# What CompactEvent.of carries over from the Event as it is (the rest is read from the manifest).
_COPIED = tuple(n for c in reversed(Event.__mro__) for n in getattr(c, "__slots__", ())
                if n not in ("raw", "involved_object", "source"))
