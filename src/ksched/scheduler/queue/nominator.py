"""The nominator: which pods are nominated to which node (after preemption, or from
``status.nominatedNodeName``). Filters count nominated pods of equal or higher priority."""

from __future__ import annotations

from ksched.api.pod import Pod
from ksched.scheduler.framework.types import PodInfo

__all__ = ["Nominator"]


class Nominator:
    def __init__(self) -> None:
        self.by_node: dict[str, list[PodInfo]] = {}
        self.node_of: dict[str, str] = {}  # pod uid -> node

    @staticmethod
    def _uid(pod: Pod) -> str:
        return pod.uid or pod.key

    def add(self, pi: PodInfo, node_name: str = "") -> None:
        """Nominate ``pi`` to ``node_name`` (or to its status.nominatedNodeName when empty)."""
        pod = pi.pod
        uid = self._uid(pod)
        self.delete(pod)
        nn = node_name or pod.nominated_node_name
        if not nn or pod.node_name:
            return
        self.node_of[uid] = nn
        self.by_node.setdefault(nn, []).append(pi)

    def delete(self, pod: Pod) -> None:
        uid = self._uid(pod)
        nn = self.node_of.pop(uid, None)
        if nn is None:
            return
        lst = self.by_node.get(nn, [])
        for i, pi in enumerate(lst):
            if self._uid(pi.pod) == uid:
                lst.pop(i)
                break
        if not lst:
            self.by_node.pop(nn, None)

    def update(self, old: Pod, new_pi: PodInfo) -> None:
        """Follow the pod object; an in-memory nomination (made before the status patch lands)
        survives only updates where neither object carries a nominatedNodeName (upstream's
        UpdateNominatedPod)."""
        nn = new_pi.pod.nominated_node_name
        if not old.nominated_node_name and not nn:
            nn = self.node_of.get(self._uid(old), "")
        self.delete(old)
        if nn and not new_pi.pod.node_name:
            self.add(new_pi, nn)

    def node_names(self) -> list[str]:
        """Nodes with nominated pods."""
        return list(self.by_node)

    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.by_node.get(node_name, ()))

    def nominated_node(self, pod: Pod) -> str:
        return self.node_of.get(self._uid(pod), "")

    def __len__(self) -> int:
        return len(self.node_of)
