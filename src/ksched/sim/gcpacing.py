"""Pacing of Python's cyclic garbage collector while a simulation loads and runs.

A simulation allocates millions of small objects that live until it ends (manifests, typed
objects, cache entries) and makes almost no reference cycles: at 4,000 pods the collector found
749 cyclic objects in a whole run, none of them in a full collection. With CPython's default
thresholds (700, 10, 10) it still ran about 1,100 young collections and, as the heap grew, a
full collection each time it had grown by a quarter (17 at 1000 nodes / 20,000 pods), each
walking every live object: about 15 % of the CPU time of ``ksched simulate`` at that size
(docs/benchmarks.md). :func:`fewer_collections` raises the thresholds for the duration of a
block: young collections every 1,000,000 allocations, the middle generation only after 1,000 of
them and a full collection only after 1,000 of those (1e9 and 1e12 allocations: in practice
neither while a simulation runs). A young collection walks the objects allocated since the
last one that are still alive: the fewer collections, the more of the run's temporaries are
gone by then (at 1000 nodes / 20,000 pods: 12 young collections every 100,000 allocations
took 0.31-0.34 CPU s of the run, one at 1,000,000 0.20-0.21 s). A middle collection walks every object that survived a young
one since the last: at 5000 nodes / 100,000 pods, with the middle threshold at 50, one ran in
the schedule phase, took 1.4 CPU s and found nothing. Cycles among young objects are still
collected; cyclic garbage that survived a young collection waits for the first middle or full
collection after the block. The previous thresholds come back when the block ends (blocks
nest). ``ksched simulate`` keeps one block from reading the manifests to writing the report: a
block around each phase alone left full collections of the whole heap between them (building
the simulation, building the report: 7 CPU s of 88 at the large size).

A young collection that finds (almost) nothing (at most one object in 1,000 of the young
generation) makes the next one wait :data:`BACKOFF` times as long, up to :data:`MAX_BACKOFF`
times the block's threshold; one that finds more brings the block's own threshold back (the outermost block
paces; an inner one leaves the pace as it found it). A young collection walks every young
object that is still alive, and reading the objects they refer to costs more the larger the heap:
at 5000 nodes / 100,000 pods the run's young collections took 0.3-0.7 CPU s each (1,000,000
allocations apart, 13 from the read to the report) and found nothing, so a simulation's cost
grew faster than its size; backing off collects at 1 and 5 million allocations, then after 21.

Not an upstream file: Go's garbage collector has no generational thresholds to pace.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BACKOFF", "MAX_BACKOFF", "SIMULATION_THRESHOLDS", "fewer_collections"]

# gc.set_threshold while a simulation runs: allocations (net of deallocations) between young
# collections, young collections between middle ones, middle ones between full ones.
SIMULATION_THRESHOLDS = (1_000_000, 1000, 1000)
# A young collection that found at most one object in FOUND_RATIO of the young generation: the
# next one waits BACKOFF times as long, up to MAX_BACKOFF times the block's young threshold (at
# most that many allocations' worth of cyclic garbage waits: 16 million at the simulation's).
BACKOFF = 4
MAX_BACKOFF = 16
FOUND_RATIO = 1000


class _Pacer:
    """A ``gc.callbacks`` hook pacing the young threshold by what young collections find."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.young = base
        self._walked = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 0:
            return
        if phase == "start":
            self._walked = gc.get_count()[0]
            return
        if info.get("collected", 0) * FOUND_RATIO <= self._walked:
            young = min(self.young * BACKOFF, self.base * MAX_BACKOFF)
        else:
            young = self.base
        if young != self.young:
            self.young = young
            _, middle, old = gc.get_threshold()
            gc.set_threshold(young, middle, old)


_pacer: _Pacer | None = None


@contextmanager
def fewer_collections(thresholds: tuple[int, int, int] = SIMULATION_THRESHOLDS) -> Iterator[None]:
    """Collect less often (each threshold at least ``thresholds``' and never lower than the
    current one) until the block ends; young collections that find nothing back off (see the
    module docstring)."""
    global _pacer
    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(thresholds, old, strict=True)))
    pacer = None
    if _pacer is None:
        pacer = _pacer = _Pacer(gc.get_threshold()[0])
        gc.callbacks.append(pacer)
    try:
        yield
    finally:
        if pacer is not None:
            _pacer = None
            gc.callbacks.remove(pacer)
            gc.set_threshold(*old)
        else:
            # The enclosing block's pace goes on (never below what this block found).
            outer = _pacer
            gc.set_threshold(max(old[0], outer.young) if outer is not None else old[0], old[1], old[2])
