"""GpuPacking (artifact ``pkg/simulator/plugin/gpu_packing_score.go``): fill partly used GPUs
first, then partly used nodes, and leave idle nodes idle. For a pod with GPUs:

1. every GPU of the node fully free: ``max(33 - n, n)`` (n: the node's GPUs);
2. otherwise take GPUs in ascending order of free milli (those that fit): if a fully free GPU
   is among them, ``max(50 - fully free GPUs used, 33)``;
3. otherwise (only shared GPUs used) ``max(100 - S / 10, 50)`` with S the sum over the used
   GPUs of ``free * 100 / 1000`` (integer division).

A pod without GPUs scores 0 everywhere. Sharing pods take the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from ksched.api.gpu import MILLI
from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.selection import sub_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["GpuPacking"]


class GpuPacking(GpuPolicy):
    name = "GpuPacking"

    def score_node(self, view: NodeView, shape: PodShape) -> int:
        if not shape.needs_gpu:
            return 0
        free = view.free
        n = len(free)
        if n and all(f == MILLI for f in free):
            return max(33 - n, n)
        used = sub_gpus(free, shape.milli, shape.count)
        if used is None:
            return 0
        full_used = sum(1 for i in used if free[i] == MILLI)
        if full_used:
            return max(50 - full_used, 33)
        s = sum(free[i] * 100 // MILLI for i in used)
        return max(100 - s // 10, 50)

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        if not shape.needs_gpu:
            return np.zeros(len(rows), dtype=np.int64)
        free = cols.free[rows]
        n = cols.count[rows]
        all_full = (free == MILLI).sum(axis=1) == n
        big = np.iinfo(np.int64).max
        key = np.sort(np.where(free >= shape.milli, free, big), axis=1)[:, : shape.count]
        fits = (key != big).all(axis=1)
        full_used = (key == MILLI).sum(axis=1)
        s = (np.where(key != big, key, 0) * 100 // MILLI).sum(axis=1)
        out = np.where(full_used > 0, np.maximum(50 - full_used, 33), np.maximum(100 - s // 10, 50))
        out = np.where(fits, out, 0)
        return np.where(all_full & (n > 0), np.maximum(33 - n, n), out).astype(np.int64)
