"""Which GPUs of a node a pod gets (artifact ``pkg/simulator/plugin/open_gpu_share.go`` and
``pkg/type/resource.go``):

* whole-GPU pods: the lowest-index fully free GPUs (``AllocateExclusiveGpuId``);
* GPU-sharing pods, by ``gpuSelMethod``: ``best`` (least free milli that still fits, lowest
  index on ties), ``worst`` (most free milli, lowest index on ties), ``random`` (uniform over the
  GPUs that fit), ``first`` (the lowest index that fits: ours, the order in which DRA's allocator
  takes a shared GPU of a ResourceSlice), or the scoring policy's own choice (FGD);
* :func:`sub_gpus`, the GPUs ``NodeResource.Sub`` takes when a policy evaluates the node after
  placing a pod: GPUs sorted by free milli ascending (stable), the first ``count`` that fit.

Divergence: ``random`` draws one index uniformly from a NumPy generator where the artifact
reservoir-samples with Go's global source; the distribution is the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ksched.api.gpu import MILLI
from ksched.scheduler.plugins.gpushare.shape import PodShape

__all__ = ["SELECTION_METHODS", "choose_gpus", "sub_gpus", "sub_gpus_rows"]

SELECTION_METHODS = ("best", "worst", "random", "first")


def sub_gpus(free: Sequence[int], milli: int, count: int) -> list[int] | None:
    """Indices ``NodeResource.Sub`` would take (None when the pod does not fit)."""
    if count <= 0 or milli <= 0:
        return []
    order = sorted((f, i) for i, f in enumerate(free) if f >= milli)
    if len(order) < count:
        return None
    return [i for _, i in order[:count]]


def sub_gpus_rows(free: np.ndarray, milli: int, count: int) -> np.ndarray:
    """The state after :func:`sub_gpus` on every row of ``free`` (rows where the pod does not fit
    are left as they are, as the artifact ignores Sub's error)."""
    out = free.copy()
    if count <= 0 or milli <= 0 or not len(free):
        return out
    big = np.iinfo(np.int64).max
    key = np.where(free >= milli, free, big)
    order = np.argsort(key, axis=1, kind="stable")[:, :count]
    ok = (np.take_along_axis(key, order, axis=1) != big).all(axis=1)
    r = np.flatnonzero(ok)
    out[r[:, None], order[r]] -= milli
    return out


def choose_gpus(free: Sequence[int], shape: PodShape, method: str = "best",
                rng: np.random.Generator | None = None) -> tuple[int, ...] | None:
    """The GPU indices a pod gets on a node with ``free`` milli per GPU (None: it does not fit;
    () for a pod without GPUs)."""
    if not shape.needs_gpu:
        return ()
    milli = shape.milli
    if not shape.is_sharing:
        full = [i for i, f in enumerate(free) if f >= MILLI and f >= milli]
        if len(full) < shape.count:
            return None
        return tuple(full[: shape.count])
    fits = [i for i, f in enumerate(free) if f >= milli]
    if not fits:
        return None
    if method == "best":
        return (min(fits, key=lambda i: (free[i], i)),)
    if method == "worst":
        return (min(fits, key=lambda i: (-free[i], i)),)
    if method == "first":
        return (fits[0],)
    if method == "random":
        if rng is None:
            raise ValueError("random GPU selection needs a random generator")
        return (fits[int(rng.integers(len(fits)))],)
    raise ValueError(f'unknown GPU selection method "{method}" (one of {", ".join(SELECTION_METHODS)})')
