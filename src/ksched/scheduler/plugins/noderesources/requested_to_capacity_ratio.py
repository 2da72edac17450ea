"""RequestedToCapacityRatio scoring strategy (upstream's requested_to_capacity_ratio.go and
helper/shape_score.go): a broken-linear function of each resource's utilization, configured
by ``shape`` points (utilization 0..100 -> score 0..10, scaled to 0..100).

Per resource: utilization ``requested * 100 / allocatable`` (exact integer arithmetic, 100 when
the request reaches or exceeds allocatable); resources scoring 0 are left out of the weighted
mean, which is rounded half away from zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ksched.scheduler.framework.interface import MAX_NODE_SCORE
from ksched.scheduler.plugins.helper.shape_score import build_broken_linear_function
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    Column,
    ScalarScorer,
    VectorScorer,
    safe_den,
    scaled,
)

__all__ = [
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MAX_UTILIZATION",
    "build_broken_linear_function",
    "parse_shape",
    "requested_to_capacity_ratio_scorer",
    "requested_to_capacity_ratio_vector_scorer",
    "utilization",
]

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10

Shape = tuple[tuple[int, int], ...]
"""(utilization, score) points, utilization strictly increasing."""


def parse_shape(raw: Any, path: str) -> Shape:
    """``requestedToCapacityRatio.shape`` validated as upstream: at least one point,
    utilization in [0, 100] and strictly increasing, score in [0, 10]."""
    pts = list(raw or [])
    if not pts:
        raise ValueError(f"{path}: Required value: at least one point must be specified")
    out: list[tuple[int, int]] = []
    errors: list[str] = []
    last = -1
    for i, pt in enumerate(pts):
        u = pt.get("utilization", 0) if isinstance(pt, Mapping) else None
        s = pt.get("score", 0) if isinstance(pt, Mapping) else None
        if not isinstance(u, int) or isinstance(u, bool) or not 0 <= u <= MAX_UTILIZATION:
            errors.append(f"{path}[{i}].utilization: Invalid value: {u!r}: not in valid range [0, 100]")
        elif u <= last:
            errors.append(f"{path}[{i}].utilization: Invalid value: {u}: utilization values must be sorted "
                          "in increasing order")
        else:
            last = u
        if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(f"{path}[{i}].score: Invalid value: {s!r}: not in valid range [0, 10]")
        if isinstance(u, int) and isinstance(s, int):
            out.append((u, s))
    if errors:
        raise ValueError("; ".join(errors))
    return tuple(out)


def utilization(requested: int, capacity: int) -> int:
    """The utilization fed to the shape: 100 if there is no capacity or the request exceeds
    it, else ``requested * 100 / capacity`` clamped to [0, 100] (upstream's scaledUtilization)."""
    if capacity == 0 or requested > capacity:
        return MAX_UTILIZATION
    if capacity <= 0 or requested <= 0:
        return 0
    if requested >= capacity:
        return MAX_UTILIZATION
    return requested * MAX_UTILIZATION // capacity


def _score_table(shape: Shape) -> np.ndarray:
    """The resource score for every utilization 0..100 (shape scores scaled to 0..100)."""
    f = build_broken_linear_function(
        [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape])
    return np.asarray([f(p) for p in range(MAX_UTILIZATION + 1)], dtype=np.int64)


def _round_div(num: int, den: int) -> int:
    """math.Round(num / den) for num >= 0, den > 0 (half away from zero), exactly."""
    return (2 * num + den) // (2 * den)


def requested_to_capacity_ratio_scorer(weights: Sequence[int], shape: Shape) -> ScalarScorer:
    table = _score_table(shape).tolist()

    def score(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i in range(len(requested)):
            a = allocatable[i]
            if a == 0:
                continue
            s = table[utilization(requested[i], a)]
            if s > 0:
                w = weights[i]
                node_score += s * w
                weight_sum += w
        if weight_sum == 0:
            return 0
        return _round_div(node_score, weight_sum)

    return score


def requested_to_capacity_ratio_vector_scorer(weights: Sequence[int], shape: Shape) -> VectorScorer:
    table = _score_table(shape)

    def score(cols: list[Column], n: int) -> np.ndarray:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for i, col in enumerate(cols):
            if col is None:
                continue
            r, _, a = col
            valid, den = safe_den(a)
            util = np.where(r >= a, MAX_UTILIZATION,
                            np.where(r <= 0, 0, scaled(np.clip(r, 0, np.maximum(a, 0)), den)))
            s = table[util]
            inc = s > 0 if valid is None else valid & (s > 0)
            w = weights[i]
            node_score += np.where(inc, s * w, 0)
            weight_sum += inc * w
        den_sum = np.maximum(weight_sum, 1)
        return (2 * node_score + den_sum) // (2 * den_sum)  # no resource: 1 // 2 == 0

    return score
