"""MostAllocated scoring strategy (upstream's most_allocated.go): favours fuller nodes (bin
packing). Per resource ``min(requested, allocatable) * 100 / allocatable``, weighted mean with
integer division."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ksched.scheduler.framework.interface import MAX_NODE_SCORE
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    ScalarScorer,
    VectorScorer,
    weighted_mean_scorer,
    weighted_mean_vector_scorer,
)

__all__ = ["most_requested_score", "most_resource_scorer", "most_resource_vector_scorer"]


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        # Non-zero defaults can make the requested sum exceed the capacity.
        requested = capacity
    return requested * MAX_NODE_SCORE // capacity


def _used(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(requested, allocatable), 0)


def most_resource_scorer(weights: Sequence[int]) -> ScalarScorer:
    return weighted_mean_scorer(weights, most_requested_score)


def most_resource_vector_scorer(weights: Sequence[int]) -> VectorScorer:
    return weighted_mean_vector_scorer(weights, _used)
