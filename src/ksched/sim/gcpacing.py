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

Not an upstream file: Go's garbage collector has no generational thresholds to pace.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SIMULATION_THRESHOLDS", "fewer_collections"]

# gc.set_threshold while a simulation runs: allocations (net of deallocations) between young
# collections, young collections between middle ones, middle ones between full ones.
SIMULATION_THRESHOLDS = (1_000_000, 1000, 1000)


@contextmanager
def fewer_collections(thresholds: tuple[int, int, int] = SIMULATION_THRESHOLDS) -> Iterator[None]:
    """Collect less often (each threshold at least ``thresholds``' and never lower than the
    current one) until the block ends."""
    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(thresholds, old, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*old)
