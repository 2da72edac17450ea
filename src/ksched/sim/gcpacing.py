"""Pacing of Python's cyclic garbage collector while a simulation loads and runs.

A simulation allocates millions of small objects that live until it ends (manifests, typed
objects, cache entries) and makes almost no reference cycles: at 4,000 pods the collector found
749 cyclic objects in a whole run. With CPython's default thresholds (700, 10, 10) it still ran
about 1,100 young collections and several full ones, each full one walking every live object:
about 15 % of the CPU time of ``ksched simulate`` at 1000 nodes / 20,000 pods
(docs/benchmarks.md). :func:`fewer_collections` raises the young generation's threshold for the
duration of a block, so the collector runs about a hundred times less often; cycles are still
collected, later. The previous thresholds come back when the block ends (blocks nest).

Not an upstream file: Go's garbage collector has no generational thresholds to pace.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SIMULATION_THRESHOLD", "fewer_collections"]

# Allocations (net of deallocations) between young collections while a simulation runs.
SIMULATION_THRESHOLD = 100_000


@contextmanager
def fewer_collections(threshold: int = SIMULATION_THRESHOLD) -> Iterator[None]:
    """Collect the young generation after ``threshold`` allocations instead of CPython's 700
    (never fewer than the current threshold) until the block ends."""
    old = gc.get_threshold()
    gc.set_threshold(max(threshold, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
