"""One bounded memo for every place that remembers derived values by key (parsed selectors and
terms, per-node values, reason strings, verdicts): a dict that holds at most ``maxsize``
entries and, when full, forgets the entry stored first.

It is an ``OrderedDict`` underneath: a hit costs what ``dict.get`` costs (the hot paths read
these per node; lookups are the dict's own), and forgetting the oldest entry is O(1). (A plain
dict's first key, deleted again and again, leaves a growing run of deleted slots that every
``next(iter(d))`` walks until the dict is next resized: about 2 us per insertion into a full
cache of 4096 entries, against 0.3.) Values must be derivable again from their key: forgetting
one only costs time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

__all__ = ["DEFAULT_MAXSIZE", "BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAXSIZE = 4096


class BoundedCache(OrderedDict[K, V]):
    __slots__ = ("maxsize",)

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE) -> None:
        super().__init__()
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (forgetting the oldest entry if full); returns it."""
        if key not in self and len(self) >= self.maxsize:
            self.popitem(last=False)
        self[key] = value
        return value
