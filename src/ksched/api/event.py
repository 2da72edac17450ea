"""Event (core/v1), as the scheduler records FailedScheduling, Scheduled and Preempted."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["RECORDER_VALUES", "CompactEvent", "Event", "recorder_layout"]


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
        self._share_empties()

    def _share_empties(self) -> None:
        """Empty labels, annotations and finalizers as the shared empty values (never modified)."""
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
        new._share_empties()
        return new

    @classmethod
    def of_recorded(cls, raw: dict[str, Any], creation_timestamp: float | None) -> CompactEvent:
        """What ``CompactEvent.of(Event.from_dict(raw))`` gives for a manifest of the event
        recorder's layout (:func:`recorder_layout` held before the store added the metadata's
        ``creationTimestamp`` (``creation_timestamp`` its parsed value) and
        ``resourceVersion``, in that order), built straight from the known layout: no typed
        Event first, no walk of the manifest for its shape."""
        md = raw["metadata"]
        io = raw["involvedObject"]
        return cls.of_values((
            raw["apiVersion"], raw["kind"],
            md["name"], md["namespace"], md["uid"], md["creationTimestamp"], md["resourceVersion"],
            io["apiVersion"], io["kind"], io["namespace"], io["name"], io["uid"], io["resourceVersion"],
            raw["reason"], raw["message"], raw["type"], raw["action"], raw["count"],
            raw["firstTimestamp"], raw["lastTimestamp"], raw["source"]["component"],
            raw["reportingComponent"], raw["reportingInstance"]), creation_timestamp)

    @classmethod
    def of_values(cls, values: tuple[Any, ...], creation_timestamp: float | None,
                  key: str | None = None) -> CompactEvent:
        """The Event of the recorder's layout whose leaf values are ``values``, in the order of
        :data:`RECORDER_VALUES` (what :meth:`of_recorded` reads from the manifest; the store's
        direct path for the recorder's Events, ``Store.create_recorded_event``, builds them
        without a manifest). ``key``: ``namespace/name`` as the caller made it already (the
        store's lookup), interned as the one made here would be."""
        new = _NEW(cls)
        new._shape = _RECORDER_SHAPE
        new._values = values
        name = new.name = values[2]
        ns = new.namespace = values[3]
        new._key = sys.intern(key if key is not None else f"{ns}/{name}")
        new.uid = values[4]
        new.resource_version = values[6]
        new.labels = _NO_LABELS
        new.annotations = _NO_LABELS
        new.creation_timestamp = creation_timestamp
        new.deletion_timestamp = None
        new.deletion_grace_period_seconds = None
        new.generation = 0
        new.finalizers = _NO_FINALIZERS
        new.owner_references = ()
        new.reason = values[13] or ""
        new.message = values[14] or ""
        new.type = values[15] or "Normal"
        new.count = values[17] or 1
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


_NEW = object.__new__

# The event recorder's manifest (``ksched.client.record``) as the store completes it: its keys in
# order, nested dicts as (key, keys).
_RECORDER_TOP = ("apiVersion", "kind", "metadata", "involvedObject", "reason", "message", "type", "action",
                 "count", "firstTimestamp", "lastTimestamp", "source", "reportingComponent", "reportingInstance")
_RECORDER_METADATA = ("name", "namespace", "uid")  # (then the store's creationTimestamp, resourceVersion)
_RECORDER_INVOLVED = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion")
_RECORDER_SOURCE = ("component",)
# The leaf values of such a manifest in order (:meth:`CompactEvent.of_values`), as
# (dict, key) paths: "" for the top level.
RECORDER_VALUES = (
    ("", "apiVersion"), ("", "kind"),
    *(("metadata", k) for k in (*_RECORDER_METADATA, "creationTimestamp", "resourceVersion")),
    *(("involvedObject", k) for k in _RECORDER_INVOLVED),
    *(("", k) for k in ("reason", "message", "type", "action", "count", "firstTimestamp", "lastTimestamp")),
    ("source", "component"), ("", "reportingComponent"), ("", "reportingInstance"))


def _recorder_shape() -> tuple[Any, ...]:
    nested = {"metadata": (*_RECORDER_METADATA, "creationTimestamp", "resourceVersion"),
              "involvedObject": _RECORDER_INVOLVED, "source": _RECORDER_SOURCE}
    shape = tuple((k, nested[k]) if k in nested else k for k in _RECORDER_TOP)
    return _SHAPES.setdefault(shape, shape)  # (the interned one: what _shape_of's Events share)


_RECORDER_SHAPE = _recorder_shape()


def recorder_layout(raw: dict[str, Any], md: dict[str, Any]) -> bool:
    """Whether ``raw`` (metadata ``md``, its uid set) is laid out as the event recorder builds it,
    which :meth:`CompactEvent.of_recorded` takes: those keys in that order, the metadata's name,
    namespace and uid non-empty strings (uid may be empty), ``count`` an int, no leaf a dict. Any
    other manifest (False) takes the generic path."""
    if tuple(raw) != _RECORDER_TOP or tuple(md) != _RECORDER_METADATA:
        return False
    io = raw["involvedObject"]
    source = raw["source"]
    if type(io) is not dict or type(source) is not dict or tuple(io) != _RECORDER_INVOLVED \
            or tuple(source) != _RECORDER_SOURCE or type(source["component"]) is dict:
        return False
    name, ns, uid = md["name"], md["namespace"], md["uid"]
    if type(name) is not str or type(ns) is not str or type(uid) is not str or not name or not ns \
            or type(raw["count"]) is not int:
        return False
    for v in io.values():
        if type(v) is dict:
            return False
    for k in ("apiVersion", "kind", "reason", "message", "type", "action", "firstTimestamp", "lastTimestamp",
              "reportingComponent", "reportingInstance"):
        if type(raw[k]) is dict:
            return False
    return True
