"""Typical pods and GPU fragmentation, as the FGD paper defines them (artifact
``pkg/utils/frag.go``: ``GetTypicalPods``, ``GetNodePodFrag``, ``NodeGpuShareFragAmount``).

Typical pods: the workload's pods grouped by (MilliCpu, MilliGpu, GpuNumber, GpuType), groups
sorted by popularity (ties: the larger key first), kept until they cover ``threshold`` % of
the pods, frequencies renormalized over the kept groups.

Fragmentation of a node against one typical pod m (``idle`` = free milli over its GPUs):

* m fits (its model is allowed, ``count`` GPUs have ``milli`` free each, the CPU fits): the free
  milli on the GPUs each too small for m;
* otherwise (m lacks GPU or CPU, m's model is not allowed, m is CPU-only): all of ``idle``.

Node fragmentation F_n = sum_m p_m frag_m(n); cluster fragmentation is the sum over nodes, and
the fragmentation rate that sum over the cluster's idle milli.

Exactness: frequencies are kept as integer weights w_m (pod counts, p_m = w_m / W), so
``W * F_n`` is an exact integer (:func:`node_frag_int`); the vectorized form
(:class:`CompiledTypical`) computes the same integers. The FGD score
``int(sigmoid((F_before - F_after) / 1000) * 100)`` is then a function of an integer difference,
tabulated once per W (:class:`SigmoidTable`) so that the vectorized score equals the per-node
formula exactly.

Divergences: ``gpuResWeight`` (weights for whole-GPU pods; 0 in the paper's experiments) is not
supported; CPU-only pods are always included (the experiments' ``isInvolvedCpuPods=true``).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = [
    "CompiledTypical",
    "SigmoidTable",
    "TypicalPods",
    "fgd_score_of_delta",
    "node_frag_int",
    "typical_pods",
]


@dataclass(frozen=True, slots=True)
class TypicalPods:
    """Kept pod shapes with integer weights (p_m = weights[m] / total)."""

    shapes: tuple[PodShape, ...]
    weights: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.weights)

    def frequencies(self) -> list[float]:
        w = self.total
        return [x / w for x in self.weights]

    def to_dicts(self) -> list[dict[str, object]]:
        return [{"cpu": s.cpu, "milli": s.milli, "count": s.count,
                 "models": "|".join(sorted(s.models)) if s.models else "", "weight": w}
                for s, w in zip(self.shapes, self.weights)]


def typical_pods(shapes: Iterable[PodShape], threshold: float = 95.0, step: int = 1) -> TypicalPods:
    """The artifact's GetTypicalPods with ``podPopularityThreshold=threshold`` and
    ``podIncreaseStep=step`` (the paper's experiments: 95 and 1)."""
    counts: Counter[tuple[int, int, int, str]] = Counter()
    rep: dict[tuple[int, int, int, str], PodShape] = {}
    for s in shapes:
        k = s.typical_key
        counts[k] += 1
        if k not in rep:
            models = frozenset(k[3].split("|")) if k[3] else None
            rep[k] = PodShape(s.cpu, s.milli, s.count, models)
    total = sum(counts.values())
    if total == 0:
        return TypicalPods((), ())
    groups = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    kept: list[tuple[tuple[int, int, int, str], int]] = []
    covered = 0
    i = 0
    step = max(1, int(step))
    while covered * 100 < threshold * total and i < len(groups):
        for kv in groups[i:i + step]:
            kept.append(kv)
            covered += kv[1]
        i += step
    return TypicalPods(tuple(rep[k] for k, _ in kept), tuple(c for _, c in kept))


def node_frag_int(view: NodeView, typ: TypicalPods, cpu_left: int | None = None,
                  free: Sequence[int] | None = None) -> int:
    """W * F_n for one node (the per-node reference): ``sum_m w_m * frag_m(n)``. ``cpu_left``
    and ``free`` override the view's (a hypothetical state after placing a pod)."""
    cpu = view.cpu_left if cpu_left is None else cpu_left
    fr = view.free if free is None else free
    idle = sum(fr)
    model = view.model
    total = 0
    for m, w in zip(typ.shapes, typ.weights):
        if not m.needs_gpu or not m.allows(model):
            frag = idle
        else:
            k = 0
            small = 0
            for f in fr:
                if f >= m.milli:
                    k += 1
                else:
                    small += f
            frag = small if (k >= m.count and cpu >= m.cpu) else idle
        total += w * frag
    return total


def fgd_score_of_delta(delta: int, weight_total: int) -> int:
    """The artifact's FGD score for a fragmentation decrease of ``delta / weight_total`` milli:
    ``int(sigmoid(delta / W / 1000) * 100)``."""
    x = delta / weight_total / 1000
    return int(1.0 / (1.0 + math.exp(-x)) * 100)


class SigmoidTable:
    """``fgd_score_of_delta`` for integer deltas as thresholds: score(d) = number of k in
    1..100 whose smallest d_k with score >= k is <= d. Exact, since the formula is monotone."""

    def __init__(self, weight_total: int, max_abs_delta: int) -> None:
        self.weight_total = weight_total
        lo, hi = -max_abs_delta - 1, max_abs_delta + 1
        thr = []
        for k in range(1, 101):
            if fgd_score_of_delta(hi, weight_total) < k:
                thr.append(hi + 1)
                continue
            a, b = lo, hi  # invariant: score(b) >= k
            while a < b:
                mid = (a + b) // 2
                if fgd_score_of_delta(mid, weight_total) >= k:
                    b = mid
                else:
                    a = mid + 1
            thr.append(a)
        self.thresholds = np.asarray(thr, dtype=np.int64)
        self._thr_list = thr

    def scores(self, delta: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.thresholds, delta, side="right").astype(np.int64)

    def score(self, delta: int) -> int:
        return bisect.bisect_right(self._thr_list, delta)


class CompiledTypical:
    """Typical pods as arrays for the vectorized fragmentation of many node states at once."""

    def __init__(self, typ: TypicalPods, max_gpus: int = 8) -> None:
        self.typ = typ
        self.weight_total = max(typ.total, 1)
        gpu = [i for i, s in enumerate(typ.shapes) if s.needs_gpu]
        self.gpu_shapes = [typ.shapes[i] for i in gpu]
        self.thresholds = np.asarray(sorted({s.milli for s in self.gpu_shapes}), dtype=np.int64)
        tpos = {int(t): i for i, t in enumerate(self.thresholds.tolist())}
        self.tidx = np.asarray([tpos[s.milli] for s in self.gpu_shapes], dtype=np.int64)
        self.cnt = np.asarray([s.count for s in self.gpu_shapes], dtype=np.int64)
        self.cpu = np.asarray([s.cpu for s in self.gpu_shapes], dtype=np.int64)
        self.w = np.asarray([typ.weights[i] for i in gpu], dtype=np.int64)
        self._model_ok: tuple[int, np.ndarray] | None = None
        self.sigmoid = SigmoidTable(self.weight_total, self.weight_total * 1000 * max(max_gpus, 1))
        self.max_gpus = max_gpus

    def sigmoid_score(self, delta: int) -> int:
        """The FGD score of one integer fragmentation decrease (exactly the formula)."""
        return fgd_score_of_delta(delta, self.weight_total)

    def model_ok(self, models: list[str]) -> np.ndarray:
        """bool[model id, gpu typical pod]: may that typical pod use a node of that model."""
        hit = self._model_ok
        if hit is not None and hit[0] == len(models):
            return hit[1]
        arr = np.zeros((len(models), len(self.gpu_shapes)), dtype=bool)
        for j, s in enumerate(self.gpu_shapes):
            for i, m in enumerate(models):
                arr[i, j] = s.allows(m)
        self._model_ok = (len(models), arr)
        return arr

    def frag(self, free: np.ndarray, cpu_left: np.ndarray, model: np.ndarray, models: list[str]) -> np.ndarray:
        """W * F for each state: ``free[s, gpu]``, ``cpu_left[s]``, ``model[s]`` (ids into
        ``models``). Equal to :func:`node_frag_int` on each state."""
        idle = free.sum(axis=1)
        out = idle * self.weight_total
        if not len(self.gpu_shapes) or not len(free):
            return out
        ge = free[:, None, :] >= self.thresholds[None, :, None]  # (S, T, G)
        k = ge.sum(axis=2)
        usable = (free[:, None, :] * ge).sum(axis=2)  # free milli on GPUs that fit each threshold
        fit = (k[:, self.tidx] >= self.cnt) & (cpu_left[:, None] >= self.cpu) & self.model_ok(models)[model]
        return out - (fit * usable[:, self.tidx]) @ self.w
