"""GpuShare: the GPU-sharing Filter, Reserve and Bind (artifact
``pkg/simulator/plugin/open_gpu_share.go``, the "Open-Gpu-Share" plugin, and its "Simon" binder).

* PreFilter reads the pod's GPU request (``alibabacloud.com/gpu-milli``, ``-count``,
  ``-card-model``); a pod without GPUs skips the Filter; malformed annotations make the pod
  UnschedulableAndUnresolvable with the annotation named.
* Filter: the node must have GPUs (UnschedulableAndUnresolvable), of an allowed model
  (UnschedulableAndUnresolvable), and ``count`` GPUs with ``milli`` free each (Unschedulable:
  preemption may free them). Vectorized over the snapshot's :class:`~.nodestate.GpuNodeTable`
  and row-local (keyed by the GPU request).
* Reserve picks the GPUs: the scoring policy's choice when its PreScore published one in the
  CycleState (FGD picks the GPU that fragments least), else ``gpuSelMethod`` (``best``, ``first``,
  ``worst``, ``random``). Unreserve forgets them.
* Bind binds through ``pods/binding`` with the ``alibabacloud.com/gpu-index`` annotation (the
  binding's annotations land on the pod atomically, as upstream's binding REST copies them), so
  the kubelet's device plugin hands out exactly those GPUs. Pods without GPUs are left to the
  next binder (Skip): list GpuShare before DefaultBinder.

Args: ``gpuSelMethod`` (default ``best``), ``seed`` (for ``random``, default 0).

Divergence: the artifact's Filter message is ``Node:<name>``; the reasons here say why.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ksched.api.gpu import ANNOTATION_GPU_INDEX, GpuSpecError, format_gpu_index, pod_gpu_request
from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from ksched.scheduler.framework.interface import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    RowLocal,
    VectorizedFilter,
)
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.gpushare.nodestate import (
    Reservations,
    node_view,
    pod_shape,
    reservations_of,
    table_of,
)
from ksched.scheduler.plugins.gpushare.selection import SELECTION_METHODS, choose_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["CHOOSER_KEY", "ERR_INSUFFICIENT", "ERR_MODEL", "ERR_NO_GPU", "GpuShare", "read_shape"]

ERR_NO_GPU = "node(s) had no GPU"
ERR_MODEL = "node(s) didn't match the pod's GPU model"
ERR_INSUFFICIENT = "node(s) didn't have enough free GPU share"

STATE_KEY = "GpuShare/shape"
# A scoring policy's GPU choice for the node Reserve is given: fn(NodeView, PodShape) -> indices.
CHOOSER_KEY = "GpuShare/chooser"
ASSIGNED_KEY = "GpuShare/assigned"


def read_shape(state: CycleState, pod: Pod) -> PodShape:
    s = state.get(STATE_KEY)
    return s if s is not None else pod_shape(pod)


class GpuShare(PreFilterPlugin, FilterPlugin, VectorizedFilter, RowLocal, ReservePlugin, BindPlugin,
               EnqueueExtensions):
    name = "GpuShare"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.method = str(self.args.get("gpuSelMethod", "best"))
        if self.method not in SELECTION_METHODS:
            raise ValueError(f'GpuShare: gpuSelMethod "{self.method}" is not one of {", ".join(SELECTION_METHODS)}')
        self.rng = np.random.default_rng(int(self.args.get("seed", 0)))
        self._own_reservations = Reservations()

    def _reservations(self) -> Reservations:
        return reservations_of(self.handle, self._own_reservations)

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        try:
            shape = pod_shape(pod)
        except GpuSpecError as e:
            return None, Status.unresolvable(str(e), plugin=self.name)
        state.write(STATE_KEY, shape)
        if not shape.needs_gpu:
            return None, Status.skip()
        return None, None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        shape = read_shape(state, pod)
        if not shape.needs_gpu:
            return None
        return self._verdict(node_view(node_info, self._reservations()), shape)

    def _verdict(self, view: NodeView, shape: PodShape) -> Status | None:
        if not view.free:
            return Status.unresolvable(ERR_NO_GPU, plugin=self.name)
        if not shape.allows(view.model):
            return Status.unresolvable(ERR_MODEL, plugin=self.name)
        if sum(1 for f in view.free if f >= shape.milli) < shape.count:
            return Status.unschedulable(ERR_INSUFFICIENT, plugin=self.name)
        return None

    def row_local_key(self, pod: Pod) -> Hashable:
        try:
            req = pod_gpu_request(pod)
        except GpuSpecError as e:
            return ("invalid", str(e))
        return req

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        shape = read_shape(state, pod)
        if not shape.needs_gpu:
            return np.ones(len(rows), dtype=bool)
        cols = table_of(snapshot).refresh(snapshot)
        return cols.gpu_fit(rows, shape)

    # ---- Reserve / Bind ----------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        shape = read_shape(state, pod)
        if not shape.needs_gpu:
            return None
        snap = self.handle.snapshot if self.handle is not None else None
        ni = snap.get(node_name) if snap is not None else None
        if ni is None:
            return Status.as_error(f"GpuShare: node {node_name} is not in the snapshot", self.name)
        view = node_view(ni, self._reservations())
        chooser: Callable[[NodeView, PodShape], tuple[int, ...] | None] | None = state.get(CHOOSER_KEY)
        got = chooser(view, shape) if chooser is not None else choose_gpus(view.free, shape, self.method, self.rng)
        if got is None:
            return Status.unschedulable(ERR_INSUFFICIENT, plugin=self.name)
        self._reservations().add(pod.uid, node_name, got)
        state.write(ASSIGNED_KEY, got)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._reservations().drop(pod.uid)
        state.delete(ASSIGNED_KEY)

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        got = state.get(ASSIGNED_KEY)
        if got is None:
            return Status.skip()
        try:
            if self.handle is None or self.handle.client is None:
                raise RuntimeError("GpuShare has no API client")
            self.handle.client.bind(pod, node_name, annotations={ANNOTATION_GPU_INDEX: format_gpu_index(got)})
        except Exception as e:
            return Status.as_error(e, self.name)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A deleted pod frees GPUs; a new node or one whose labels/allocatable changed may fit.
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE)),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
                                              | ActionType.UPDATE_NODE_LABEL)),
        ]
