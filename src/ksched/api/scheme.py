"""The kinds one API server serves (upstream's ``runtime.Scheme`` with the apiextensions
server's per-CRD handlers): the built-in kinds of :data:`ksched.api.kinds.KINDS`, and the custom
kinds its established CustomResourceDefinitions add at run time.

Every store has its own scheme, so a cluster's custom kinds never leak into another's.
Discovery, the HTTP front, the loader and the clients resolve kinds through it: by the name the
store keys a kind by (``KIND_KEY``: the kind for built-in kinds, ``<plural>.<group>`` for custom
ones; a custom kind's plain name works too while it is unambiguous), by a manifest's
apiVersion and kind, or by a REST path's group, version and resource.
"""

from __future__ import annotations

import threading
from typing import Any

from ksched.api.apiextensions import CustomObject, CustomResourceDefinition, custom_kind
from ksched.api.errors import FieldError, Path
from ksched.api.kinds import KINDS, UnknownKindError, kind_class
from ksched.api.meta import KubeObject
from ksched.api.validation import validate, validate_metadata

__all__ = ["Scheme", "group_version", "resource_name"]


def group_version(cls: type[KubeObject]) -> tuple[str, str]:
    g, _, v = cls.API_VERSION.rpartition("/")
    return g, v


def resource_name(cls: type[KubeObject]) -> str:
    """``<plural>[.<group>]``, as kubectl names a resource."""
    g = group_version(cls)[0]
    return f"{cls.PLURAL}.{g}" if g else cls.PLURAL


class Scheme:
    """Built-in kinds plus the custom kinds of established CRDs (changed by the store that owns
    it, under the store's lock; read from any thread: the maps are replaced, never mutated)."""

    def __init__(self) -> None:
        self._custom: dict[str, type[CustomObject]] = {}
        self._lock = threading.Lock()

    def copy(self) -> Scheme:
        s = Scheme()
        s._custom = dict(self._custom)
        return s

    # ------------------------------------------------------------ lookups

    def classes(self) -> list[type[KubeObject]]:
        """Every kind served: the built-in ones, then the custom ones."""
        return [*KINDS.values(), *self._custom.values()]

    def custom_classes(self) -> list[type[CustomObject]]:
        return list(self._custom.values())

    def resolve(self, name: str | type[KubeObject]) -> type[KubeObject] | None:
        """The kind a store key names (``Pod``, ``widgets.example.com``), or a custom kind by its
        plain name when only one group defines it."""
        if isinstance(name, type):
            return name
        cls = KINDS.get(name)
        if cls is not None:
            return cls
        custom = self._custom
        c = custom.get(name)
        if c is not None:
            return c
        found = [c for c in custom.values() if name == c.KIND]
        return found[0] if len(found) == 1 else None

    def kind_class(self, api_version: str, kind: str) -> type[KubeObject]:
        """The kind of a manifest (raises UnknownKindError)."""
        try:
            return kind_class(api_version, kind)
        except UnknownKindError:
            if not isinstance(api_version, str) or not isinstance(kind, str):
                raise
        group, _, version = api_version.rpartition("/")
        for c in self._custom.values():
            if kind == c.KIND and group == c.GROUP and version in c.SERVED_VERSIONS:
                return c
        raise UnknownKindError(api_version, kind)

    def resource(self, group: str, version: str, plural: str) -> type[KubeObject] | None:
        """The kind a REST path's group, version and resource name serve."""
        for c in KINDS.values():
            if plural == c.PLURAL and group_version(c) == (group, version):
                return c
        for c in self._custom.values():
            if plural == c.PLURAL and group == c.GROUP and version in c.SERVED_VERSIONS:
                return c
        return None

    def versions(self, cls: type[KubeObject]) -> tuple[str, ...]:
        """The versions a kind is served at (the first is the one it is stored in)."""
        v = group_version(cls)[1]
        if isinstance(cls, type) and issubclass(cls, CustomObject):
            return (v, *(x for x in cls.SERVED_VERSIONS if x != v)) if v in cls.SERVED_VERSIONS \
                else cls.SERVED_VERSIONS
        return (v,)

    def group_versions(self) -> dict[tuple[str, str], list[type[KubeObject]]]:
        """Kinds by (group, version) served."""
        out: dict[tuple[str, str], list[type[KubeObject]]] = {}
        for c in self.classes():
            g = group_version(c)[0]
            for v in self.versions(c):
                out.setdefault((g, v), []).append(c)
        return out

    # ------------------------------------------------------------ custom kinds

    def names_conflict(self, crd: CustomResourceDefinition) -> tuple[str, str] | None:
        """(reason, message) when the CRD's names clash with a served kind of its group (the
        naming controller's checks); None when they can be accepted."""
        for c in KINDS.values():
            if group_version(c)[0] == crd.group and (crd.plural == c.PLURAL or crd.kind == c.KIND):
                return "Conflict", f'"{crd.plural}" is already in use'
        for c in self._custom.values():
            if crd.name == c.KIND_KEY or crd.group != c.GROUP:
                continue
            if crd.kind == c.KIND:
                return "KindConflict", f'"{crd.kind}" is already in use'
            if crd.list_kind == c.LIST_KIND:
                return "ListKindConflict", f'"{crd.list_kind}" is already in use'
            taken = {c.PLURAL, c.SINGULAR, *c.SHORT_NAMES}
            for n in (crd.singular, *crd.short_names):
                if n in taken:
                    return "Conflict", f'"{n}" is already in use'
        return None

    def add_crd(self, crd: CustomResourceDefinition) -> type[CustomObject]:
        """Serve (or serve anew, after an update) the kind ``crd`` defines."""
        cls = custom_kind(crd)
        with self._lock:
            custom = dict(self._custom)
            custom[cls.KIND_KEY] = cls
            self._custom = custom
        return cls

    def remove_crd(self, name: str) -> type[CustomObject] | None:
        with self._lock:
            custom = dict(self._custom)
            cls = custom.pop(name, None)
            self._custom = custom
        return cls

    # ------------------------------------------------------------ validation

    def validate(self, raw: dict[str, Any], cls: type[KubeObject] | None = None) -> list[FieldError]:
        """Every validation error of a manifest. A custom object is pruned of the fields its
        schema does not know and defaulted first (in place), as the apiextensions server decodes
        it; it is stored in the storage version."""
        if cls is None:
            try:
                cls = self.kind_class(str(raw.get("apiVersion", "")), str(raw.get("kind", "")))
            except UnknownKindError:
                return validate(raw)
        if not issubclass(cls, CustomObject):
            return validate(raw)
        errs = validate_metadata(raw, cls.NAMESPACED)
        version = str(raw.get("apiVersion", "")).rpartition("/")[2] or group_version(cls)[1]
        schema = cls.schema(version)
        if schema is not None:
            schema.prune(raw, root=True)
            schema.default_in(raw)
            errs.extend(schema.validate(raw, Path(""), root=True))
        raw["apiVersion"] = cls.API_VERSION
        return errs
