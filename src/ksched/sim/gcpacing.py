"""Pacing of Python's cyclic garbage collector while a simulation loads and runs.

A simulation allocates millions of small objects that live until it ends (manifests, typed
objects, cache entries) and makes almost no reference cycles: at 4,000 pods the collector found
749 cyclic objects in a whole run, none of them in a full collection. With CPython's default
thresholds (700, 10, 10) it still ran about 1,100 young collections and, as the heap grew, a
full collection each time it had grown by a quarter (17 at 1000 nodes / 20,000 pods), each
walking every live object: about 15 % of the CPU time of ``ksched simulate`` at that size
(docs/benchmarks.md). :func:`fewer_collections` raises the thresholds for the duration of a
block: young collections every 100,000 allocations, the middle generation every 50 of them,
and a full collection only after 1,000 of those (5e9 allocations: in practice none while a
simulation runs). Cycles among young objects are still collected; cyclic garbage that reached
the oldest generation waits for the first full collection after the block. The previous
thresholds come back when the block ends (blocks nest).

Not an upstream file: Go's garbage collector has no generational thresholds to pace.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SIMULATION_THRESHOLDS", "fewer_collections"]

# gc.set_threshold while a simulation runs: allocations (net of deallocations) between young
# collections, young collections between middle ones, middle ones between full ones.
SIMULATION_THRESHOLDS = (100_000, 50, 1000)


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
