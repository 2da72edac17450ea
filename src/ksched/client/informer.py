"""Informers as client-go has them: a reflector (list, then watch from the list's
resourceVersion; relist on 410 Gone or a broken watch), a delta FIFO, an indexer and
add/update/delete handlers.

Two ways to drive them:

* ``poll()`` / ``process()`` -- non-blocking steps, for a single-threaded loop (simulation and
  the in-process benchmark), which keeps runs deterministic;
* ``start()`` -- a background thread runs the reflector; handlers still run in whichever
  thread calls ``process()`` (the scheduling loop), so caches need no locks.

Fast paths (each with its reference behind a flag, and a test that both agree): direct
delivery of a polled batch without the DeltaFIFO (``SharedInformer.direct_delivery``), its
adds and updates applied inline (``FAST_DELIVERY``), kept handler calls for adds and updates
(``direct_add_calls``, ``direct_update_calls``), the factory's quick poll (``quick_poll``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ksched.api.errors import ApiError, Gone, ServiceUnavailable
from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.client.interface import ClusterClient, WatchStream

__all__ = [
    "DeletedFinalStateUnknown",
    "DeltaFIFO",
    "EventHandler",
    "Indexer",
    "InformerFactory",
    "Reflector",
    "SharedInformer",
]

log = logging.getLogger(__name__)

ADDED = "Added"
UPDATED = "Updated"
DELETED = "Deleted"
REPLACED = "Replaced"

# SharedInformer's direct delivery of a polled batch applies each add and update in its own loop
# (``SharedInformer._deliver_fast``: the indexer's upsert inline, the event's key read once);
# False: through ``_apply`` and ``Indexer.upsert`` per event (the reference,
# ``_deliver_reference``). Same indexer changes, handler calls and order.
FAST_DELIVERY = True


@dataclass(slots=True, frozen=True)
class DeletedFinalStateUnknown:
    """A deletion noticed on relist (the watch missed it); ``obj`` is the last state known."""

    key: str
    obj: KubeObject


def object_key(obj: KubeObject | DeletedFinalStateUnknown) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return obj.key


class DeltaFIFO:
    """Keys in arrival order, each with the deltas seen for it since it was last popped."""

    def __init__(self, known_keys: Callable[[], Iterable[str]], known_object: Callable[[str], KubeObject | None]) -> None:
        self._lock = threading.Lock()
        self._queue: deque[str] = deque()
        self._items: dict[str, list[tuple[str, Any]]] = {}
        self._known_keys = known_keys
        self._known_object = known_object

    def _add(self, dtype: str, obj: Any) -> None:
        key = object_key(obj)
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [(dtype, obj)]
            self._queue.append(key)
        else:
            if dtype == DELETED and deltas[-1][0] == DELETED:
                return  # de-duplicate consecutive deletions
            deltas.append((dtype, obj))

    def add(self, obj: KubeObject) -> None:
        with self._lock:
            self._add(ADDED, obj)

    def update(self, obj: KubeObject) -> None:
        with self._lock:
            self._add(UPDATED, obj)

    def delete(self, obj: KubeObject) -> None:
        with self._lock:
            self._add(DELETED, obj)

    def replace(self, objs: list[KubeObject]) -> None:
        """A full list: Replaced for each object, Deleted (final state unknown) for every key the
        indexer knows that the list no longer has."""
        with self._lock:
            listed: set[str] = set()
            self._replace_page(objs, listed)
            self._replace_done(listed)

    def replace_page(self, objs: list[KubeObject], listed: set[str]) -> None:
        """One page of a list, delivered as it arrives (``replace_done`` with the same ``listed``
        once the last page is in): the same deltas as ``replace`` of the whole list."""
        with self._lock:
            self._replace_page(objs, listed)

    def replace_done(self, listed: set[str]) -> None:
        with self._lock:
            self._replace_done(listed)

    def _replace_page(self, objs: list[KubeObject], listed: set[str]) -> None:
        # ``_add(REPLACED, o)`` for each object, inlined (a restart's list is tens of thousands
        # of objects; a Replaced delta is never de-duplicated).
        items, queue = self._items, self._queue
        for o in objs:
            key = o.key
            listed.add(key)
            deltas = items.get(key)
            if deltas is None:
                items[key] = [(REPLACED, o)]
                queue.append(key)
            else:
                deltas.append((REPLACED, o))

    def _replace_done(self, listed: set[str]) -> None:
        # Keys still queued (not yet in the indexer) that the list no longer has, as
        # client-go's DeltaFIFO.Replace: their deletion was missed while the watch was down.
        for k, deltas in list(self._items.items()):
            if k in listed or deltas[-1][0] == DELETED:
                continue
            last = deltas[-1][1]
            if isinstance(last, DeletedFinalStateUnknown):
                last = last.obj
            self._add(DELETED, DeletedFinalStateUnknown(k, last))
        for k in list(self._known_keys()):
            if k in listed or k in self._items:
                continue
            last = self._known_object(k)
            if last is not None:
                self._add(DELETED, DeletedFinalStateUnknown(k, last))

    def pop_all(self) -> list[tuple[str, list[tuple[str, Any]]]]:
        with self._lock:
            out = [(k, self._items.pop(k)) for k in self._queue]
            self._queue.clear()
            return out

    def __len__(self) -> int:
        return len(self._queue)


IndexFunc = Callable[[KubeObject], list[str]]

# A watch event's type -> the delta the reflector queues for it.
_DELTA_OF = {"ADDED": ADDED, "MODIFIED": UPDATED, "DELETED": DELETED}


class Indexer:
    """Objects by key, with secondary indices (``namespace`` always; others by name).

    An index is built the first time it is asked for (``by_index``), from the objects then
    held, and kept current from then on: client-go builds every index on every add, and most
    of them (the scheduler's pods and nodes by namespace) are never read. Results are the same.
    Changes, lookups and the building of an index hold one lock: an index built by a reader
    in one thread while the informer applies deltas in another misses no change.
    """

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self.items: dict[str, KubeObject] = {}
        self._indexers: dict[str, IndexFunc] = {"namespace": lambda o: [o.namespace]}
        if indexers:
            self._indexers.update(indexers)
        # The indices built so far (name -> value -> keys).
        # index name -> value -> the keys with that value, in the order they were indexed (a dict,
        # not a set: by_index's order must not depend on string hashing, so a simulation's
        # outcome does not change with PYTHONHASHSEED).
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        self._lock = threading.Lock()

    def has_indexer(self, name: str) -> bool:
        return name in self._indexers

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        with self._lock:
            self._indexers[name] = fn
            self._indices.pop(name, None)  # (re)built on first use

    def _built(self, name: str) -> dict[str, dict[str, None]]:
        """The index ``name`` (the caller holds the lock)."""
        idx = self._indices.get(name)
        if idx is None:
            fn = self._indexers[name]  # KeyError for an unknown index, as before
            idx = {}
            for k, o in self.items.items():
                for v in fn(o):
                    s = idx.get(v)
                    if s is None:
                        idx[v] = {k: None}
                    else:
                        s[k] = None
            self._indices[name] = idx
        return idx

    @staticmethod
    def _drop(idx: dict[str, dict[str, None]], key: str, values: list[str]) -> None:
        for v in values:
            s = idx.get(v)
            if s is not None:
                s.pop(key, None)
                if not s:
                    del idx[v]

    @staticmethod
    def _put(idx: dict[str, dict[str, None]], key: str, values: list[str]) -> None:
        for v in values:
            s = idx.get(v)
            if s is None:
                idx[v] = {key: None}
            else:
                s[key] = None

    def _unindex(self, key: str, obj: KubeObject) -> None:
        for name, idx in self._indices.items():
            self._drop(idx, key, self._indexers[name](obj))

    def _index(self, key: str, obj: KubeObject) -> None:
        for name, idx in self._indices.items():
            self._put(idx, key, self._indexers[name](obj))

    def upsert(self, obj: KubeObject, key: str = "") -> KubeObject | None:
        """Put ``obj`` (``key``: its key, when the caller has it); returns what it replaced."""
        key = key or obj.key
        with self._lock:
            old = self.items.get(key)
            self.items[key] = obj
            if not self._indices:
                return old
            self._reindex(key, old, obj)
            return old

    def _reindex(self, key: str, old: KubeObject | None, obj: KubeObject) -> None:
        """The built indices after ``obj`` replaced ``old`` (None: added) at ``key`` (the caller
        holds the lock)."""
        if old is None:
            self._index(key, obj)
            return
        for name, idx in self._indices.items():
            fn = self._indexers[name]
            before, after = fn(old), fn(obj)
            if before != after:  # usually equal: an update seldom moves an object between index values
                self._drop(idx, key, before)
                self._put(idx, key, after)

    def remove(self, key: str) -> KubeObject | None:
        with self._lock:
            old = self.items.pop(key, None)
            if old is not None and self._indices:
                self._unindex(key, old)
            return old

    def get(self, key: str) -> KubeObject | None:
        return self.items.get(key)

    def by_index(self, name: str, value: str) -> list[KubeObject]:
        idx = self._indices.get(name)
        if idx is not None and not idx.get(value):
            # A built index without the value (most lookups): one read, as atomic as under the lock.
            return []
        with self._lock:
            keys = self._built(name).get(value)
            if not keys:
                return []  # (most lookups: no object has the value)
            items = self.items
            return [items[k] for k in keys]

    def list(self) -> list[KubeObject]:
        return list(self.items.values())

    def keys(self) -> list[str]:
        return list(self.items)

    def __len__(self) -> int:
        return len(self.items)


class EventHandler:
    """Callbacks for one consumer; ``filter`` (if set) limits which objects it sees, and an
    object moving out of the filter is delivered as a deletion (as FilteringResourceEventHandler).

    ``skip_update`` (if set) is a predicate on ``(old, new)`` that is true only for updates this
    handler would do nothing with: the informer does not call it for those. Unlike ``filter`` it
    changes no event into another. Handlers of one informer that share a predicate (the same
    function) have it evaluated once per update (not in client-go, whose handlers check for
    themselves)."""

    __slots__ = ("filter", "on_add", "on_delete", "on_update", "skip_update")

    def __init__(self, on_add: Callable[[Any], None] | None = None,
                 on_update: Callable[[Any, Any], None] | None = None,
                 on_delete: Callable[[Any], None] | None = None,
                 filter: Callable[[Any], bool] | None = None,
                 skip_update: Callable[[Any, Any], bool] | None = None) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.filter = filter
        self.skip_update = skip_update

    def add(self, obj: Any) -> None:
        if self.filter is not None and not self.filter(obj):
            return
        if self.on_add is not None:
            self.on_add(obj)

    def update(self, old: Any, new: Any) -> None:
        f = self.filter
        if f is None:
            if self.on_update is not None:
                self.on_update(old, new)
            return
        was, now = f(old), f(new)
        if was and now:
            if self.on_update is not None:
                self.on_update(old, new)
        elif now:
            if self.on_add is not None:
                self.on_add(new)
        elif was and self.on_delete is not None:
            self.on_delete(old)

    def delete(self, obj: Any) -> None:
        if self.filter is not None:
            target = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
            if not self.filter(target):
                return
        if self.on_delete is not None:
            self.on_delete(obj)


class Reflector:
    """List, then watch from the list's resourceVersion; relist on Gone or a broken watch."""

    def __init__(self, client: ClusterClient, kind: str, fifo: DeltaFIFO, namespace: str | None = None,
                 label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None) -> None:
        self.client = client
        self.kind = kind
        self.fifo = fifo
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.last_rv = ""
        self.watch: WatchStream | None = None
        self.listed = False
        self.relists = 0
        self.rewatches = 0
        self.notify: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def list_and_watch(self) -> None:
        pages = getattr(self.client, "list_pages", None)
        if pages is None:
            items, rv = self.client.list(self.kind, self.namespace, self.label_selector, self.field_selector)
            self.fifo.replace(items)
        else:
            # A paged list: each page goes into the FIFO as it arrives, so the informer's
            # handlers can take it while the next pages are on their way. The deltas are those
            # of one replace of the whole list (deletions once the last page is in), and the
            # informer is synced only then.
            listed: set[str] = set()
            rv = ""
            for items, page_rv in pages(self.kind, self.namespace, self.label_selector, self.field_selector):
                rv = page_rv
                self.fifo.replace_page(items, listed)
                if self.notify is not None:
                    self.notify()
            self.fifo.replace_done(listed)
        self.last_rv = rv
        if self.listed:
            self.relists += 1
        self.listed = True
        if self.notify is not None:
            # Whoever waits for every informer to have listed (the scheduler's first cycle)
            # learns it now, not at its next poll.
            self.notify()
        self._watch()

    def _watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self.watch = self.client.watch(self.kind, self.namespace, self.last_rv, self.label_selector,
                                       self.field_selector, bookmarks=True)
        if self.notify is not None and hasattr(self.watch, "notify"):
            self.watch.notify = self.notify  # type: ignore[attr-defined]

    def _handle(self, ev: Any) -> None:
        t = ev.type
        if t == "BOOKMARK":
            self.last_rv = str(ev.resource_version)
            return
        if t == "ERROR":
            raise Gone("watch error")
        obj = ev.object
        if t == "ADDED":
            self.fifo.add(obj)
        elif t == "MODIFIED":
            self.fifo.update(obj)
        elif t == "DELETED":
            self.fifo.delete(obj)
        self.last_rv = obj.resource_version if obj is not None and obj.resource_version else str(ev.resource_version)

    def _handle_all(self, evs: list[Any]) -> None:
        """``_handle`` of each event in turn, the FIFO's lock taken once for them all (a
        non-blocking poll's batch)."""
        fifo = self.fifo
        add = fifo._add
        with fifo._lock:
            for ev in evs:
                t = ev.type
                if t == "BOOKMARK":
                    self.last_rv = str(ev.resource_version)
                    continue
                if t == "ERROR":
                    raise Gone("watch error")
                obj = ev.object
                if t == "ADDED":
                    add(ADDED, obj)
                elif t == "MODIFIED":
                    add(UPDATED, obj)
                elif t == "DELETED":
                    add(DELETED, obj)
                self.last_rv = obj.resource_version if obj is not None and obj.resource_version \
                    else str(ev.resource_version)

    def _resume(self) -> None:
        """The watch ended: watch again from the last version seen; relist if it is too old."""
        try:
            self.rewatches += 1
            self._watch()
        except Gone:
            self.list_and_watch()

    def poll(self) -> int:
        """Move every event already received into the FIFO (non-blocking). Returns how many."""
        if not self.listed:
            self.list_and_watch()
        w = self.watch
        assert w is not None
        n = 0
        try:
            evs = w.drain()
            if evs:
                self._handle_all(evs)
            n += len(evs)
            if w.closed:
                self._resume()
                for ev in self.watch.drain():  # type: ignore[union-attr]
                    self._handle(ev)
                    n += 1
        except Gone:
            self.list_and_watch()
        return n

    # ---- background mode -------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"reflector-{self.kind}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if not self.listed:
                    self.list_and_watch()
                w = self.watch
                if w is None:
                    # Listed, but the watch could not be opened (the server went away in between):
                    # watch from the list's version once it answers, as after a broken stream.
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    self._resume()
                    continue
                ev = w.next(timeout=1.0)
                if ev is not None:
                    self._handle(ev)
                    if self.notify is not None:
                        self.notify()
                    backoff = 0.2
                elif w.closed:
                    # The stream ended (server timeout, restart, network): watch again from the
                    # last version seen, backing off while it keeps failing.
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    self._resume()
            except Gone:
                try:
                    self.list_and_watch()
                except ApiError as e:
                    log.warning("relist of %s failed: %s", self.kind, e)
                    self._stop.wait(backoff)
            except ServiceUnavailable as e:
                # The server is unreachable (restarting): keep what we have and watch again from
                # the last version seen once it answers; it says Gone if that version is too old.
                log.warning("watch of %s: %s; retrying", self.kind, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception as e:
                log.warning("watch of %s failed: %r; retrying", self.kind, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                self.listed = False

    def stop(self) -> None:
        self._stop.set()
        if self.watch is not None:
            self.watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)


class SharedInformer:
    """A reflector, a delta FIFO and an indexer for one kind, feeding any number of handlers."""

    def __init__(self, client: ClusterClient, kind: str, namespace: str | None = None,
                 label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
                 indexers: dict[str, IndexFunc] | None = None) -> None:
        self.kind = kind
        self.indexer = Indexer(indexers)
        self.fifo = DeltaFIFO(self.indexer.keys, self.indexer.get)
        self.reflector = Reflector(client, kind, self.fifo, namespace, label_selector, field_selector)
        self.handlers: list[EventHandler] = []
        # The handlers' distinct ``skip_update`` predicates, in order of registration.
        self._skips: list[Callable[[Any, Any], bool]] = []
        # A polled batch whose objects are all distinct goes to the indexer and handlers without
        # the DeltaFIFO (:meth:`_deliver`); False: always through it (the reference).
        self.direct_delivery = True
        # What an add calls, per handler in order: its ``on_add`` itself when it has no filter
        # (none when it has no ``on_add``), else its ``add``; made by :meth:`add_handler`, used
        # while ``handlers`` holds as many as then (:meth:`_added`). False: every add through
        # ``EventHandler.add`` (the reference).
        self.direct_add_calls = True
        self._adds: tuple[Callable[[Any], None], ...] = ()
        self._adds_of = 0
        # What an update calls, per combination of the ``skip_update`` verdicts (the distinct
        # predicates evaluated once each, in order, as the reference does): each handler not
        # skipped, in order, by its ``on_update`` itself when it has no filter (none when it has
        # no ``on_update``), else by its ``update``; made on first use of a combination after
        # :meth:`add_handler`, used while ``handlers`` holds as many as then. False: every update
        # through ``EventHandler.update`` (the reference).
        self.direct_update_calls = True
        self._updates: dict[Any, tuple[Callable[[Any, Any], None], ...]] = {}
        self._updates_of = -1

    def add_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)
        self._adds = tuple(h.add if h.filter is not None else h.on_add
                           for h in self.handlers if h.filter is not None or h.on_add is not None)
        self._adds_of = len(self.handlers)
        s = handler.skip_update
        if s is not None and s not in self._skips:
            self._skips.append(s)
        self._updates = {}
        self._updates_of = len(self.handlers)
        for o in self.indexer.list():
            handler.add(o)

    def _update(self, old: KubeObject, new: KubeObject) -> None:
        """Deliver an update to every handler whose ``skip_update`` does not rule it out."""
        skips = self._skips
        if self.direct_update_calls and self._updates_of == len(self.handlers):
            # The verdicts as the reference takes them (each predicate once, in order): the
            # handlers it calls are then fixed, and so are the calls it makes through them.
            if not skips:
                verdicts: Any = ()
            elif len(skips) == 1:
                verdicts = not skips[0](old, new)
            else:
                verdicts = tuple([not s(old, new) for s in skips])
            calls = self._updates.get(verdicts)
            if calls is None:
                calls = self._update_calls(verdicts)
            for call in calls:
                call(old, new)
            return
        if not skips:
            for h in self.handlers:
                h.update(old, new)
            return
        if len(skips) == 1:  # (the common case: one predicate, shared)
            if not skips[0](old, new):
                for h in self.handlers:
                    h.update(old, new)
                return
            for h in self.handlers:
                if h.skip_update is None:
                    h.update(old, new)
            return
        skipped = {s for s in skips if s(old, new)}
        for h in self.handlers:
            if h.skip_update is None or h.skip_update not in skipped:
                h.update(old, new)

    def _update_calls(self, verdicts: Any) -> tuple[Callable[[Any, Any], None], ...]:
        """The calls an update makes for ``verdicts`` (see ``direct_update_calls``): True where
        a predicate of ``_skips`` lets the update through."""
        skips = self._skips
        through = (verdicts,) if len(skips) == 1 else verdicts
        skipped = {s for s, ok in zip(skips, through, strict=True) if not ok}
        calls = tuple(h.update if h.filter is not None else h.on_update for h in self.handlers
                      if (h.skip_update is None or h.skip_update not in skipped)
                      and (h.filter is not None or h.on_update is not None))
        self._updates[verdicts] = calls  # type: ignore[assignment]
        return calls  # type: ignore[return-value]

    def has_synced(self) -> bool:
        return self.reflector.listed and len(self.fifo) == 0

    def process(self) -> int:
        """Apply the queued deltas to the indexer and call the handlers. Returns deltas applied."""
        n = 0
        indexer, handlers = self.indexer, self.handlers
        # (FAST_DELIVERY: an add or update as the direct delivery applies it, the same changes
        # and calls; a list's thousands of Replaced deltas come this way.)
        put = self._put_fast if FAST_DELIVERY and type(indexer) is Indexer else None
        for key, deltas in self.fifo.pop_all():
            for dtype, obj in deltas:
                n += 1
                if dtype == DELETED:
                    old = indexer.remove(key)
                    if old is None and not isinstance(obj, DeletedFinalStateUnknown):
                        continue
                    for h in handlers:
                        h.delete(obj)
                elif put is not None:
                    put(key, dtype, obj)
                else:
                    old = indexer.upsert(obj, key)
                    if old is None:
                        self._added(obj)
                    elif dtype == UPDATED or old.resource_version != obj.resource_version:
                        self._update(old, obj)
        return n

    def poll(self) -> int:
        """Non-blocking: take what the watch has and deliver it."""
        reflector = self.reflector
        w = reflector.watch
        if w is not None and not w.closed and not self.fifo._queue:
            if not w.pending():
                return 0  # nothing arrived (the common case in a busy loop)
            if self.direct_delivery and reflector.listed and reflector._thread is None:
                evs = w.drain()
                n = self._deliver(evs)
                if n is not None:
                    return n
                # (a key twice, or an ERROR: the FIFO's way, as Reflector.poll takes a batch)
                try:
                    reflector._handle_all(evs)
                    if w.closed:
                        reflector._resume()
                        for ev in reflector.watch.drain():  # type: ignore[union-attr]
                            reflector._handle(ev)
                except Gone:
                    reflector.list_and_watch()
                return self.process()
        reflector.poll()
        return self.process()

    def _deliver(self, evs: list[Any]) -> int | None:
        """:meth:`_deliver_reference`, or with ``FAST_DELIVERY`` (and the plain ``Indexer``)
        :meth:`_deliver_fast`: the same indexer changes and handler calls in the same order."""
        if FAST_DELIVERY and type(self.indexer) is Indexer:
            return self._deliver_fast(evs)
        return self._deliver_reference(evs)

    def _deliver_fast(self, evs: list[Any]) -> int | None:
        """:meth:`_deliver_reference` with each add and update applied by :meth:`_put_fast` (no
        ``_apply`` or ``Indexer.upsert`` call), each event's key read once. Every event of a
        batch is an object's write delivered to every handler: a call or two per event is a few
        percent of a simulation's delivery."""
        reflector = self.reflector
        delta_of = _DELTA_OF
        if len(evs) == 1:
            ev = evs[0]
            t = ev.type
            dtype = delta_of.get(t)
            if dtype is None:
                if t != "BOOKMARK":
                    return None
                reflector.last_rv = str(ev.resource_version)
                return 0
            obj = ev.object
            reflector.last_rv = obj.resource_version if obj is not None and obj.resource_version \
                else str(ev.resource_version)
            if dtype is DELETED:
                return self._apply(obj.key, dtype, obj)
            self._put_fast(obj.key, dtype, obj)
            return 1
        keys: set[str] = set()
        todo: list[tuple[str, str, Any]] = []
        last_rv = reflector.last_rv
        for ev in evs:
            t = ev.type
            dtype = delta_of.get(t)
            if dtype is None:
                if t != "BOOKMARK":
                    return None
                last_rv = str(ev.resource_version)
                continue
            obj = ev.object
            k = obj.key
            if k in keys:
                return None
            keys.add(k)
            todo.append((k, dtype, obj))
            last_rv = obj.resource_version if obj is not None and obj.resource_version else str(ev.resource_version)
        reflector.last_rv = last_rv
        put = self._put_fast
        for key, dtype, obj in todo:
            if dtype is DELETED:
                self._apply(key, dtype, obj)
            else:
                put(key, dtype, obj)
        return len(todo)

    def _put_fast(self, key: str, dtype: str, obj: Any) -> None:
        """:meth:`_apply` of an add or update (a Replaced, Added or Updated delta), the indexer's
        upsert inline."""
        indexer = self.indexer
        with indexer._lock:
            items = indexer.items
            old = items.get(key)
            items[key] = obj
            indices = indexer._indices
            if indices:
                if old is None:
                    indexer._index(key, obj)
                else:
                    # Indexer._reindex of an update, inline.
                    indexers = indexer._indexers
                    for name, idx in indices.items():
                        fn = indexers[name]
                        before, after = fn(old), fn(obj)
                        if before != after:
                            indexer._drop(idx, key, before)
                            indexer._put(idx, key, after)
        if old is None:
            self._added(obj)
        elif dtype is UPDATED or old.resource_version != obj.resource_version:
            self._update(old, obj)

    def _deliver_reference(self, evs: list[Any]) -> int | None:
        """A polled batch of watch events (the FIFO empty, the reflector listed, the watch open)
        delivered without the DeltaFIFO when no object appears twice in it and no event is an
        ERROR: then the FIFO would hold one delta per key, in the events' order, and ``process``
        would apply them in that order; the same indexer changes and handler calls, in the same
        order, after the last resourceVersion is set as ``Reflector._handle_all`` sets it.
        None (nothing done) otherwise. Returns the deltas applied."""
        reflector = self.reflector
        if len(evs) == 1:
            ev = evs[0]
            t = ev.type
            if t not in _DELTA_OF:
                if t != "BOOKMARK":
                    return None
                reflector.last_rv = str(ev.resource_version)
                return 0
            obj = ev.object
            reflector.last_rv = obj.resource_version if obj is not None and obj.resource_version \
                else str(ev.resource_version)
            return self._apply(obj.key, _DELTA_OF[t], obj)
        keys: set[str] = set()
        last_rv = reflector.last_rv
        for ev in evs:
            t = ev.type
            if t not in _DELTA_OF:
                if t != "BOOKMARK":
                    return None
                last_rv = str(ev.resource_version)
                continue
            obj = ev.object
            k = obj.key
            if k in keys:
                return None
            keys.add(k)
            last_rv = obj.resource_version if obj is not None and obj.resource_version else str(ev.resource_version)
        reflector.last_rv = last_rv
        n = 0
        for ev in evs:
            dtype = _DELTA_OF.get(ev.type)
            if dtype is not None:
                obj = ev.object
                n += self._apply(obj.key, dtype, obj)
        return n

    def _added(self, obj: KubeObject) -> None:
        """Deliver an add: the calls ``add_handler`` kept (see ``direct_add_calls``) while the
        handlers are those it saw, else through each handler's ``add`` (the reference)."""
        if self.direct_add_calls and self._adds_of == len(self.handlers):
            for add in self._adds:
                add(obj)
        else:
            for h in self.handlers:
                h.add(obj)

    def _apply(self, key: str, dtype: str, obj: Any) -> int:
        """One delta, as :meth:`process` applies it (the direct path's; ``process`` has it inline)."""
        handlers = self.handlers
        if dtype == DELETED:
            old = self.indexer.remove(key)
            if old is None and not isinstance(obj, DeletedFinalStateUnknown):
                return 1
            for h in handlers:
                h.delete(obj)
            return 1
        old = self.indexer.upsert(obj, key)
        if old is None:
            self._added(obj)
        elif dtype == UPDATED or old.resource_version != obj.resource_version:
            self._update(old, obj)
        return 1

    def list(self) -> list[KubeObject]:
        return self.indexer.list()

    def get(self, key: str) -> KubeObject | None:
        return self.indexer.get(key)


class InformerFactory:
    """One shared informer per kind for a client."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.informers: dict[str, SharedInformer] = {}
        self.notify: Callable[[], None] | None = None
        self._started = False
        # State that consumers of these informers build on them and that must live exactly as
        # long as the factory (the scheduler's DRA manager): kept here rather than in a
        # module-level map keyed by the factory, whose values reference the factory back and
        # would keep every cluster alive forever.
        self.attachments: dict[str, Any] = {}
        # poll: over the informers kept in a tuple (informers are only ever added; remade when
        # there are more), asking each one's watch whether anything arrived before calling its
        # poll (which asks the same first and returns 0). False: every informer's poll over a
        # copy of the map (the reference).
        self.quick_poll = True
        self._polled: tuple[SharedInformer, ...] = ()

    def informer(self, kind: str, **kwargs: Any) -> SharedInformer:
        """The informer of ``kind`` (made on first use; started at once if the factory runs)."""
        inf = self.informers.get(kind)
        if inf is None:
            inf = self.informers[kind] = SharedInformer(self.client, kind, **kwargs)
            inf.reflector.notify = self.notify
            if self._started:
                inf.reflector.start()
        return inf

    def poll(self) -> int:
        n = 0
        if not self.quick_poll:
            for inf in list(self.informers.values()):
                n += inf.poll()
            return n
        infs = self._polled
        if len(infs) != len(self.informers):
            infs = self._polled = tuple(self.informers.values())
        for inf in infs:
            # SharedInformer.poll's own first test, made here: most informers have nothing.
            w = inf.reflector.watch
            if w is not None and not w.closed and not inf.fifo._queue and not w.pending():  # type: ignore[attr-defined]
                continue
            n += inf.poll()
        return n

    def pending(self) -> bool:
        """Whether any watch has events not yet taken (in-process watches only)."""
        for inf in self.informers.values():
            w = inf.reflector.watch
            if w is None or len(inf.fifo) or (hasattr(w, "pending") and w.pending()) or w.closed:  # type: ignore[attr-defined]
                return True
        return False

    def start(self) -> None:
        self._started = True
        for inf in list(self.informers.values()):
            inf.reflector.start()

    def process(self) -> int:
        n = 0
        for inf in list(self.informers.values()):
            n += inf.process()
        return n

    def stop(self) -> None:
        for inf in self.informers.values():
            inf.reflector.stop()
