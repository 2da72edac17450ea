"""Reductions of one-dimensional NumPy arrays for the scheduling cycle's hot paths.

``a.max()``, ``a.min()``, ``a.all()`` and ``a.any()`` go through NumPy's Python-level wrappers
(``numpy/_core/_methods.py``: about 0.5-0.8 us a call, more than the reduction of a few hundred
elements itself); ``np.all(a)`` adds the array-function dispatch on top. The ufuncs' ``reduce``
called directly does the same reduction in C: for a one-dimensional array (its only axis is
``reduce``'s default axis 0) it gives the same value, of the same type, and raises the same
``ValueError`` on an empty array where ``max``/``min`` do. Only for one-dimensional arrays:
on more dimensions ``reduce`` reduces the first axis, the methods every axis.
``tests/scheduler/framework/test_reduce.py`` compares them with the methods.

Not an upstream file (Go has no such overhead).
"""

from __future__ import annotations

import numpy as np

__all__ = ["all_1d", "any_1d", "max_1d", "min_1d"]

# a.max(), a.min(), a.all(), a.any() of a one-dimensional array a.
max_1d = np.maximum.reduce
min_1d = np.minimum.reduce
all_1d = np.logical_and.reduce
any_1d = np.logical_or.reduce
