"""The kubelet's pod admission contract (``pkg/kubelet/lifecycle/interfaces.go``): before a
simulated node starts a pod bound to it, each admit handler of that node is asked in turn
whether the pod may run there beside the pods already admitted; the first refusal wins and
the pod ends ``Failed`` with the handler's reason and message (as the kubelet's
``rejectPod``).

Handlers are plain objects with an ``admit`` method; the node's resource fit check, eviction
manager, CPU/topology/device managers each provide one. ``PodAdmitHandlers`` runs them in
registration order, as upstream's ``handlers.go`` loop does.

Each simulated node builds its chain from ``ksched.kubelet.admission.ADMIT_HANDLER_FACTORIES``:
a factory takes the node's :class:`NodeHandle` (its name, a getter for its current Node object,
the clock, the kubelet) and returns that node's handler, or None when it has none to offer.

A handler may also answer without the list of the node's other pods
(``admit_without_pods(pod, other_count, other_requests)``: how many pods the node runs beside
it, and the sum of their requests, or None when not kept): the same result ``admit`` gives for
any ``other_pods`` of that length and those requests, or None when its answer needs the pods
themselves. :meth:`PodAdmitHandlers.admit_without_pods` asks each handler that way and builds
the attributes only for those that decline (``tests/kubelet/test_admit_without_pods.py`` holds
both ways to the same results). The simulated kubelet goes further for a node with the default
chain whose eviction manager, container managers and GPU-share plugin admit by construction: it
asks the predicate handler alone (``ksched.kubelet.fake.FUSED_ADMISSION``,
``tests/kubelet/test_fused_admission.py``).

Divergences: upstream passes the handlers' results through the kubelet's status manager and
event recorder; here the caller writes the pod's status and events from the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ksched.api.node import Node
from ksched.api.pod import Pod

__all__ = ["AdmitHandlerFactory", "NodeHandle", "PodAdmitAttributes", "PodAdmitHandler", "PodAdmitHandlers",
           "PodAdmitResult"]


@dataclass(frozen=True, slots=True)
class PodAdmitAttributes:
    """The pod asking to run, and the pods the node already runs (admitted, not terminated);
    ``other_requests``, when the caller keeps it, is the sum of ``other_pods``' requests
    (``pod_requests``; resources summing to 0 may be absent), which the fit check then reads
    instead of adding them up."""

    pod: Pod
    other_pods: tuple[Pod, ...] = ()
    other_requests: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class PodAdmitResult:
    """``admit`` False carries a one-word CamelCase ``reason`` (``OutOfcpu``,
    ``TopologyAffinityError``, ``Evicted``...) and a human ``message``."""

    admit: bool = True
    reason: str = ""
    message: str = ""


ADMITTED = PodAdmitResult()


@runtime_checkable
class PodAdmitHandler(Protocol):
    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult: ...


@dataclass
class PodAdmitHandlers:
    """The handlers of one node, asked in order; the first refusal is the answer."""

    handlers: list[PodAdmitHandler] = field(default_factory=list)

    def add(self, handler: PodAdmitHandler) -> None:
        self.handlers.append(handler)

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        for handler in self.handlers:
            result = handler.admit(attrs)
            if not result.admit:
                return result
        return ADMITTED

    def admit_without_pods(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None,
                           attrs: Callable[[], PodAdmitAttributes]) -> PodAdmitResult:
        """What :meth:`admit` answers for ``attrs()`` (whose ``other_pods`` are ``other_count``
        pods whose requests sum to ``other_requests``, and whose ``other_requests`` is that or
        None), asking each handler without the other pods where it can answer so; ``attrs()`` is
        built once, for the first handler that cannot."""
        built: PodAdmitAttributes | None = None
        for handler in self.handlers:
            quick = getattr(handler, "admit_without_pods", None)
            result = quick(pod, other_count, other_requests) if quick is not None else None
            if result is None:
                if built is None:
                    built = attrs()
                result = handler.admit(built)
            if not result.admit:
                return result
        return ADMITTED


@dataclass(frozen=True, slots=True)
class NodeHandle:
    """What a handler factory knows of the node it builds a handler for: ``get_node()`` is the
    node as the kubelet currently sees it (None when it is gone)."""

    name: str
    get_node: Callable[[], Node | None]
    clock: Any = None
    kubelet: Any = None


AdmitHandlerFactory = Callable[[NodeHandle], PodAdmitHandler | None]
