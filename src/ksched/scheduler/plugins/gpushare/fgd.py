"""FGD, fragmentation gradient descent (artifact ``pkg/simulator/plugin/fgd_score.go``): place the
pod where it increases the node's fragmentation, measured against the workload's typical pods
(:mod:`.frag`), the least:

    score = int(sigmoid((F_n(before) - F_n(after)) / 1000) * 100)

* a GPU-sharing pod tries each GPU that fits, in index order; the best (strictly better to
  replace an earlier one) gives the node's score, and is the GPU the pod gets there;
* any other pod: "after" removes the CPU and the GPUs ``NodeResource.Sub`` takes
  (:func:`.selection.sub_gpus`); whole-GPU pods then get the lowest-index fully free GPUs;
* a pod that requests nothing scores 100.

The vectorized form evaluates every (node, GPU) candidate of many rows at once with
:class:`.frag.CompiledTypical`; scores are exact integers, equal to the per-node form.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.frag import CompiledTypical, TypicalPods, node_frag_int
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.selection import choose_gpus, sub_gpus, sub_gpus_rows
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["FGD"]


class FGD(GpuPolicy):
    name = "FGD"

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._compiled: CompiledTypical | None = None

    def cache_key(self) -> Hashable:
        return (self.name, self.typical)

    def compiled(self, max_gpus: int) -> CompiledTypical:
        c = self._compiled
        if c is None or c.max_gpus < max_gpus:
            c = self._compiled = CompiledTypical(self.typical, max(max_gpus, 8))
        return c

    @staticmethod
    def _empty(shape: PodShape) -> bool:
        return shape.cpu == 0 and shape.mem == 0 and not shape.needs_gpu

    # ---- per node (the reference) ----------------------------------------------------

    def node_scores(self, view: NodeView, shape: PodShape) -> tuple[int, int]:
        """(score, best GPU index or -1) on one node."""
        c = self.compiled(len(view.free))
        before = node_frag_int(view, self.typical)
        cpu_after = view.cpu_left - shape.cpu
        if shape.is_sharing:
            best, best_i = -1, -1
            for i, f in enumerate(view.free):
                if f < shape.milli:
                    continue
                after = list(view.free)
                after[i] -= shape.milli
                s = c.sigmoid_score(before - node_frag_int(view, self.typical, cpu_after, after))
                if s > best:
                    best, best_i = s, i
            return max(best, 0), best_i
        used = sub_gpus(view.free, shape.milli, shape.count) or []
        after = list(view.free)
        for i in used:
            after[i] -= shape.milli
        return c.sigmoid_score(before - node_frag_int(view, self.typical, cpu_after, after)), -1

    def score_node(self, view: NodeView, shape: PodShape) -> int:
        if self._empty(shape):
            return 100
        return self.node_scores(view, shape)[0]

    def choose(self, view: NodeView, shape: PodShape, rng: np.random.Generator | None = None) -> tuple[int, ...] | None:
        if shape.is_sharing:
            i = self.node_scores(view, shape)[1]
            return (i,) if i >= 0 else None
        return choose_gpus(view.free, shape)

    # ---- many rows ---------------------------------------------------------------------

    def frag_rows(self, cols: GpuColumns, rows: np.ndarray) -> np.ndarray:
        """W * F_n of each row as it is."""
        c = self.compiled(cols.max_gpus)
        return c.frag(cols.free[rows], cols.cpu_left[rows], cols.model[rows], cols.models)

    def score_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape,
                   before: np.ndarray | None = None) -> np.ndarray:
        return self.score_and_choice_rows(cols, rows, shape, before)[0]

    def score_and_choice_rows(self, cols: GpuColumns, rows: np.ndarray, shape: PodShape,
                              before: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, best GPU per row or -1); ``before``: W * F_n of the rows if known."""
        n = len(rows)
        if self._empty(shape):
            return np.full(n, 100, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        c = self.compiled(cols.max_gpus)
        if before is None:
            before = self.frag_rows(cols, rows)
        free = cols.free[rows]
        cpu_after = cols.cpu_left[rows] - shape.cpu
        model = cols.model[rows]
        if not shape.is_sharing:
            after = sub_gpus_rows(free, shape.milli, shape.count)
            fa = c.frag(after, cpu_after, model, cols.models)
            return c.sigmoid.scores(before - fa), np.full(n, -1, dtype=np.int64)
        valid = free >= shape.milli  # (R, G) candidate GPUs
        r_idx, g_idx = np.nonzero(valid)
        states = free[r_idx].copy()
        states[np.arange(len(r_idx)), g_idx] -= shape.milli
        fa = c.frag(states, cpu_after[r_idx], model[r_idx], cols.models)
        cand = np.full(valid.shape, -1, dtype=np.int64)
        cand[r_idx, g_idx] = c.sigmoid.scores(before[r_idx] - fa)
        best_g = cand.argmax(axis=1)  # the first index among equals, as the artifact's strict '>'
        best = cand[np.arange(n), best_g]
        return np.maximum(best, 0), np.where(best >= 0, best_g, -1)
