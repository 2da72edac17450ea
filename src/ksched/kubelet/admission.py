"""Which admit handlers each simulated node asks, in upstream's order (``pkg/kubelet/kubelet.go``
NewMainKubelet): the eviction manager (a node under pressure refuses some pods), then the
container manager's (CPU, topology, device managers), the GPU-share device plugin of the
``alibabacloud.com/gpu-*`` annotations (``ksched.kubelet.gpushare``), then the predicate handler
(the node's own fit check). A factory returns a node's handler, or None to add nothing; the kubelet builds
each node's chain once, when it first admits a pod there.

Divergences: the sysctl, AppArmor, pod-features and node-shutdown handlers are not simulated.
"""

from __future__ import annotations

from collections.abc import Mapping

from ksched.api.pod import Pod
from ksched.kubelet.gpushare import GpuShareAdmitHandler
from ksched.kubelet.lifecycle import (
    AdmitHandlerFactory,
    NodeHandle,
    PodAdmitAttributes,
    PodAdmitHandler,
    PodAdmitHandlers,
    PodAdmitResult,
)
from ksched.kubelet.predicate import PredicateAdmitHandler

__all__ = ["ADMIT_HANDLER_FACTORIES", "ContainerManagerHandler", "build_admit_handlers"]


def eviction_admit_handler(node: NodeHandle) -> PodAdmitHandler | None:
    """The node's eviction manager (a node under pressure refuses some pods)."""
    pressure = getattr(node.kubelet, "pressure", None)
    return pressure.manager(node.name) if pressure is not None else None


class ContainerManagerHandler:
    def __init__(self, kubelet: object) -> None:
        self.kubelet = kubelet

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        return self.kubelet.container_manager_admit(attrs)  # type: ignore[attr-defined, no-any-return]

    def admit_without_pods(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None
                           ) -> PodAdmitResult:
        """:meth:`admit`: the managers read only the pod (they keep the node's pods themselves)."""
        by_pod = getattr(self.kubelet, "container_manager_admit_pod", None)
        if by_pod is not None:
            return by_pod(pod)  # type: ignore[no-any-return]
        return self.kubelet.container_manager_admit(PodAdmitAttributes(pod))  # type: ignore[attr-defined, no-any-return]


def container_manager_admit_handler(node: NodeHandle) -> PodAdmitHandler | None:
    """The CPU, topology and device managers of the node (``ksched.kubelet.cm``, kept by the kubelet)."""
    if not hasattr(node.kubelet, "container_manager_admit"):
        return None
    return ContainerManagerHandler(node.kubelet)


def gpu_share_admit_handler(node: NodeHandle) -> PodAdmitHandler:
    """The GPU-share device plugin: a pod runs on the GPUs recorded on it at binding."""
    return GpuShareAdmitHandler(node.get_node)


def predicate_admit_handler(node: NodeHandle) -> PodAdmitHandler:
    return PredicateAdmitHandler(node.get_node)


ADMIT_HANDLER_FACTORIES: list[AdmitHandlerFactory] = [
    eviction_admit_handler,
    container_manager_admit_handler,
    gpu_share_admit_handler,
    predicate_admit_handler,
]


def build_admit_handlers(node: NodeHandle, factories: list[AdmitHandlerFactory] | None = None) -> PodAdmitHandlers:
    chain = PodAdmitHandlers()
    for factory in ADMIT_HANDLER_FACTORIES if factories is None else factories:
        handler = factory(node)
        if handler is not None:
            chain.add(handler)
    return chain
