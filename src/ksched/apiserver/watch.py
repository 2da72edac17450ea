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

__all__ = ["Watch", "WatchCache", "history_event"]

# WatchCache.commit with the history event made and each unfiltered watch's ``Watch._push`` done
# inline (no call per event and watch: the store commits three writes a scheduled pod, each to
# the two pod informers' watches); False: through ``history_event`` and ``_push`` (the reference).
FAST_COMMIT = True

# A WatchEvent made through its slots' descriptors: the frozen dataclass's ``__init__`` sets each
# field with ``object.__setattr__`` (about 1.3 against 0.7 us; the store makes one per write).
_new = object.__new__
_set_type = WatchEvent.__dict__["type"].__set__
_set_object = WatchEvent.__dict__["object"].__set__
_set_rv = WatchEvent.__dict__["resource_version"].__set__
_set_prev = WatchEvent.__dict__["prev"].__set__


def history_event(etype: str, obj: KubeObject | None, rv: int, prev: KubeObject | None) -> WatchEvent:
    """``WatchEvent(etype, obj, rv, prev)``, the same event, made faster (the store's history
    event of every write)."""
    ev = _new(WatchEvent)
    _set_type(ev, etype)
    _set_object(ev, obj)
    _set_rv(ev, rv)
    _set_prev(ev, prev)
    return ev


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
        # ``not filtered``, kept (the selection is fixed when the watch opens): WatchCache.commit's.
        self._unfiltered = self.namespace is None and self.label_selector is None and self.field_selector is None
        self._events: deque[WatchEvent] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._waiting = False
        self.closed = False
        self.notify: Callable[[], None] | None = None
        # The version of the last event the consumer took (the version it was opened at before
        # any): where it would watch from again (WatchCache.delivered_history).
        self.taken_rv = 0

    def matches(self, obj: KubeObject) -> bool:
        if self.namespace is not None and obj.namespace != self.namespace:
            return False
        if self.label_selector is not None and not self.label_selector.matches(obj.labels):
            return False
        return self.field_selector is None or self.field_selector.matches(field_values(obj))

    def _push(self, ev: WatchEvent) -> None:
        # (WatchCache.commit does these steps inline with FAST_COMMIT: a change here goes there.)
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
            ev = self._events.popleft()
            self.taken_rv = ev.resource_version
            return ev
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
            ev = self._events.popleft()
            self.taken_rv = ev.resource_version
            return ev
        return None

    def drain(self) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        ev = self._events
        while ev:
            out.append(ev.popleft())
        if out:
            self.taken_rv = out[-1].resource_version
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

    # commit's fan-out over the kind's list as it is (never changed in place) with each watch's
    # kept ``not filtered``; False: over a copy, asking ``filtered`` (the reference).
    direct_fanout = True

    def __init__(self, kinds: Iterable[str], lock: threading.RLock, history: int, start_rv: int,
                 delivered_history: int | None = None) -> None:
        self.lock = lock
        self.history_size = history
        # When set: the history keeps the changes some open watch has not taken yet and, of
        # those every open watch has taken, only the last ``delivered_history`` (see _trim).
        self.delivered_history = delivered_history
        self._history: dict[str, deque[WatchEvent]] = {k: deque() for k in kinds}
        self._compacted: dict[str, int] = dict.fromkeys(self._history, start_rv)
        self._watches: dict[str, list[Watch]] = {k: [] for k in self._history}
        self._since_trim: dict[str, int] = dict.fromkeys(self._history, 0)
        # Per kind, where the consumers of the watches the server closed will watch from again.
        self._pins: dict[str, list[int]] = {k: [] for k in self._history}

    def add_kind(self, kind: str, rv: int) -> None:
        """Start keeping the history of a kind served from now on (a custom kind): versions
        before ``rv`` answer 410 Gone."""
        if kind not in self._history:
            self._history[kind] = deque()
            self._compacted[kind] = rv
            self._watches[kind] = []
            self._since_trim[kind] = 0
            self._pins[kind] = []

    def watches(self, kind: str) -> list[Watch]:
        """The open watches of a kind (a copy)."""
        with self.lock:
            return list(self._watches.get(kind, ()))

    def commit(self, kind: str, etype: str, old: KubeObject | None, new: KubeObject | None, rv: int) -> None:
        """Record a committed change and send it to every open watch of its kind."""
        obj = new if new is not None else old
        if FAST_COMMIT:
            ev = _new(WatchEvent)
            _set_type(ev, etype)
            _set_object(ev, obj)
            _set_rv(ev, rv)
            _set_prev(ev, old if etype != DELETED else None)
        else:
            ev = history_event(etype, obj, rv, old if etype != DELETED else None)
        hist = self._history[kind]
        if len(hist) >= self.history_size:
            dropped = hist.popleft()
            self._compacted[kind] = dropped.resource_version
        hist.append(ev)
        if self.delivered_history is not None:
            n = self._since_trim[kind] + 1
            if n >= self.delivered_history:
                n = 0
                self._trim(kind, rv)
            self._since_trim[kind] = n
        watches = self._watches[kind]
        if not watches:
            return
        if self.direct_fanout:
            # The list is never changed in place (open and remove replace it): a watch opened or
            # removed by a consumer woken below is not in this commit's fan-out, as with a copy.
            fast = FAST_COMMIT
            for w in watches:
                if w._unfiltered:
                    if not fast:
                        w._push(ev)
                        continue
                    # Watch._push, inline.
                    if w.closed:
                        continue
                    w._events.append(ev)
                    if w._waiting:
                        with w._cond:
                            w._cond.notify()
                    n = w.notify
                    if n is not None:
                        n()
                elif etype == DELETED:
                    w._offer(DELETED, obj, None, rv)
                else:
                    w._offer(etype, old, new, rv)
            return
        for w in list(watches):
            if not w.filtered:
                # Every unfiltered watch sees the history's event itself (its ``prev`` is read
                # only when history is replayed to a filtered watch).
                w._push(ev)
            elif etype == DELETED:
                w._offer(DELETED, obj, None, rv)
            else:
                w._offer(etype, old, new, rv)

    def _trim(self, kind: str, rv: int) -> None:
        """Drop the changes older than where any consumer of ``kind`` would watch from again,
        but the last ``delivered_history``. That is what the history serves: a watch opened from
        a version (a consumer that listed, or whose watch closed, and watches again) replays the
        changes after it. Each open watch's consumer would resume from the last event it took
        (``Watch.taken_rv``), the consumer of a watch the server closed from where it had taken
        when it closed (a pin, released when a watch from an older version than now opens); a
        watch from further back answers 410 Gone, as from any compacted history, and an
        informer lists again (a consumer that resumes from the version of an object in its
        synthetic ADDED events, older than their event, may find it gone). Old versions otherwise
        stay alive here long after everyone saw them (in a simulation nothing watches from an
        old version: its informers list and watch at once and their watches are never closed)."""
        floor = rv
        for w in self._watches[kind]:
            if w.taken_rv < floor:
                floor = w.taken_rv
        for p in self._pins[kind]:
            if p < floor:
                floor = p
        hist = self._history[kind]
        keep = self.delivered_history or 0
        dropped = None
        while len(hist) > keep and hist[0].resource_version <= floor:
            dropped = hist.popleft()
        if dropped is not None:
            self._compacted[kind] = dropped.resource_version

    def open(self, kind: str, namespace: str | None, label_selector: LabelSelector | None,
             field_selector: FieldSelector | None, bookmarks: bool, resource_version: str,
             current: Iterable[KubeObject], current_rv: int) -> Watch:
        """A watch from ``resource_version``: "" or "0" start with synthetic ADDED events for
        ``current`` (what exists now); a version older than the kept history raises Gone."""
        w = Watch(self, kind, namespace, label_selector, field_selector, bookmarks)
        w.taken_rv = current_rv
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
            w.taken_rv = rv
            pins = self._pins[kind]
            if pins and (rv < current_rv or rv in pins):
                # A consumer watches again: the latest pin at or before its version is released
                # (whoever's it was, each consumer still waiting has a pin at or before its own).
                # From the current version, only a pin at it: that consumer took everything
                # before the close (a fresh list-then-watch there releases nobody's older pin).
                mine = [p for p in pins if p <= rv]
                if mine:
                    pins.remove(max(mine))
        self._watches[kind] = [*self._watches[kind], w]  # a new list: see commit
        return w

    def remove(self, w: Watch) -> None:
        with self.lock:
            lst = self._watches.get(w.kind)
            if lst is not None and w in lst:
                lst = list(lst)
                lst.remove(w)
                self._watches[w.kind] = lst  # a new list: see commit

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
            if self.delivered_history is not None:
                for w in ws:
                    self._pins[w.kind].append(w.taken_rv)
        for w in ws:
            w.stop()

    def compact(self, rv: int, kind: str | None = None) -> None:
        """Drop the history (as etcd compaction): versions up to ``rv`` answer 410 Gone."""
        for k in [kind] if kind else list(self._history):
            self._history[k].clear()
            self._compacted[k] = rv
