"""NUMA node masks (``pkg/kubelet/cm/topologymanager/bitmask/bitmask.go``) as plain ints: bit
``i`` set means NUMA node ``i``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import combinations

__all__ = ["bits", "count", "is_narrower_than", "iterate_bit_masks", "mask_of"]


def mask_of(ids: Iterable[int]) -> int:
    m = 0
    for i in ids:
        if not 0 <= i < 64:
            raise ValueError(f"bit number must be in range 0-63, got {i}")
        m |= 1 << i
    return m


def bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def count(mask: int) -> int:
    return bin(mask).count("1")


def is_narrower_than(a: int, b: int) -> bool:
    """Fewer NUMA nodes; with as many, the one that is less as a number (upstream IsLessThan:
    lower-numbered nodes win)."""
    ca, cb = count(a), count(b)
    return a < b if ca == cb else ca < cb


def iterate_bit_masks(ids: Iterable[int]) -> Iterator[int]:
    """Every non-empty combination of ``ids``: all of one node, then all pairs, ... (upstream's
    IterateBitMasks order)."""
    ids = list(ids)
    for size in range(1, len(ids) + 1):
        for combo in combinations(ids, size):
            yield mask_of(combo)
