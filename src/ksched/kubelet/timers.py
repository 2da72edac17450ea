"""The simulated kubelet's timers (container starts, exits, OOM kills, restarts, stops): a queue of
entries ``(due, seq, ...)`` taken in the order of ``(due, seq)``, ``seq`` counting the pushes.
Upstream has no such queue (each pod worker sleeps on its own); this is ``ksched.kubelet.fake``'s
way of running them on the simulation's clock.

The kubelet pushes a whole batch of pods at one instant (every pod bound in a scheduler step
gets its start timer at ``now + startup_delay``), so most entries share their ``due`` with
thousands of others. :class:`BucketTimers` keeps one FIFO per distinct ``due`` and a heap of the
distinct dues: as ``seq`` only grows, a bucket's entries are already in ``seq`` order, so a pop
is a ``popleft`` instead of a ``heappop`` sifting through the whole heap of tuples (about 1-3 us
per pop at 20,000-100,000 pending timers). ``BUCKETED_TIMERS = False`` is the reference: one
heap of the entries (:class:`HeapTimers`), the same pops in the same order
(``tests/kubelet/test_timer_buckets.py``).

Divergences: none (no upstream counterpart).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

__all__ = ["BUCKETED_TIMERS", "BucketTimers", "HeapTimers", "new_timers"]

# One FIFO per distinct due time; False: one heap of every entry (the reference).
BUCKETED_TIMERS = True


class HeapTimers:
    """Entries ``(due, seq, ...)`` with increasing ``seq``, taken smallest ``(due, seq)`` first."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[Any, ...]] = []

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, entry: tuple[Any, ...]) -> None:
        heapq.heappush(self._heap, entry)

    def next_due(self) -> float:
        """The first entry's due time (the queue is not empty)."""
        return self._heap[0][0]  # type: ignore[no-any-return]

    def pop(self) -> tuple[Any, ...]:
        return heapq.heappop(self._heap)

    def pop_due(self, now: float) -> tuple[Any, ...] | None:
        """``pop()`` when the queue is not empty and ``next_due() <= now``; None otherwise."""
        heap = self._heap
        if not heap or not heap[0][0] <= now:
            return None
        return heapq.heappop(heap)


class BucketTimers:
    """:class:`HeapTimers` with one FIFO per distinct due time: entries pushed with increasing
    ``seq`` (the caller's counter) come out in the same order as from the heap."""

    __slots__ = ("_buckets", "_dues", "_n")

    def __init__(self) -> None:
        self._dues: list[float] = []  # heap of the distinct due times that have entries
        self._buckets: dict[float, deque[tuple[Any, ...]]] = {}
        self._n = 0

    def __bool__(self) -> bool:
        return self._n > 0

    def __len__(self) -> int:
        return self._n

    def push(self, entry: tuple[Any, ...]) -> None:
        due = entry[0]
        bucket = self._buckets.get(due)
        if bucket is None:
            self._buckets[due] = deque((entry,))
            heapq.heappush(self._dues, due)
        else:
            bucket.append(entry)
        self._n += 1

    def next_due(self) -> float:
        """The first entry's due time (the queue is not empty)."""
        return self._dues[0]

    def pop(self) -> tuple[Any, ...]:
        due = self._dues[0]
        bucket = self._buckets[due]
        entry = bucket.popleft()
        if not bucket:
            del self._buckets[due]
            heapq.heappop(self._dues)
        self._n -= 1
        return entry

    def pop_due(self, now: float) -> tuple[Any, ...] | None:
        """``pop()`` when the queue is not empty and ``next_due() <= now``; None otherwise (one
        call a timer in the kubelet's step instead of three)."""
        dues = self._dues
        if not dues or not dues[0] <= now:
            return None
        due = dues[0]
        bucket = self._buckets[due]
        entry = bucket.popleft()
        if not bucket:
            del self._buckets[due]
            heapq.heappop(dues)
        self._n -= 1
        return entry


def new_timers() -> BucketTimers | HeapTimers:
    """The queue ``BUCKETED_TIMERS`` asks for."""
    return BucketTimers() if BUCKETED_TIMERS else HeapTimers()
