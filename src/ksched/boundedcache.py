"""One bounded memo for every place that remembers derived values by key (parsed selectors and
terms, per-node values, reason strings, verdicts): a dict that holds at most ``maxsize``
entries and, when full, forgets the entry stored first.

It is a plain ``dict`` underneath, so a hit costs what ``dict.get`` costs (the hot paths read
these per node). Values must be derivable again from their key: forgetting one only costs
time.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

__all__ = ["DEFAULT_MAXSIZE", "BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAXSIZE = 4096


class BoundedCache(dict[K, V]):
    __slots__ = ("maxsize",)

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE) -> None:
        super().__init__()
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (forgetting the oldest entry if full); returns it."""
        if key not in self and len(self) >= self.maxsize:
            del self[next(iter(self))]
        self[key] = value
        return value
