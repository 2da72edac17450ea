"""LeastAllocated scoring strategy (upstream's least_allocated.go): favours nodes with more
room left. Per resource ``(allocatable - requested) * 100 / allocatable`` (0 if the request
exceeds allocatable), weighted mean with integer division."""

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

__all__ = ["least_requested_score", "least_resource_scorer", "least_resource_vector_scorer"]


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_resource_scorer(weights: Sequence[int]) -> ScalarScorer:
    def score(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i in range(len(requested)):
            a = allocatable[i]
            if a == 0:
                continue
            w = weights[i]
            node_score += least_requested_score(requested[i], a) * w
            weight_sum += w
        if weight_sum == 0:
            return 0
        return node_score // weight_sum

    return score


def least_resource_vector_scorer(weights: Sequence[int]) -> VectorScorer:
    def score(cols: list[Column], n: int) -> np.ndarray:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for i, col in enumerate(cols):
            if col is None:
                continue
            r, _, a = col
            valid, den = safe_den(a)
            # Requests above allocatable score 0: max(a - r, 0) is 0 there.
            s = scaled(np.maximum(a - r, 0), den)
            w = weights[i]
            if valid is None:
                node_score += s * w
                weight_sum += w
            else:
                node_score += np.where(valid, s * w, 0)
                weight_sum += valid * w
        return node_score // np.maximum(weight_sum, 1)  # no resource: 0 // 1

    return score
