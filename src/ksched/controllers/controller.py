"""What every controller of the embedded cluster is built from, as kube-controller-manager's
controllers are: shared informers in (watches of the API server), a work queue of object keys,
a ``sync(key)`` that reads the informers' caches and writes to the API, nothing else.

A controller never reaches into the store: it sees the cluster only through its client and
informers, exactly as a controller sees a real kube-apiserver. Its handlers run in the
thread that drives it (the manager's), so its state needs no locks.

Upstream: ``k8s.io/client-go/util/workqueue`` (the queue: a key is queued at most once, a key
being synced and queued again is synced again afterwards; failed syncs are retried with
exponential backoff, 5 ms doubling to 1000 s) and the ``Run``/``processNextWorkItem`` loop every
controller repeats.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable
from typing import Any, ClassVar

from ksched.api.errors import ApiError
from ksched.client.informer import InformerFactory
from ksched.clock import Clock

__all__ = ["Controller", "WorkQueue"]

log = logging.getLogger(__name__)

# Upstream's DefaultControllerRateLimiter per-item backoff.
RETRY_BASE_SECONDS = 0.005
RETRY_MAX_SECONDS = 1000.0


class WorkQueue:
    """Keys to sync in the order they came, each at most once; delayed adds on the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._ready: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._waiting: dict[Hashable, float] = {}  # key -> when its delayed add comes due
        self._seq = itertools.count()
        self._failures: dict[Hashable, int] = {}

    def add(self, key: Hashable) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)

    def add_after(self, key: Hashable, seconds: float) -> None:
        """Queue ``key`` once ``seconds`` have passed on the clock. A key already waiting keeps
        the earlier of its two times (as client-go's delaying queue)."""
        if seconds <= 0:
            self.add(key)
            return
        due = self.clock.now() + seconds
        current = self._waiting.get(key)
        if current is not None and current <= due:
            return
        self._waiting[key] = due
        heapq.heappush(self._delayed, (due, next(self._seq), key))

    def add_rate_limited(self, key: Hashable) -> None:
        """Retry a failed key after its backoff (doubling with each failure in a row)."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        # The exponent stops growing once the cap is reached (2**n as a float overflows past 1023).
        self.add_after(key, min(RETRY_BASE_SECONDS * 2 ** min(n, 64), RETRY_MAX_SECONDS))

    def forget(self, key: Hashable) -> None:
        """The key synced: its backoff starts over."""
        self._failures.pop(key, None)

    def _promote(self) -> None:
        if self._delayed:
            now = self.clock.now()
            while self._delayed and self._delayed[0][0] <= now:
                due, _, key = heapq.heappop(self._delayed)
                if self._waiting.get(key) == due:  # else superseded by an earlier time
                    del self._waiting[key]
                    self.add(key)
            self._drop_superseded()

    def _drop_superseded(self) -> None:
        while self._delayed and self._waiting.get(self._delayed[0][2]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)

    def pop(self) -> Hashable | None:
        """The next key ready to sync, or None."""
        self._promote()
        if not self._ready:
            return None
        key = self._ready.popleft()
        self._queued.discard(key)
        return key

    def due(self, key: Hashable) -> float | None:
        """When ``key`` is to be synced: now if it is ready, its time if it waits, else None."""
        if key in self._queued:
            return self.clock.now()
        return self._waiting.get(key)

    def next_wakeup(self) -> float | None:
        """When the earliest delayed key becomes ready."""
        self._drop_superseded()
        return self._delayed[0][0] if self._delayed else None

    def __len__(self) -> int:
        self._promote()
        return len(self._ready)


class Controller(ABC):
    """One controller. Subclasses register informer handlers in ``__init__`` that queue keys,
    and implement :meth:`sync`. ``name`` is upstream's name for the controller (what
    kube-controller-manager's ``--controllers`` flag takes)."""

    name: ClassVar[str] = ""

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        self.client = client
        self.informers = informers
        self.clock = clock
        self.queue = WorkQueue(clock)

    @abstractmethod
    def sync(self, key: Any) -> None:
        """Bring the cluster in line for one key. An exception (an ApiError, usually) retries
        the key with backoff."""

    def process(self, limit: int = 1 << 30) -> int:
        """Sync the ready keys (at most ``limit``); returns how many were synced."""
        n = 0
        while n < limit:
            key = self.queue.pop()
            if key is None:
                break
            n += 1
            try:
                self.sync(key)
            except ApiError as e:
                log.debug("%s: syncing %r failed, retrying: %s", self.name, key, e)
                self.queue.add_rate_limited(key)
            except Exception:
                # A bug: say so loudly, but neither stop the other controllers nor fail the
                # unrelated write whose settle ran this sync.
                log.exception("%s: syncing %r crashed, retrying", self.name, key)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
        return n

    def next_wakeup(self) -> float | None:
        return self.queue.next_wakeup()

    def __repr__(self) -> str:
        return f"<controller {self.name}>"
