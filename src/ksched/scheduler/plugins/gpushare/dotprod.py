"""DotProd, Tetris-style alignment (artifact ``pkg/simulator/plugin/dot_product_score.go``, with
the experiments' ``dimExtMethod=merge`` and ``normMethod=max``): node and pod as vectors of CPU
and total GPU, each normalized by the largest node (128 CPUs, 8 GPUs):

    score = int(100 * (1 - (node . pod) / 2))

where node = (cpuLeft/128000, gpuLeft/8000) before placing the pod. No normalization; sharing
pods take the best-fitting GPU.

Divergence: clipped to 0..100 (only nodes larger than 128 CPUs / 8 GPUs can leave it; the
framework requires that range).
"""

from __future__ import annotations

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.shape import MAX_SPEC_CPU, MAX_SPEC_GPU, NodeView, PodShape

__all__ = ["DotProd"]


class DotProd(GpuPolicy):
    name = "DotProd"

    def score_node(self, view: NodeView, shape: PodShape) -> int:
        dot = (view.cpu_left / MAX_SPEC_CPU) * (shape.cpu / MAX_SPEC_CPU) + \
            (view.idle / MAX_SPEC_GPU) * (shape.gpu_total / MAX_SPEC_GPU)
        return min(max(int(100 * (1 - dot / 2)), 0), 100)

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        dot = (cols.cpu_left[rows] / MAX_SPEC_CPU) * (shape.cpu / MAX_SPEC_CPU) + \
            (cols.free[rows].sum(axis=1) / MAX_SPEC_GPU) * (shape.gpu_total / MAX_SPEC_GPU)
        return np.clip((100 * (1 - dot / 2)).astype(np.int64), 0, 100)
