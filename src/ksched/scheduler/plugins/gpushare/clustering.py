"""GpuClustering (artifact ``pkg/simulator/plugin/gpu_clustering_score.go``): keep pods of one
kind together. Pods are tagged ``share-gpu`` (a fraction of one GPU) or ``<n>-gpu`` (n whole
GPUs); a pod without GPUs scores 0. Otherwise

    score = 25 (8000 - gpuLeft) / 8000  (integer)  +  offset

with offset 75 when the node's only resident GPU-pod tag is the pod's, 50 when the pod's tag is
among several, 25 when the node has no GPU pods, 0 when it has only other tags. Sharing pods
take the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy, div_trunc
from ksched.scheduler.plugins.gpushare.shape import MAX_SPEC_GPU, NodeView, PodShape

__all__ = ["GpuClustering"]


def _trunc(a: int, b: int) -> int:
    q = abs(a) // b
    return -q if a < 0 else q


class GpuClustering(GpuPolicy):
    name = "GpuClustering"

    def score_node(self, view: NodeView, shape: PodShape) -> int:
        if not shape.needs_gpu:
            return 0
        base = _trunc(25 * (MAX_SPEC_GPU - view.idle), MAX_SPEC_GPU)
        present = {t for t, n in view.tags.items() if n > 0}
        tag = shape.tag
        if present == {tag}:
            off = 75
        elif tag in present:
            off = 50
        elif not present:
            off = 25
        else:
            off = 0
        return base + off

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        if not shape.needs_gpu:
            return np.zeros(len(rows), dtype=np.int64)
        base = div_trunc(25 * (MAX_SPEC_GPU - cols.free[rows].sum(axis=1)), MAX_SPEC_GPU)
        t = cols.tag_index(shape.tag)
        tags = cols.tags[rows]
        distinct = (tags > 0).sum(axis=1)
        has = tags[:, t] > 0 if t < tags.shape[1] else np.zeros(len(rows), dtype=bool)
        off = np.where(has, np.where(distinct == 1, 75, 50), np.where(distinct == 0, 25, 0))
        return (base + off).astype(np.int64)
