"""The garbage collector: deletes objects whose owners are gone and carries out Foreground and
Orphan deletion, as upstream's ``pkg/controller/garbagecollector`` (``garbagecollector.go``'s
``attemptToDeleteItem``, ``processDeletingDependentsItem`` and ``orphanDependents``, with the
graph of ``graph_builder.go`` kept as an index from owner uid to dependents).

* An object all of whose owners are absent (not found, or found with another uid) is deleted,
  Background unless its own finalizers ask otherwise; with a live owner left, only the references
  to absent owners (and to owners being deleted in the foreground) are removed.
* An owner deleted in the **foreground** (``foregroundDeletion`` finalizer) has its dependents
  deleted -- in the foreground themselves when they have dependents -- and loses the finalizer
  once no dependent with ``blockOwnerDeletion: true`` is left.
* An owner deleted with **orphan** propagation (``orphan`` finalizer) has the references to it
  removed from its dependents, then loses the finalizer.

Owners are looked up in the informers' caches, and with a live GET before anything is deleted
(a cache may not have seen a new owner yet). Events are not collected (upstream's ignored
resources).

Divergences: an owner reference to a kind ksched does not serve is taken as a live owner
(upstream retries until the kind can be resolved); owners and dependents are matched by uid as
upstream, but a reference whose owner lives in another namespace is not reported with an event.
"""

from __future__ import annotations

import logging
from typing import Any

from ksched.api.errors import Conflict, NotFound
from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject, OwnerReference
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory, SharedInformer
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.podupdates import unowned_pod_update

__all__ = ["IGNORED_KINDS", "GarbageCollector"]

log = logging.getLogger(__name__)

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
IGNORED_KINDS = frozenset(("Event",))

DELETE = "delete"  # attemptToDelete
ORPHAN = "orphan"  # attemptToOrphan

# A node of the graph: (kind, cache key).
Ident = tuple[str, str]


def _deleting_dependents(obj: KubeObject) -> bool:
    return obj.deletion_timestamp is not None and FOREGROUND_FINALIZER in obj.finalizers


def _orphaning(obj: KubeObject) -> bool:
    return obj.deletion_timestamp is not None and ORPHAN_FINALIZER in obj.finalizers


def _owner_class(ref: OwnerReference) -> type[KubeObject] | None:
    cls = KINDS.get(ref.kind)
    if cls is None:
        return None
    group = ref.api_version.rpartition("/")[0]
    return cls if group == cls.API_VERSION.rpartition("/")[0] else None


class GarbageCollector(Controller):
    """Keys are (action, kind, key) with action ``delete`` or ``orphan``."""

    name = "garbage-collector"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.informers_by_kind: dict[str, SharedInformer] = {}
        # owner uid -> dependents; dependent -> the owner uids it names; uid -> node.
        self._dependents: dict[str, set[Ident]] = {}
        self._owners: dict[Ident, tuple[str, ...]] = {}
        self._by_uid: dict[str, Ident] = {}
        for kind in KINDS:
            if kind in IGNORED_KINDS:
                continue
            inf = informers.informer(kind)
            self.informers_by_kind[kind] = inf
            inf.add_handler(EventHandler(self._on_add, self._on_update, self._on_delete,
                                         skip_update=unowned_pod_update if kind == "Pod" else None))

    # ---------------------------------------------------------------- graph

    def _ident(self, obj: KubeObject) -> Ident:
        return obj.KIND, obj.key

    def _index(self, obj: KubeObject) -> None:
        ident = self._ident(obj)
        self._by_uid[obj.uid] = ident
        refs = obj.owner_references
        uids = tuple(r.uid for r in refs) if refs else ()
        old = self._owners.get(ident, ())
        if old == uids:
            return
        for u in old:
            deps = self._dependents.get(u)
            if deps is not None:
                deps.discard(ident)
                if not deps:
                    del self._dependents[u]
        if uids:
            self._owners[ident] = uids
            for u in uids:
                self._dependents.setdefault(u, set()).add(ident)
        else:
            self._owners.pop(ident, None)

    def _unindex(self, obj: KubeObject) -> None:
        ident = self._ident(obj)
        if self._by_uid.get(obj.uid) == ident:
            del self._by_uid[obj.uid]
        for u in self._owners.pop(ident, ()):
            deps = self._dependents.get(u)
            if deps is not None:
                deps.discard(ident)
                if not deps:
                    del self._dependents[u]

    def _cached(self, ident: Ident) -> KubeObject | None:
        inf = self.informers_by_kind.get(ident[0])
        return inf.get(ident[1]) if inf is not None else None

    def dependents(self, owner: KubeObject) -> list[KubeObject]:
        out = []
        for ident in sorted(self._dependents.get(owner.uid, ())):
            dep = self._cached(ident)
            if dep is not None and any(r.uid == owner.uid for r in dep.owner_references):
                out.append(dep)
        return out

    def _queue_owner_uids(self, uids: Any) -> None:
        """Owners deleting in the foreground re-check their blocking dependents."""
        for u in uids:
            ident = self._by_uid.get(u)
            owner = self._cached(ident) if ident is not None else None
            if owner is not None and _deleting_dependents(owner):
                self.queue.add((DELETE, *ident))  # type: ignore[misc]

    # ---------------------------------------------------------------- handlers

    def _needs_check(self, obj: KubeObject) -> bool:
        """Whether a dependent may have an absent owner, or one deleting in the foreground."""
        for r in obj.owner_references:
            cls = _owner_class(r)
            if cls is None:
                continue
            key = f"{obj.namespace}/{r.name}" if cls.NAMESPACED and obj.namespace else r.name
            owner = self._cached((cls.KIND, key))
            if owner is None or owner.uid != r.uid or _deleting_dependents(owner):
                return True
        return False

    def _on_add(self, obj: KubeObject) -> None:
        self._index(obj)
        self._react(obj, None)

    def _on_update(self, old: KubeObject, new: KubeObject) -> None:
        self._index(new)
        self._react(new, old)
        old_refs = {r.uid: r for r in old.owner_references}
        new_refs = {r.uid: r for r in new.owner_references}
        unblocked = [u for u, r in old_refs.items()
                     if r.block_owner_deletion and (u not in new_refs or not new_refs[u].block_owner_deletion)]
        if unblocked:
            self._queue_owner_uids(unblocked)

    def _react(self, obj: KubeObject, old: KubeObject | None) -> None:
        if obj.deletion_timestamp is None and not obj.owner_references:
            return  # (nothing below applies to a live object without owners: most adds)
        ident = self._ident(obj)
        if _deleting_dependents(obj):
            if old is None or not _deleting_dependents(old):
                # Foreground deletion starts: every dependent is looked at.
                for dep in self._dependents.get(obj.uid, ()):
                    self.queue.add((DELETE, *dep))
            self.queue.add((DELETE, *ident))
        if _orphaning(obj):
            self.queue.add((ORPHAN, *ident))
        if obj.owner_references and obj.deletion_timestamp is None and self._needs_check(obj):
            self.queue.add((DELETE, *ident))

    def _on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        self._unindex(obj)
        # Its dependents may have lost their last owner.
        for dep in self._dependents.get(obj.uid, ()):
            self.queue.add((DELETE, *dep))
        self._queue_owner_uids(r.uid for r in obj.owner_references)

    # ---------------------------------------------------------------- sync

    def sync(self, key: Any) -> None:
        action, kind, okey = key
        obj = self._cached((kind, okey))
        if obj is None:
            return
        if action == ORPHAN:
            self._orphan_dependents(obj)
        else:
            self._attempt_to_delete(obj)

    def _live_owner(self, obj: KubeObject, ref: OwnerReference) -> KubeObject | bool | None:
        """The owner a reference names if it exists with the reference's uid; None when absent;
        True when it cannot be told (a kind ksched does not serve)."""
        cls = _owner_class(ref)
        if cls is None:
            return True
        if cls.NAMESPACED and not obj.namespace:
            return None  # a cluster-scoped object cannot be owned by a namespaced one
        ns = obj.namespace if cls.NAMESPACED else ""
        cached = self._cached((cls.KIND, f"{ns}/{ref.name}" if ns else ref.name))
        if cached is not None and cached.uid == ref.uid:
            return cached
        try:
            live = self.client.get(cls.KIND, ns, ref.name)
        except NotFound:
            return None
        return live if live.uid == ref.uid else None

    def _attempt_to_delete(self, obj: KubeObject) -> None:
        if obj.deletion_timestamp is not None and not _deleting_dependents(obj):
            return
        if _deleting_dependents(obj):
            self._process_deleting_dependents(obj)
            return
        refs = obj.owner_references
        if not refs:
            return
        # Decide on the object as it is now, not as the cache last saw it (attemptToDeleteItem's
        # getObject): the cache may still show a reference this collector has just removed
        # (orphaning), and the owner is gone by then.
        try:
            latest = self.client.get(obj.KIND, obj.namespace, obj.name)
        except NotFound:
            return
        if latest.uid != obj.uid or latest.deletion_timestamp is not None:
            return
        obj = latest
        refs = obj.owner_references
        if not refs:
            return
        solid: list[OwnerReference] = []
        dangling: list[OwnerReference] = []
        waiting: list[OwnerReference] = []
        for r in refs:
            owner = self._live_owner(obj, r)
            if owner is None:
                dangling.append(r)
            elif owner is not True and _deleting_dependents(owner):  # type: ignore[arg-type]
                waiting.append(r)
            else:
                solid.append(r)
        if solid:
            if not dangling and not waiting:
                return
            drop = {r.uid for r in (*dangling, *waiting)}
            self._patch_owner_refs(obj, [r for r in obj.raw["metadata"]["ownerReferences"]
                                         if r.get("uid") not in drop])
            return
        if waiting and self._dependents.get(obj.uid):
            for dep in self.dependents(obj):
                if _deleting_dependents(dep):
                    # A cycle could block both: make this object's references non-blocking.
                    self._patch_owner_refs(obj, [{**r, "blockOwnerDeletion": False}
                                                 if r.get("uid") in {w.uid for w in waiting} else r
                                                 for r in obj.raw["metadata"]["ownerReferences"]])
                    break
            self._delete(obj, "Foreground")
            return
        if ORPHAN_FINALIZER in obj.finalizers:
            policy = "Orphan"
        elif FOREGROUND_FINALIZER in obj.finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self._delete(obj, policy)

    def _process_deleting_dependents(self, owner: KubeObject) -> None:
        blocking = [d for d in self.dependents(owner)
                    if any(r.uid == owner.uid and r.block_owner_deletion for r in d.owner_references)]
        if not blocking:
            self._remove_finalizer(owner, FOREGROUND_FINALIZER)
            return
        for dep in blocking:
            if dep.deletion_timestamp is None or _deleting_dependents(dep):
                self.queue.add((DELETE, *self._ident(dep)))

    def _orphan_dependents(self, owner: KubeObject) -> None:
        if not _orphaning(owner):
            return
        for dep in self.dependents(owner):
            refs = [r for r in dep.raw["metadata"].get("ownerReferences") or () if r.get("uid") != owner.uid]
            self._patch_owner_refs(dep, refs)
        self._remove_finalizer(owner, ORPHAN_FINALIZER)

    # ---------------------------------------------------------------- writes

    def _delete(self, obj: KubeObject, policy: str) -> None:
        log.debug("garbage collector: deleting %s %s (%s)", obj.KIND, obj.key, policy)
        try:
            self.client.delete(obj.KIND, obj.namespace, obj.name, uid=obj.uid, propagation_policy=policy)
        except NotFound:
            pass

    def _patch_owner_refs(self, obj: KubeObject, refs: list[dict[str, Any]]) -> None:
        patch = {"metadata": {"ownerReferences": refs or None, "resourceVersion": obj.resource_version}}
        try:
            self.client.patch(obj.KIND, obj.namespace, obj.name, patch)
        except NotFound:
            pass

    def _remove_finalizer(self, obj: KubeObject, finalizer: str) -> None:
        """Remove one finalizer, re-reading the object on a conflict (as upstream's removeFinalizer)."""
        for _ in range(5):
            if finalizer not in obj.finalizers:
                return
            patch = {"metadata": {"finalizers": [f for f in obj.finalizers if f != finalizer] or None,
                                  "resourceVersion": obj.resource_version}}
            try:
                self.client.patch(obj.KIND, obj.namespace, obj.name, patch)
                return
            except NotFound:
                return
            except Conflict:
                fresh = self.client.get(obj.KIND, obj.namespace, obj.name)
                if fresh.uid != obj.uid:
                    return
                obj = fresh
        raise Conflict(f"could not remove the {finalizer} finalizer of {obj.KIND} {obj.key}")
