"""The interface every GPU-sharing scoring policy implements, once per node (the reference)
and once over many rows of :class:`~.columns.GpuColumns` (the vectorized form), plus the
helpers the artifact's policies share. The framework plugins (:mod:`.plugins`) and the replay
engine (``ksched.sim.replay``) both drive policies through this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import ClassVar

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.selection import choose_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["GpuPolicy", "div_trunc", "min_max_normalize", "min_max_normalize_list"]


def div_trunc(a: np.ndarray, b: int) -> np.ndarray:
    """Go's integer division (towards zero) for an int64 array and a positive divisor."""
    q = np.abs(a) // b
    return np.where(a < 0, -q, q)


def min_max_normalize(scores: np.ndarray) -> None:
    """In place: (s - min) * 100 / (max - min) in integer arithmetic; all 0 when all are equal
    (the artifact's BestFit NormalizeScore)."""
    if not len(scores):
        return
    lo = int(scores.min())
    hi = int(scores.max())
    if hi == lo:
        scores[:] = 0
    else:
        scores[:] = (scores - lo) * 100 // (hi - lo)


def min_max_normalize_list(scores: list[int]) -> list[int]:
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [0] * len(scores)
    return [(s - lo) * 100 // (hi - lo) for s in scores]


class GpuPolicy(ABC):
    """A scoring policy. ``score_node`` is the reference; ``score_rows`` must equal it on every
    row (tests prove it). Scores are raw: 0..100 after ``normalize`` (min-max) where set.
    ``row_local``: a node's score depends only on that node and the pod's shape (results may be
    cached per shape and recomputed for changed nodes only). ``gpu_method``: how a GPU-sharing
    pod's GPU is chosen on the selected node, unless the policy overrides :meth:`choose`."""

    name: ClassVar[str] = ""
    normalize: ClassVar[bool] = False
    row_local: ClassVar[bool] = True
    gpu_method: ClassVar[str] = "best"

    def cache_key(self) -> Hashable:
        """What of the policy's configuration its scores depend on (part of cache keys)."""
        return self.name

    @abstractmethod
    def score_node(self, view: NodeView, shape: PodShape) -> int:
        ...

    @abstractmethod
    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        ...

    def choose(self, view: NodeView, shape: PodShape, rng: np.random.Generator | None = None) -> tuple[int, ...] | None:
        """The GPUs the pod gets on the node the scheduler picked."""
        return choose_gpus(view.free, shape, self.gpu_method, rng)

    def __repr__(self) -> str:
        return f"<GPU policy {self.name}>"
