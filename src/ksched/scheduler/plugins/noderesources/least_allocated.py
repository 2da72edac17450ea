"""LeastAllocated scoring strategy (upstream's least_allocated.go): favours nodes with more
room left. Per resource ``(allocatable - requested) * 100 / allocatable`` (0 if the request
exceeds allocatable), weighted mean with integer division."""

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

__all__ = ["least_requested_score", "least_resource_scorer", "least_resource_vector_scorer"]


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _room(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    return np.maximum(allocatable - requested, 0)  # requests above allocatable score 0


def least_resource_scorer(weights: Sequence[int]) -> ScalarScorer:
    return weighted_mean_scorer(weights, least_requested_score)


def least_resource_vector_scorer(weights: Sequence[int]) -> VectorScorer:
    return weighted_mean_vector_scorer(weights, _room)
