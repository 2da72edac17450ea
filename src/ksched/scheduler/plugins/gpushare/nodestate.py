"""The GPU state of a node as the scheduler knows it, kept current from the cache's NodeInfos.

A bound pod's GPUs are those recorded on it (``alibabacloud.com/gpu-index``); an assumed pod's
are those GpuShare reserved for it (:class:`Reservations`, the artifact's Reserve writing the
annotation, kept on the side since cached pod objects are immutable). A pod asking for GPUs with
neither (bound by another scheduler that records nothing) is given GPUs as the artifact would
(best fit for a fraction, lowest free indices for whole GPUs), in the node's pod order.

:class:`GpuNodeTable` is the same for every node of a snapshot, as :class:`~.columns.GpuColumns`
rows for the vectorized forms; it refreshes only the rows whose NodeInfo changed. One table
(and one set of reservations) per snapshot, shared by the plugins of every profile.
"""

from __future__ import annotations

import weakref
from typing import Any

from ksched.api.gpu import (
    CPU_RESOURCE,
    GpuSpecError,
    gpu_free_on_node,
    node_gpus,
    pod_gpu_assignment,
    pod_gpu_request,
)
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.selection import choose_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape, shape_of

__all__ = ["GpuNodeTable", "Reservations", "node_view", "pod_shape", "reservations_of", "table_of"]


class Reservations:
    """Pod UID -> (node name, GPU indices) for pods GpuShare reserved GPUs for."""

    MAX = 1 << 16

    def __init__(self) -> None:
        self.by_uid: dict[str, tuple[str, tuple[int, ...]]] = {}

    def add(self, uid: str, node: str, gpus: tuple[int, ...]) -> None:
        if len(self.by_uid) >= self.MAX:
            # Oldest first: pods confirmed long ago carry their annotation by now.
            for k in list(self.by_uid)[: self.MAX // 4]:
                del self.by_uid[k]
        self.by_uid[uid] = (node, gpus)

    def get(self, uid: str, node: str) -> tuple[int, ...] | None:
        r = self.by_uid.get(uid)
        return r[1] if r is not None and r[0] == node else None

    def drop(self, uid: str) -> None:
        self.by_uid.pop(uid, None)


def pod_shape(pod: Any, requests: dict[str, int] | None = None, non_zero_cpu: int | None = None) -> PodShape:
    """A pod's shape: non-zero milli-CPU for scoring, real CPU and memory requests for fit.
    Raises GpuSpecError for malformed GPU annotations."""
    from ksched.api.resources import pod_non_zero_requests, pod_requests

    req = requests if requests is not None else pod_requests(pod)
    cpu_nz = non_zero_cpu if non_zero_cpu is not None else pod_non_zero_requests(pod)[0]
    return shape_of(cpu_nz, pod_gpu_request(pod), req.get("memory", 0), req.get(CPU_RESOURCE, 0))


def node_view(ni: NodeInfo, reservations: Reservations | None = None) -> NodeView:
    """The node's GPUs, CPU and memory left, and resident GPU-pod tags."""
    gpus = node_gpus(ni.node)
    alloc = ni.allocatable
    req = ni.requested
    view = NodeView(alloc.get(CPU_RESOURCE, 0) - req.get(CPU_RESOURCE, 0), [],
                    gpus.model, alloc.get("memory", 0) - req.get("memory", 0))
    free = gpu_free_on_node(gpus, ())
    unknown: list[tuple[PodShape, Any]] = []
    for pi in ni.pods:
        pod = pi.pod
        try:
            greq = pod_gpu_request(pod)
        except GpuSpecError:
            continue
        if greq is None:
            continue
        tag = "share-gpu" if greq.is_sharing else f"{greq.count}-gpu"
        view.tags[tag] = view.tags.get(tag, 0) + 1
        idx: tuple[int, ...] | None = None
        try:
            a = pod_gpu_assignment(pod)
        except GpuSpecError:
            a = None
        if a is not None:
            idx = a.indices
        elif reservations is not None:
            idx = reservations.get(pod.uid, ni.name)
        if idx is None:
            unknown.append((shape_of(0, greq), pod))
            continue
        for i in idx:
            if 0 <= i < len(free):
                free[i] -= greq.milli
    for shape, _ in unknown:
        got = choose_gpus(free, shape, "best")
        for i in got or ():
            free[i] -= shape.milli
    view.free = free
    return view


class GpuNodeTable:
    """:class:`GpuColumns` over a snapshot's rows, refreshed from changed NodeInfos."""

    def __init__(self) -> None:
        self.cols = GpuColumns(0, 8)
        self.reservations = Reservations()
        self.generation = -1
        self.snapshot_ref: Any = None

    def refresh(self, snapshot: Any) -> GpuColumns:
        """Bring the rows up to the snapshot's generation."""
        if self.generation == snapshot.generation and self.cols.rows >= len(snapshot.infos):
            return self.cols
        rows = snapshot.changed_rows_since(self.generation) if self.generation >= 0 else range(len(snapshot.infos))
        self.cols.grow(len(snapshot.infos), self.cols.max_gpus)
        infos = snapshot.infos
        for r in (rows.tolist() if hasattr(rows, "tolist") else rows):
            ni = infos[r] if r < len(infos) else None
            if ni is None or ni.node is None:
                self.cols.clear_row(r)
            else:
                self.cols.set_row(r, node_view(ni, self.reservations))
        self.generation = snapshot.generation
        return self.cols


_TABLES: weakref.WeakKeyDictionary[Any, GpuNodeTable] = weakref.WeakKeyDictionary()


def table_of(snapshot: Any) -> GpuNodeTable:
    """The table (and reservations) of a snapshot, created on first use."""
    t = _TABLES.get(snapshot)
    if t is None:
        t = _TABLES[snapshot] = GpuNodeTable()
    return t


def reservations_of(handle: Any, fallback: Reservations) -> Reservations:
    """The reservations shared by the plugins working on ``handle``'s snapshot (``fallback``
    when there is no snapshot yet)."""
    try:
        snap = handle.snapshot if handle is not None else None
    except (AssertionError, AttributeError):
        snap = None
    return table_of(snap).reservations if snap is not None else fallback
