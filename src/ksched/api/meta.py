"""Object metadata and the base of every typed Kubernetes object.

Every object keeps the manifest it was parsed from (``raw``), so nothing a user wrote is lost
on a round trip; the typed attributes are a read-only view of it.  Objects are immutable once
stored: a change produces a new object from the changed manifest, as informer caches in Go
are read-only.
"""

from __future__ import annotations

import copy
import sys
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

__all__ = ["KubeObject", "OwnerReference", "format_time", "parse_time"]


# Timestamps parsed, by their text: the objects of a list share many (creation times at one-second
# resolution), so each is parsed once. Bounded: cleared when full.
_TIMES: dict[str, float | None] = {}
_TIMES_MAX = 4096


def parse_time(v: Any) -> float | None:
    """RFC 3339 timestamp -> seconds since the epoch (None when absent or unparsable)."""
    if v is None or v == "":
        return None
    if type(v) is str:
        t = _TIMES.get(v, _TIMES)
        if t is not _TIMES:
            return t  # type: ignore[return-value]
        try:
            t = datetime.fromisoformat(v).timestamp()
        except ValueError:
            t = None
        if len(_TIMES) >= _TIMES_MAX:
            _TIMES.clear()
        _TIMES[v] = t
        return t
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, datetime):
        return v.replace(tzinfo=v.tzinfo or UTC).timestamp()
    try:
        return datetime.fromisoformat(str(v)).timestamp()
    except ValueError:
        return None


_last_time: list[Any] = [None, ""]


def format_time(t: float) -> str:
    """Seconds since the epoch -> RFC 3339 (``2024-01-02T03:04:05Z``), as metav1.Time marshals."""
    sec = int(t)
    if _last_time[0] == sec:
        return _last_time[1]  # type: ignore[no-any-return]
    s = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_time[0] = sec
    _last_time[1] = s
    return s


def format_micro_time(t: float) -> str:
    """Seconds since the epoch -> RFC 3339 with microseconds, as metav1.MicroTime marshals."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_SLOTS: dict[type, tuple[str, ...]] = {}


def _slot_names(cls: type) -> tuple[str, ...]:
    names = _SLOTS.get(cls)
    if names is None:
        out: list[str] = []
        for c in cls.__mro__:
            for n in getattr(c, "__slots__", ()):
                if n not in out:
                    out.append(n)
        names = _SLOTS[cls] = tuple(out)
    return names


_COPIERS: dict[type, Any] = {}


def _make_copier(cls: type) -> Any:
    """A function copying every slot of ``cls`` with plain attribute assignments (several times
    faster than getattr/setattr in a loop; the scheduler copies a pod per binding)."""
    names = [n for n in _slot_names(cls) if n.isidentifier()]
    body = "\n".join(f"    try:\n        n.{a} = o.{a}\n    except AttributeError:\n        pass" for a in names)
    src = f"def _copy(o):\n    n = _new(_cls)\n{body}\n    return n\n"
    ns: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(compile(src, f"<copier {cls.__name__}>", "exec"), ns)
    return ns["_copy"]


class OwnerReference:
    __slots__ = ("api_version", "block_owner_deletion", "controller", "kind", "name", "uid")

    def __init__(self, d: dict[str, Any]) -> None:
        self.api_version: str = d.get("apiVersion", "")
        self.kind: str = d.get("kind", "")
        self.name: str = d.get("name", "")
        self.uid: str = d.get("uid", "")
        self.controller: bool = bool(d.get("controller", False))
        self.block_owner_deletion: bool = bool(d.get("blockOwnerDeletion", False))


class KubeObject:
    """Common metadata of all kinds. Subclasses set KIND, API_VERSION, PLURAL, NAMESPACED (and
    STATUS_SUBRESOURCE when the kind has a ``status`` subresource: updates of the main resource
    then leave the status alone; SCALE_SUBRESOURCE when it has a ``scale`` subresource, an
    autoscaling/v1 Scale of its ``spec.replicas``)."""

    KIND: ClassVar[str] = ""
    API_VERSION: ClassVar[str] = "v1"
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    STATUS_SUBRESOURCE: ClassVar[bool] = False
    # What the store, watches and informers call the kind: KIND for the built-in kinds, the
    # CustomResourceDefinition's name (``<plural>.<group>``) for custom ones, whose kind names
    # may repeat across groups.
    KIND_KEY: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "KIND_KEY" not in cls.__dict__:
            cls.KIND_KEY = cls.KIND
    SCALE_SUBRESOURCE: ClassVar[bool] = False

    __slots__ = (
        "_key",
        "annotations",
        "creation_timestamp",
        "deletion_grace_period_seconds",
        "deletion_timestamp",
        "finalizers",
        "generation",
        "labels",
        "name",
        "namespace",
        "owner_references",
        "raw",
        "resource_version",
        "uid",
    )

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        md = raw.get("metadata") or {}
        self.name: str = md.get("name") or ""
        self.namespace: str = (md.get("namespace") or "") if self.NAMESPACED else ""
        self._key = sys.intern(f"{self.namespace}/{self.name}" if self.namespace else self.name)
        self.uid: str = md.get("uid") or ""
        self.resource_version: str = str(md.get("resourceVersion") or "")
        self.labels: dict[str, str] = md.get("labels") or {}
        self.annotations: dict[str, str] = md.get("annotations") or {}
        self.creation_timestamp: float | None = parse_time(md.get("creationTimestamp"))
        self.deletion_timestamp: float | None = parse_time(md.get("deletionTimestamp"))
        self.deletion_grace_period_seconds: int | None = md.get("deletionGracePeriodSeconds")
        self.generation: int = int(md.get("generation") or 0)
        self.finalizers: list[str] = md.get("finalizers") or []
        refs = md.get("ownerReferences")
        self.owner_references: tuple[OwnerReference, ...] = (
            tuple(OwnerReference(r) for r in refs) if refs else ())

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Self:
        return cls(raw)

    @classmethod
    def prepare_for_create(cls, raw: dict[str, Any]) -> None:
        """The kind's API defaults and create strategy (upstream's ``SetDefaults_*`` and
        registry ``PrepareForCreate``), in place on a private manifest before validation."""

    @classmethod
    def prepare_for_update(cls, raw: dict[str, Any], old_raw: dict[str, Any]) -> None:
        """The kind's API defaults and update strategy (``PrepareForUpdate``), in place on the
        private new manifest of a (non-status) update; ``old_raw`` is the stored one."""

    def to_dict(self) -> dict[str, Any]:
        """The manifest (shared, do not mutate; use ``deepcopy`` for a private copy)."""
        return self.raw

    def deepcopy_raw(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)

    def shallow_copy(self) -> Self:
        """A new object sharing every attribute (callers then replace the ones that change)."""
        cls = type(self)
        fn = _COPIERS.get(cls)
        if fn is None:
            fn = _COPIERS[cls] = _make_copier(cls)
        return fn(self)  # type: ignore[no-any-return]

    @property
    def key(self) -> str:
        """``namespace/name`` (or ``name`` for cluster-scoped kinds), as cache.MetaNamespaceKeyFunc.

        One string for every holder: made when the object is, carried over by
        :meth:`shallow_copy` (the next versions of a stored object), and interned, so the store,
        the informers' caches and the scheduler's structures key an object by the same string
        instead of each making its own (a pod's key was held about eight times)."""
        try:
            return self._key
        except AttributeError:
            k = self._key = sys.intern(f"{self.namespace}/{self.name}" if self.namespace else self.name)
            return k

    def controller_ref(self) -> OwnerReference | None:
        for r in self.owner_references:
            if r.controller:
                return r
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r}, rv={self.resource_version!r})"
