"""A deep copy of manifests (JSON-like trees of dicts, lists and scalars), several times faster
than ``copy.deepcopy``, which the API store pays on every write it must own a copy of.

Plain ``dict`` and ``list`` nodes are copied recursively; ``str``, ``int``, ``float``, ``bool``
and ``None`` are immutable and shared; any other value (a dict subclass with its own
``__deepcopy__``, a datetime from a YAML timestamp) goes through ``copy.deepcopy``. Divergence
from ``copy.deepcopy``: a node reachable twice in the input (a YAML alias) is copied twice, so
the copy is a tree; an input that contains itself (a recursive YAML alias) falls back to
``copy.deepcopy`` whole. Not an upstream file: Go's generated ``DeepCopy`` methods play this part.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["deep_copy"]

_SCALARS = frozenset((str, int, float, bool, type(None)))


def _copy(x: Any) -> Any:
    t = type(x)
    if t is dict:
        return {k: v if type(v) in _SCALARS else _copy(v) for k, v in x.items()}
    if t is list:
        return [v if type(v) in _SCALARS else _copy(v) for v in x]
    if t in _SCALARS:
        return x
    return copy.deepcopy(x)


def deep_copy(x: Any) -> Any:
    """A copy of ``x`` that shares no mutable part with it."""
    try:
        return _copy(x)
    except RecursionError:
        return copy.deepcopy(x)
