"""The node's GPU-share device plugin (Alibaba's open-gpu-share, which the openb trace and the
FGD paper's artifact assume): a pod asking for GPUs by the ``alibabacloud.com/gpu-*``
annotations runs on exactly the GPUs the scheduler recorded on it at binding
(``alibabacloud.com/gpu-index``, see ``ksched.api.gpu``), and only if those GPUs still have the
share it asks for beside the pods the node already runs.

As a kubelet admit handler (``ksched.kubelet.lifecycle``) it refuses, as the kubelet's device
manager does when Allocate fails (``pkg/kubelet/cm/devicemanager/manager.go``), with reason
``UnexpectedAdmissionError`` and the message ``Allocate failed due to <why>, which is
unexpected``: a pod with no recorded GPUs (bound by something that does not know the
annotations), malformed annotations, indices that are not the node's, the wrong number of
GPUs, or GPUs without the share left (two schedulers raced for the same GPU).

Divergences: open-gpu-share's plugin picks a GPU itself when the annotation is missing; here
that is an admission failure, because ksched's scheduler always records one and a pod without
it was placed by something that did not account for shared GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable

from ksched.api.gpu import (
    ANNOTATION_GPU_INDEX,
    GpuAssignment,
    GpuSpecError,
    gpu_free_on_node,
    node_gpus,
    pod_gpu_assignment,
    pod_gpu_request,
)
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.cm.admission import REASON_UNEXPECTED, AllocationError, admit_result
from ksched.kubelet.lifecycle import ADMITTED, PodAdmitAttributes, PodAdmitResult

__all__ = ["UNEXPECTED_ADMISSION_ERROR", "GpuShareAdmitHandler", "gpu_share_admit"]

UNEXPECTED_ADMISSION_ERROR = REASON_UNEXPECTED


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
        return _refuse(f"no {ANNOTATION_GPU_INDEX} annotation on a pod asking for {req.count} GPU(s)")
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
    """The device plugin of one node, as an admit handler."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        return gpu_share_admit(self.node, attrs.pod, attrs.other_pods)
