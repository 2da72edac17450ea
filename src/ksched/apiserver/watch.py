"""The embedded server's watch machinery (upstream's watch cache, ``storage/cacher``): per kind,
a bounded history of committed changes and the open watches; a watch from a resourceVersion
replays the history after it, or answers ``410 Gone`` when that version was compacted away.

A filtered watch (namespace, label or field selector) sees a change that moves an object into
or out of its selection as an ADDED or DELETED, as the watch cache reports it. The store calls
:meth:`WatchCache.commit` under its lock for every write; consumers read a :class:`Watch` from
any thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from ksched.api.errors import BadRequest, Gone
from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.watch import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent
from ksched.apiserver.fields import field_values

__all__ = ["Watch", "WatchCache"]


class Watch:
    """A stream of events for one kind (optionally one namespace and selectors).

    Events are queued as the store commits writes; a consumer takes them with :meth:`next`
    (blocking, with timeout) or :meth:`drain`. ``notify`` (if set) is called after each event
    is queued, e.g. to wake a scheduling loop.
    """

    def __init__(self, cache: WatchCache, kind: str, namespace: str | None, label_selector: LabelSelector | None,
                 field_selector: FieldSelector | None, bookmarks: bool) -> None:
        self._cache = cache
        self.kind = kind
        self.namespace = namespace or None
        self.label_selector = label_selector if label_selector is not None and not label_selector.is_empty() else None
        self.field_selector = field_selector if field_selector is not None and not field_selector.is_empty() \
            else None
        self.bookmarks = bookmarks
        self._events: deque[WatchEvent] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._waiting = False
        self.closed = False
        self.notify: Callable[[], None] | None = None

    def matches(self, obj: KubeObject) -> bool:
        if self.namespace is not None and obj.namespace != self.namespace:
            return False
        if self.label_selector is not None and not self.label_selector.matches(obj.labels):
            return False
        return self.field_selector is None or self.field_selector.matches(field_values(obj))

    def _push(self, ev: WatchEvent) -> None:
        if self.closed:
            return
        self._events.append(ev)  # deque appends are atomic; a waiting consumer is woken below
        if self._waiting:
            with self._cond:
                self._cond.notify()
        n = self.notify
        if n is not None:
            n()

    @property
    def filtered(self) -> bool:
        return self.namespace is not None or self.label_selector is not None or self.field_selector is not None

    def _translate(self, etype: str, old: KubeObject | None, new: KubeObject | None, rv: int) -> WatchEvent | None:
        """The event as this watch sees it: a change that moves an object into or out of the
        selection is an ADDED or DELETED, as the API server's watch cache reports it."""
        if not self.filtered:
            return WatchEvent(etype, new if new is not None else old, rv)
        old_in = old is not None and self.matches(old)
        new_in = new is not None and self.matches(new)
        if etype == DELETED:
            return WatchEvent(DELETED, old, rv) if old_in else None
        if new_in and old_in:
            return WatchEvent(MODIFIED, new, rv)
        if new_in:
            return WatchEvent(ADDED, new, rv)
        if old_in:
            return WatchEvent(DELETED, new if new is not None else old, rv)
        return None

    def _offer(self, etype: str, old: KubeObject | None, new: KubeObject | None, rv: int) -> None:
        """Queue the event as this watch sees it (see :meth:`_translate`)."""
        ev = self._translate(etype, old, new, rv)
        if ev is not None:
            self._push(ev)

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event; None on timeout or when the watch is closed and empty."""
        if self._events:
            return self._events.popleft()
        with self._cond:
            # Announce the wait before looking again, so a producer that appends in between
            # either is seen here or sees _waiting and notifies.
            self._waiting = True
            try:
                if not self._events and not self.closed:
                    self._cond.wait(timeout)
            finally:
                self._waiting = False
        if self._events:
            return self._events.popleft()
        return None

    def drain(self) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        ev = self._events
        while ev:
            out.append(ev.popleft())
        return out

    def pending(self) -> int:
        return len(self._events)

    def stop(self) -> None:
        """Close the watch (as the server closing the stream: the consumer must re-watch)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        self._cache.remove(self)
        n = self.notify
        if n is not None:
            n()

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> WatchEvent:
        ev = self.next()
        if ev is None:
            raise StopIteration
        return ev


class WatchCache:
    """History and open watches of every kind. Not locked itself: the store calls it under
    its own lock (``lock``, also taken by :meth:`remove` when a consumer stops a watch)."""

    def __init__(self, kinds: Iterable[str], lock: threading.RLock, history: int, start_rv: int) -> None:
        self.lock = lock
        self.history_size = history
        self._history: dict[str, deque[WatchEvent]] = {k: deque() for k in kinds}
        self._compacted: dict[str, int] = dict.fromkeys(self._history, start_rv)
        self._watches: dict[str, list[Watch]] = {k: [] for k in self._history}

    def add_kind(self, kind: str, rv: int) -> None:
        """Start keeping the history of a kind served from now on (a custom kind): versions
        before ``rv`` answer 410 Gone."""
        if kind not in self._history:
            self._history[kind] = deque()
            self._compacted[kind] = rv
            self._watches[kind] = []

    def watches(self, kind: str) -> list[Watch]:
        """The open watches of a kind (a copy)."""
        with self.lock:
            return list(self._watches.get(kind, ()))

    def commit(self, kind: str, etype: str, old: KubeObject | None, new: KubeObject | None, rv: int) -> None:
        """Record a committed change and send it to every open watch of its kind."""
        obj = new if new is not None else old
        ev = WatchEvent(etype, obj, rv, old if etype != DELETED else None)
        hist = self._history[kind]
        if len(hist) >= self.history_size:
            dropped = hist.popleft()
            self._compacted[kind] = dropped.resource_version
        hist.append(ev)
        if etype == DELETED:
            for w in list(self._watches[kind]):
                w._offer(DELETED, obj, None, rv)
        else:
            for w in list(self._watches[kind]):
                w._offer(etype, old, new, rv)

    def open(self, kind: str, namespace: str | None, label_selector: LabelSelector | None,
             field_selector: FieldSelector | None, bookmarks: bool, resource_version: str,
             current: Iterable[KubeObject], current_rv: int) -> Watch:
        """A watch from ``resource_version``: "" or "0" start with synthetic ADDED events for
        ``current`` (what exists now); a version older than the kept history raises Gone."""
        w = Watch(self, kind, namespace, label_selector, field_selector, bookmarks)
        if resource_version in ("", "0"):
            for o in current:
                if w.matches(o):
                    w._events.append(WatchEvent(ADDED, o, current_rv))
        else:
            try:
                rv = int(resource_version)
            except ValueError as e:
                raise BadRequest(f'invalid resourceVersion "{resource_version}"') from e
            if rv < self._compacted[kind]:
                raise Gone(f"too old resource version: {rv} ({self._compacted[kind] + 1})")
            if rv > current_rv:
                raise Gone(f"too large resource version: {rv}, current: {current_rv}")
            for ev in self._history[kind]:
                if ev.resource_version <= rv:
                    continue
                if not w.filtered:
                    w._events.append(ev)
                    continue
                if ev.type == DELETED:
                    tev = w._translate(DELETED, ev.object, None, ev.resource_version)
                else:
                    tev = w._translate(ev.type, ev.prev, ev.object, ev.resource_version)
                if tev is not None:
                    w._events.append(tev)
        self._watches[kind].append(w)
        return w

    def remove(self, w: Watch) -> None:
        with self.lock:
            lst = self._watches.get(w.kind, [])
            if w in lst:
                lst.remove(w)

    def send_bookmarks(self, rv: int) -> None:
        """A BOOKMARK at ``rv`` to every watch that asked for them."""
        for lst in self._watches.values():
            for w in lst:
                if w.bookmarks:
                    w._push(WatchEvent(BOOKMARK, None, rv))

    def close(self, kind: str | None = None) -> None:
        """Close watches (as an API server restart would); clients must re-watch."""
        with self.lock:
            kinds = [kind] if kind else list(self._watches)
            ws = [w for k in kinds for w in self._watches[k]]
        for w in ws:
            w.stop()

    def compact(self, rv: int, kind: str | None = None) -> None:
        """Drop the history (as etcd compaction): versions up to ``rv`` answer 410 Gone."""
        for k in [kind] if kind else list(self._history):
            self._history[k].clear()
            self._compacted[k] = rv
