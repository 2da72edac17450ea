"""The columnar GPU state of many nodes, which the vectorized forms of the GPU policies read:
one row per node, NumPy arrays for free milli-GPU per GPU index, GPU count, model, milli-CPU
and memory left, and the GPU-pod tags resident (for GpuClustering).

The scheduler keeps one per snapshot (:mod:`.table`, refreshed from NodeInfos as they change);
``ksched replay`` keeps one as its whole cluster state (``ksched.sim.replay``). A GPU index a
node does not have holds 0 free milli, so it never fits a GPU request and adds nothing to sums.
"""

from __future__ import annotations

import numpy as np

from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["GpuColumns"]


class GpuColumns:
    """``free[row, gpu]``, ``count[row]``, ``model[row]`` (an id into ``models``; 0 is '', no
    GPU), ``cpu_left[row]``, ``mem_left[row]``, ``tags[row, t]`` (t = 0 for share-gpu pods, n for
    n-gpu pods)."""

    def __init__(self, rows: int = 0, max_gpus: int = 8) -> None:
        self.max_gpus = max_gpus
        self.models: list[str] = [""]
        self.model_index: dict[str, int] = {"": 0}
        self.free = np.zeros((rows, max_gpus), dtype=np.int64)
        self.count = np.zeros(rows, dtype=np.int64)
        self.model = np.zeros(rows, dtype=np.int64)
        self.cpu_left = np.zeros(rows, dtype=np.int64)
        self.mem_left = np.zeros(rows, dtype=np.int64)
        self.tags = np.zeros((rows, max_gpus + 1), dtype=np.int64)
        self._model_ok: dict[frozenset[str] | None, tuple[int, np.ndarray]] = {}

    @property
    def rows(self) -> int:
        return len(self.count)

    def model_id(self, name: str) -> int:
        i = self.model_index.get(name)
        if i is None:
            i = self.model_index[name] = len(self.models)
            self.models.append(name)
        return i

    def grow(self, rows: int, max_gpus: int) -> None:
        """Room for ``rows`` rows of up to ``max_gpus`` GPUs (existing rows kept)."""
        n, g = self.free.shape
        if rows <= n and max_gpus <= g:
            return
        rows = max(rows, n)
        if rows > n:
            rows = max(rows, 2 * n, 64)
        g2 = max(g, max_gpus)

        def grown(a: np.ndarray, width: int | None = None) -> np.ndarray:
            shape = (rows,) if width is None else (rows, width)
            out = np.zeros(shape, dtype=np.int64)
            if width is None:
                out[: len(a)] = a
            else:
                out[: a.shape[0], : a.shape[1]] = a
            return out

        self.free = grown(self.free, g2)
        self.tags = grown(self.tags, g2 + 1)
        self.count = grown(self.count)
        self.model = grown(self.model)
        self.cpu_left = grown(self.cpu_left)
        self.mem_left = grown(self.mem_left)
        self.max_gpus = g2

    def tag_index(self, tag: str) -> int:
        """Column of a GPU-pod tag ('share-gpu' or '<n>-gpu')."""
        return 0 if tag == "share-gpu" else int(tag.split("-", 1)[0])

    def set_row(self, row: int, view: NodeView) -> None:
        self.grow(row + 1, max(len(view.free), max((self.tag_index(t) for t in view.tags), default=0)))
        g = len(view.free)
        self.free[row] = 0
        self.free[row, :g] = view.free
        self.count[row] = g
        self.model[row] = self.model_id(view.model)
        self.cpu_left[row] = view.cpu_left
        self.mem_left[row] = view.mem_left
        self.tags[row] = 0
        for t, n in view.tags.items():
            self.tags[row, self.tag_index(t)] += n

    def clear_row(self, row: int) -> None:
        if row < self.rows:
            self.free[row] = 0
            self.count[row] = 0
            self.model[row] = 0
            self.cpu_left[row] = 0
            self.mem_left[row] = 0
            self.tags[row] = 0

    def view(self, row: int) -> NodeView:
        g = int(self.count[row])
        tags = {("share-gpu" if t == 0 else f"{t}-gpu"): int(n) for t, n in enumerate(self.tags[row].tolist()) if n}
        return NodeView(int(self.cpu_left[row]), self.free[row, :g].tolist(), self.models[int(self.model[row])],
                        int(self.mem_left[row]), tags)

    def model_ok(self, models: frozenset[str] | None) -> np.ndarray:
        """bool per model id: may a pod restricted to ``models`` use it (the artifact's
        IsNodeAccessibleToPodByType)."""
        hit = self._model_ok.get(models)
        if hit is not None and hit[0] == len(self.models):
            return hit[1]
        if not models:
            arr = np.ones(len(self.models), dtype=bool)
        else:
            arr = np.asarray([bool(m) and m in models for m in self.models], dtype=bool)
        self._model_ok[models] = (len(self.models), arr)
        return arr

    def gpu_fit(self, rows: np.ndarray, shape: PodShape) -> np.ndarray:
        """bool per row: the artifact's Open-Gpu-Share filter (a node with GPUs of an allowed
        model and ``count`` GPUs with at least ``milli`` free each). True for pods without GPUs."""
        if not shape.needs_gpu:
            return np.ones(len(rows), dtype=bool)
        ok = self.model_ok(shape.models)[self.model[rows]] & (self.count[rows] > 0)
        k = (self.free[rows] >= shape.milli).sum(axis=1)
        return ok & (k >= shape.count)
