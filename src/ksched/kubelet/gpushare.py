"""The node's GPU-share device plugin (Alibaba's open-gpu-share, which the openb trace and the
FGD paper's artifact assume): a pod asking for GPUs by the ``alibabacloud.com/gpu-*``
annotations runs on exactly the GPUs the scheduler recorded on it at binding
(``alibabacloud.com/gpu-index``, see ``ksched.api.gpu``), and only if those GPUs still have the
share it asks for beside the pods the node already runs.

As a kubelet admit handler (``ksched.kubelet.lifecycle``) it refuses, as the kubelet's device
manager does when Allocate fails (``pkg/kubelet/cm/devicemanager/manager.go``), with reason
``UnexpectedAdmissionError`` and the message ``Allocate failed due to <why>, which is
unexpected``: malformed annotations, indices that are not the node's, the wrong number of GPUs,
or GPUs without the share left (two schedulers raced for the same GPU, or a pod named its node
itself).

Divergences: a GPU pod without recorded GPUs (placed by a profile without the GpuShare plugin)
is admitted and holds no share on the node; open-gpu-share's plugin would pick GPUs for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ksched.api.gpu import (
    ANNOTATION_GPU_COUNT,
    ANNOTATION_GPU_INDEX,
    ANNOTATION_GPU_MILLI,
    GpuAssignment,
    GpuSpecError,
    gpu_free_on_node,
    node_gpus,
    pod_gpu_assignment,
    pod_gpu_request,
)
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.cm.admission import AllocationError, admit_result
from ksched.kubelet.lifecycle import ADMITTED, PodAdmitAttributes, PodAdmitResult

__all__ = ["GpuShareAdmitHandler", "gpu_share_admit"]


def _refuse(why: str) -> PodAdmitResult:
    return admit_result(AllocationError(why))


def _assignments(pods: Iterable[Pod]) -> list[GpuAssignment]:
    out = []
    for p in pods:
        try:
            a = pod_gpu_assignment(p)
        except GpuSpecError:
            continue  # refused when it was admitted; holds nothing
        if a is not None:
            out.append(a)
    return out


def gpu_share_admit(node: Node, pod: Pod, other_pods: Iterable[Pod]) -> PodAdmitResult:
    """Whether ``pod`` may run on ``node`` beside ``other_pods`` as far as shared GPUs go."""
    try:
        req = pod_gpu_request(pod)
        if req is None:
            return ADMITTED
        got = pod_gpu_assignment(pod)
    except GpuSpecError as e:
        return _refuse(str(e))
    if got is None:
        return ADMITTED  # not placed by a GPU-sharing profile: nothing recorded to hand out
    gpus = node_gpus(node)
    if len(got.indices) != req.count or len(set(got.indices)) != req.count:
        return _refuse(f"{ANNOTATION_GPU_INDEX}={pod.annotations[ANNOTATION_GPU_INDEX]!r} naming "
                       f"{len(set(got.indices))} distinct GPU(s) for a request of {req.count}")
    outside = [i for i in got.indices if i >= gpus.count]
    if outside:
        return _refuse(f"GPU index {outside[0]} not on node {node.name} ({gpus.count} GPUs)")
    free = gpu_free_on_node(gpus, _assignments(other_pods))
    short = [i for i in got.indices if free[i] < req.milli]
    if short:
        i = short[0]
        return _refuse(f"GPU {i} of node {node.name} has {max(free[i], 0)} milli-GPU free, {req.milli} requested")
    return ADMITTED


class GpuShareAdmitHandler:
    """The device plugin of one node, as an admit handler (``get_node``: the node as the kubelet
    sees it now; without one the predicate handler refuses the pod)."""

    def __init__(self, get_node: Callable[[], Node | None]) -> None:
        self.get_node = get_node

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        ann = attrs.pod.annotations
        if ANNOTATION_GPU_MILLI not in ann and ANNOTATION_GPU_COUNT not in ann:
            return ADMITTED  # asks for no GPU (what gpu_share_admit answers, node or not)
        node = self.get_node()
        if node is None:
            return ADMITTED
        return gpu_share_admit(node, attrs.pod, attrs.other_pods)

    def admit_without_pods(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None
                           ) -> PodAdmitResult | None:
        """:meth:`admit` for a pod that asks for no GPU; None (ask :meth:`admit`) otherwise."""
        ann = pod.annotations
        if ANNOTATION_GPU_MILLI not in ann and ANNOTATION_GPU_COUNT not in ann:
            return ADMITTED
        return None
