"""The resource managers of every simulated node, for the one agent that acts for all of them
(``ksched.kubelet.fake``): built from each node's annotations when the node is seen, rebuilt
when its layout or kubelet settings change, told of device health changes, and asked at pod
admission. Nodes that declare neither ``ksched.io/topology`` nor ``ksched.io/kubelet-config``
have no managers (everything is admitted, nothing is pinned).

A node whose annotations cannot be used refuses every pod with ``UnexpectedAdmissionError`` and
a message naming the annotation and field (upstream's kubelet would not start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.cm.admission import REASON_UNEXPECTED
from ksched.kubelet.cm.container_manager import (
    KUBELET_CONFIG_ANNOTATION,
    NodeResourceManagers,
    managers_for_node,
)
from ksched.kubelet.cm.devicemanager.plugin import UNHEALTHY_DEVICES_ANNOTATION, parse_unhealthy
from ksched.kubelet.cm.topology import TOPOLOGY_ANNOTATION, TopologyError
from ksched.kubelet.lifecycle import ADMITTED, PodAdmitAttributes, PodAdmitResult

__all__ = ["NodeManagers"]

# What ``admit`` gives a pod of a node without managers: the admission and no annotations (one
# shared empty dict: the kubelet only reads it).
_NOTHING: dict[str, str] = {}


@dataclass
class _Entry:
    key: tuple[str | None, str | None]
    managers: NodeResourceManagers | None
    error: str = ""
    admitted: dict[str, Pod] = field(default_factory=dict)


class NodeManagers:
    def __init__(self) -> None:
        self._nodes: dict[str, _Entry] = {}
        self._status_due: set[str] = set()

    def on_node(self, node: Node) -> None:
        """A node was added or changed."""
        key = (node.annotations.get(TOPOLOGY_ANNOTATION), node.annotations.get(KUBELET_CONFIG_ANNOTATION))
        entry = self._nodes.get(node.name)
        if key == (None, None):
            if entry is not None:
                del self._nodes[node.name]
            return
        if entry is None or entry.key != key:
            try:
                entry = _Entry(key, managers_for_node(node))
            except TopologyError as e:
                entry = _Entry(key, None, str(e))
            self._nodes[node.name] = entry
            self._status_due.add(node.name)
        elif entry.managers is not None and entry.managers.set_unhealthy(
                parse_unhealthy(node.annotations.get(UNHEALTHY_DEVICES_ANNOTATION))):
            self._status_due.add(node.name)
        if entry.managers is not None and not self._status_matches(node, entry.managers):
            self._status_due.add(node.name)

    def on_node_deleted(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._status_due.discard(name)

    @staticmethod
    def _status_matches(node: Node, m: NodeResourceManagers) -> bool:
        return all(node.capacity.get(r) == cap and node.allocatable.get(r) == alloc
                   for r, (cap, alloc) in m.device_capacity().items())

    def managers(self, node: str) -> NodeResourceManagers | None:
        entry = self._nodes.get(node)
        return entry.managers if entry is not None else None

    def node_status_patches(self) -> list[tuple[str, dict[str, Any]]]:
        """The device resources each changed node must report: capacity (all devices) and
        allocatable (healthy ones), as status merge patches."""
        out: list[tuple[str, dict[str, Any]]] = []
        for name in sorted(self._status_due):
            entry = self._nodes.get(name)
            if entry is None or entry.managers is None:
                continue
            cap = entry.managers.device_capacity()
            if cap:
                out.append((name, {"status": {"capacity": {r: str(c) for r, (c, _) in cap.items()},
                                              "allocatable": {r: str(a) for r, (_, a) in cap.items()}}}))
        self._status_due.clear()
        return out

    def manages(self, node_name: str) -> bool:
        """Whether the node has resource managers (or unusable annotations): without, ``admit``
        admits every pod and gives it nothing."""
        return node_name in self._nodes

    def admit(self, pod: Pod) -> tuple[PodAdmitResult, dict[str, str]]:
        """Admission on the pod's node; when admitted, the annotations recording what the pod
        was given."""
        entry = self._nodes.get(pod.node_name)
        if entry is None:
            return ADMITTED, _NOTHING  # (a node without managers: no new objects for each pod)
        if entry.managers is None:
            return PodAdmitResult(False, REASON_UNEXPECTED, entry.error), {}
        result = entry.managers.admit(PodAdmitAttributes(pod, tuple(entry.admitted.values())))
        if not result.admit:
            return result, {}
        entry.admitted[pod.uid] = pod
        return result, entry.managers.pod_annotations(pod)

    def remove_pod(self, pod: Pod) -> None:
        """The pod ended or was deleted: what it held is free."""
        entry = self._nodes.get(pod.node_name)
        if entry is not None and entry.admitted.pop(pod.uid, None) is not None and entry.managers is not None:
            entry.managers.remove_pod(pod.uid)
