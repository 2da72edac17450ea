"""Random (artifact ``pkg/simulator/plugin/random_score.go``): PreScore picks one feasible node
uniformly (``rand.Intn``); it scores 100 and every other node 0. Sharing pods take a random GPU
that fits (the experiments' ``gpuSelMethod=random``).

Not row-local: the score of a node depends on the draw. The per-node and vectorized forms
score against the drawn node, which :meth:`Random.draw` sets.
"""

from __future__ import annotations

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["Random"]


class Random(GpuPolicy):
    name = "Random"
    row_local = False
    gpu_method = "random"

    @staticmethod
    def draw(n: int, rng: np.random.Generator) -> int:
        """Which of ``n`` feasible nodes (in order) wins."""
        return int(rng.integers(n))

    def score_node(self, view: NodeView, shape: PodShape) -> int:  # pragma: no cover - scored by the draw
        return 0

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        return np.zeros(len(rows), dtype=np.int64)
