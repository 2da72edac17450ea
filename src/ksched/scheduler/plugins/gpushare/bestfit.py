"""BestFit (artifact ``pkg/simulator/plugin/best_fit_score.go``): prefer the node with the least
CPU and GPU left after placing the pod, equally weighted and normalized by the largest node
(128 CPUs, 8 GPUs):

    raw = int((1 - (0.5 (cpuLeft - cpuReq) / 128000 + 0.5 (gpuLeft - gpuReq) / 8000)) * 100)

then min-max normalized over the scored nodes (all 0 when equal). Sharing pods take the
best-fitting GPU.

Divergence: the artifact's Score returns an Error where the pod does not fit; here Filter has
already removed those nodes.
"""

from __future__ import annotations

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.shape import MAX_SPEC_CPU, MAX_SPEC_GPU, NodeView, PodShape

__all__ = ["BestFit"]


class BestFit(GpuPolicy):
    name = "BestFit"
    normalize = True

    def score_node(self, view: NodeView, shape: PodShape) -> int:
        cpu = view.cpu_left - shape.cpu
        gpu = view.idle - shape.gpu_total
        return int((1 - (0.5 * cpu / MAX_SPEC_CPU + 0.5 * gpu / MAX_SPEC_GPU)) * 100)

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        cpu = cols.cpu_left[rows] - shape.cpu
        gpu = cols.free[rows].sum(axis=1) - shape.gpu_total
        return ((1 - (0.5 * cpu / MAX_SPEC_CPU + 0.5 * gpu / MAX_SPEC_GPU)) * 100).astype(np.int64)
