"""NodePorts: a node fits only if none of the pod's host ports (hostIP, protocol, hostPort) is
already in use there; ``0.0.0.0`` (or an empty hostIP) conflicts with every IP.

Upstream: pkg/scheduler/framework/plugins/nodeports (1.36). The pod's host ports are those of
its containers and of its restartable (sidecar) init containers. PreFilter skips the plugin for
pods without host ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ksched.api.pod import ContainerPort, Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterPlugin,
    PreFilterResult,
    RowLocal,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
)
from ksched.scheduler.framework.signers import HOST_PORTS_SIGNER_NAME, host_ports_signer
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import HostPortInfo, NodeInfo

__all__ = ["ERR_REASON", "NodePorts", "fits", "fits_ports"]

NAME = "NodePorts"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


class _PreFilterState(StateData):
    __slots__ = ("ports",)

    def __init__(self, ports: tuple[tuple[str, str, int], ...]) -> None:
        self.ports = ports


def _port_tuples(ports: Sequence[ContainerPort]) -> tuple[tuple[str, str, int], ...]:
    return tuple((p.host_ip, p.protocol, p.host_port) for p in ports)


def _wanted_ports(pod: Pod) -> tuple[tuple[str, str, int], ...]:
    """The pod's (hostIP, protocol, hostPort) wanted, worked out once per template."""
    c = template_cache(pod)
    want = c.get("nodeports.want")
    if want is None:
        want = c["nodeports.want"] = _port_tuples(pod.host_ports())
    return want  # type: ignore[no-any-return]


def fits_ports(want: Sequence[tuple[str, str, int]], in_use: HostPortInfo) -> bool:
    """No wanted (hostIP, protocol, port) conflicts with the ports in use."""
    if not in_use.ports:
        return True
    for ip, proto, port in want:
        if in_use.check_conflict(ip, proto, port):
            return False
    return True


def fits(pod: Pod, node_info: NodeInfo) -> bool:
    """Whether the pod's host ports are free on the node (upstream's exported Fits)."""
    return fits_ports(_port_tuples(pod.host_ports()), node_info.used_ports)


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions, RowLocal, VectorizedFilter, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._status = Status(Code.UNSCHEDULABLE, ERR_REASON, plugin=self.name)

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The verdict depends on the pod's host ports (as upstream; ksched keys each port
        with its protocol and host IP, which Filter compares too)."""
        return [SignFragment(HOST_PORTS_SIGNER_NAME, host_ports_signer(pod))], None

    def pre_filter_skips(self, pod: Pod) -> bool:
        """PreFilter skips a pod without host ports (a function of its spec alone; the runtime's
        ``TEMPLATE_SKIPS``)."""
        return not _wanted_ports(pod)

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        want = _wanted_ports(pod)
        if not want:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(want))
        return None, None

    def _wanted(self, state: CycleState) -> _PreFilterState | Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name)
        return s

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s = self._wanted(state)
        if isinstance(s, Status):
            return s
        if fits_ports(s.ports, node_info.used_ports):
            return None
        return self._status

    def row_local_key(self, pod: Pod) -> Any:
        """The verdict on a node depends only on its used ports and the pod's host ports."""
        return _wanted_ports(pod)

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = self._wanted(state)
        want = s.ports if isinstance(s, _PreFilterState) else _port_tuples(pod.host_ports())
        out = np.ones(len(rows), dtype=bool)
        infos = snapshot.infos
        # Only nodes with ports in use can conflict; they are few.
        for i, r in enumerate(rows.tolist()):
            used = infos[r].used_ports  # type: ignore[union-attr]
            if used.ports and not fits_ports(want, used):
                out[i] = False
        return out

    # ---------------------------------------------------------------- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Container ports are immutable, so only deletions of pods can free ports.
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE),
                                 self.is_schedulable_after_pod_deleted),
            # A new node: always worth a retry (no hint, the same as Queue).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ]

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the deleted pod was on (or nominated to) a node and used one of the
        pod's host ports."""
        if not isinstance(old, Pod):
            raise TypeError(f"expected a Pod, got {type(old).__name__}")
        if not old.node_name and not old.nominated_node_name:
            return QueueingHint.QUEUE_SKIP
        ports = old.host_ports()
        if not ports:
            return QueueingHint.QUEUE_SKIP
        in_use = HostPortInfo()
        for p in ports:
            in_use.add(p.host_ip, p.protocol, p.host_port)
        if fits_ports(_port_tuples(pod.host_ports()), in_use):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
