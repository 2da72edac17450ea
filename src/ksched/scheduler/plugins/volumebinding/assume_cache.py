"""Assume caches over the PersistentVolume and PersistentVolumeClaim informers (upstream's
``volumebinding/assume_cache.go``).

Reserve writes the binding it chose into the cache (a volume reserved for a claim, a claim with a
selected node) before any API call, so the next pods scheduled see it. An assumed object stays
until the informer has a newer version of the object (the API write went through and came back)
or ``restore`` drops it (the binding cycle failed).
"""

from __future__ import annotations

import threading
from typing import Any

from ksched.api.meta import KubeObject
from ksched.api.storage import PersistentVolume
from ksched.api.volumes import volume_class

__all__ = ["AssumeCache", "PVAssumeCache", "version_of"]

_CLASS_INDEX = "storageclass"


def version_of(obj: KubeObject) -> int:
    try:
        return int(obj.resource_version or 0)
    except ValueError:
        return 0


class AssumeCache:
    """Objects of one kind as the informer has them, overlaid with assumed versions."""

    def __init__(self, informer: Any, description: str) -> None:
        self.informer = informer
        self.description = description
        self._assumed: dict[str, KubeObject] = {}
        self._lock = threading.Lock()

    def _overlay(self, key: str, api: KubeObject | None) -> KubeObject | None:
        a = self._assumed.get(key)
        if a is None:
            return api
        if api is None or version_of(api) > version_of(a):
            # Deleted, or a newer version arrived: the assumption has served its purpose.
            del self._assumed[key]
            return api
        return a

    def get(self, key: str) -> KubeObject | None:
        """The latest object: an assumed version if there is one, else the informer's."""
        api = self.informer.get(key) if self.informer is not None else None
        with self._lock:
            return self._overlay(key, api)

    def assume(self, obj: KubeObject) -> None:
        """Make ``obj`` the latest version until the informer has a newer one. Raises
        LookupError when the object is unknown and ValueError when ``obj`` is older than what
        the cache has."""
        key = obj.key
        api = self.informer.get(key) if self.informer is not None else None
        with self._lock:
            cur = self._overlay(key, api)
            if cur is None:
                raise LookupError(f'could not find {self.description} "{key}"')
            new_v, cur_v = version_of(obj), version_of(cur)
            if new_v < cur_v:
                raise ValueError(f'{self.description} "{key}" is out of sync (stored: {cur_v}, assume: {new_v})')
            self._assumed[key] = obj

    def restore(self, key: str) -> None:
        """Drop the assumed version (the informer's object is the latest again)."""
        with self._lock:
            self._assumed.pop(key, None)

    def is_assumed(self, key: str) -> bool:
        with self._lock:
            return key in self._assumed


class PVAssumeCache(AssumeCache):
    """Volumes, listed by storage class (an index on the informer's objects)."""

    def __init__(self, informer: Any) -> None:
        super().__init__(informer, "v1.PersistentVolume")
        if informer is not None:
            informer.indexer.add_indexer(_CLASS_INDEX, lambda o: [volume_class(o)])

    def list_pvs(self, storage_class: str) -> list[PersistentVolume]:
        if self.informer is None:
            return []
        objs = self.informer.indexer.by_index(_CLASS_INDEX, storage_class)
        objs.sort(key=lambda o: o.name)
        out: list[PersistentVolume] = []
        with self._lock:
            for o in objs:
                latest = self._overlay(o.key, o)
                if isinstance(latest, PersistentVolume):
                    out.append(latest)
        return out
