"""MostAllocated scoring strategy (upstream's most_allocated.go): favours fuller nodes (bin
packing). Per resource ``min(requested, allocatable) * 100 / allocatable``, weighted mean with
integer division."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ksched.scheduler.framework.interface import MAX_NODE_SCORE
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    Column,
    ScalarScorer,
    VectorScorer,
    safe_den,
    scaled,
)

__all__ = ["most_requested_score", "most_resource_scorer", "most_resource_vector_scorer"]


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        # Non-zero defaults can make the requested sum exceed the capacity.
        requested = capacity
    return requested * MAX_NODE_SCORE // capacity


def most_resource_scorer(weights: Sequence[int]) -> ScalarScorer:
    def score(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i in range(len(requested)):
            a = allocatable[i]
            if a == 0:
                continue
            w = weights[i]
            node_score += most_requested_score(requested[i], a) * w
            weight_sum += w
        if weight_sum == 0:
            return 0
        return node_score // weight_sum

    return score


def most_resource_vector_scorer(weights: Sequence[int]) -> VectorScorer:
    def score(cols: list[Column], n: int) -> np.ndarray:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for i, col in enumerate(cols):
            if col is None:
                continue
            r, _, a = col
            valid, den = safe_den(a)
            s = scaled(np.maximum(np.minimum(r, a), 0), den)
            w = weights[i]
            if valid is None:
                node_score += s * w
                weight_sum += w
            else:
                node_score += np.where(valid, s * w, 0)
                weight_sum += valid * w
        return node_score // np.maximum(weight_sum, 1)  # no resource: 0 // 1

    return score
