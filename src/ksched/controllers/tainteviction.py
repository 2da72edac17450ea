"""Taint-based eviction, as upstream's ``pkg/controller/tainteviction/taint_eviction.go``
('taint-eviction-controller'): a pod on a node with NoExecute taints is deleted at once if it
does not tolerate one of them, else after the smallest ``tolerationSeconds`` of the tolerations
that match (counted from when the controller first saw it tainted; no ``tolerationSeconds``:
never); the deletion is cancelled when the taints go. Before deleting, the pod gets the
``DisruptionTarget`` condition (``DeletionByTaintManager``, "Taint manager: deleting due to
NoExecute taint") and an event ``TaintManagerEviction``, "Marking for deletion Pod ns/name"
(a cancelled one: "Cancelling deletion of Pod ns/name"). The delete uses the pod's own grace
period.

DefaultTolerationSeconds admission gives every pod 300 s for ``node.kubernetes.io/not-ready``
and ``node.kubernetes.io/unreachable``.

Divergence: upstream's five retries of a failed delete are the work queue's retries here.
"""

from __future__ import annotations

import logging
from typing import Any

from ksched.api.errors import NotFound
from ksched.api.meta import format_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.taints import NO_EXECUTE, Taint, Toleration
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["TaintEvictionController", "min_toleration_seconds"]

log = logging.getLogger(__name__)

_INDEX = "tainteviction-node"


def min_toleration_seconds(taints: list[Taint], tolerations: tuple[Toleration, ...]) -> float | None:
    """How long the pod may stay: 0 when a taint is not tolerated, the smallest
    ``tolerationSeconds`` of the matching tolerations (negative: 0), None for ever."""
    used: list[Toleration] = []
    for taint in taints:
        matching = [t for t in tolerations if t.tolerates(taint)]
        if not matching:
            return 0.0
        used.extend(matching)
    best: float | None = None
    for t in used:
        secs = t.toleration_seconds
        if secs is None:
            continue
        v = max(0.0, float(secs))
        if best is None or v < best:
            best = v
    return best


class TaintEvictionController(Controller):
    name = "taint-eviction-controller"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.recorder = EventRecorder(client, clock, component="taint-eviction-controller")
        self.nodes = informers.informer("Node")
        self.pods = informers.informer("Pod")
        self.pods.indexer.add_indexer(_INDEX, lambda p: [p.node_name] if p.node_name else [])
        # pod key -> (uid, when first seen tainted, when it is to be deleted)
        self._scheduled: dict[str, tuple[str, float, float]] = {}
        self.nodes.add_handler(EventHandler(self._on_node, lambda o, n: self._on_node_update(o, n),
                                            lambda o: None))
        self.pods.add_handler(EventHandler(self._on_pod, self._on_pod_update, self._on_pod_delete))

    def _no_execute(self, node: Node) -> list[Taint]:
        return [t for t in node.taints if t.effect == NO_EXECUTE]

    def _on_node(self, node: Node) -> None:
        if self._no_execute(node):
            for p in self.pods.indexer.by_index(_INDEX, node.name):
                self.queue.add(p.key)

    def _on_node_update(self, old: Node, new: Node) -> None:
        if self._no_execute(old) != self._no_execute(new):
            for p in self.pods.indexer.by_index(_INDEX, new.name):
                self.queue.add(p.key)

    def _on_pod(self, pod: Pod) -> None:
        if pod.node_name and (pod.key in self._scheduled or self._tainted(pod.node_name)):
            self.queue.add(pod.key)

    def _on_pod_update(self, old: Pod, new: Pod) -> None:
        """``_on_pod(new)`` (called by the informer without a wrapper of its own)."""
        if new.node_name and (new.key in self._scheduled or self._tainted(new.node_name)):
            self.queue.add(new.key)

    def _on_pod_delete(self, obj: Any) -> None:
        p = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._scheduled.pop(p.key, None)

    def _tainted(self, node_name: str) -> bool:
        n = self.nodes.indexer.items.get(node_name)  # (self.nodes.get without its two calls)
        # (No taints at all, the common case: no list of the NoExecute ones made.)
        return isinstance(n, Node) and bool(n.taints) and bool(self._no_execute(n))

    def _cancel(self, pod: Pod) -> None:
        if self._scheduled.pop(pod.key, None) is not None:
            self.recorder.event(pod, "Normal", "TaintManagerEviction", "", f"Cancelling deletion of Pod {pod.key}")

    def sync(self, key: Any) -> None:
        pod = self.pods.get(key)
        if not isinstance(pod, Pod) or pod.is_terminal or pod.deletion_timestamp is not None or not pod.node_name:
            self._scheduled.pop(key, None)
            return
        node = self.nodes.get(pod.node_name)
        taints = self._no_execute(node) if isinstance(node, Node) else []
        if not taints:
            self._cancel(pod)
            return
        wait = min_toleration_seconds(taints, pod.tolerations)
        if wait is None:
            self._cancel(pod)
            return
        now = self.clock.now()
        uid, start, _ = self._scheduled.get(key, (pod.uid, now, now))
        if uid != pod.uid:
            start = now
        due = start + wait
        self._scheduled[key] = (pod.uid, start, due)
        if due > now:
            self.queue.add_after(key, due - now)
            return
        self._evict(pod, now)

    def _evict(self, pod: Pod, now: float) -> None:
        self.recorder.event(pod, "Normal", "TaintManagerEviction", "", f"Marking for deletion Pod {pod.key}")
        conds = [c for c in pod.conditions if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                      "message": "Taint manager: deleting due to NoExecute taint",
                      "lastTransitionTime": format_time(now)})
        try:
            self.client.patch("Pod", pod.namespace, pod.name, {"status": {"conditions": conds}},
                              "application/merge-patch+json", "status")
            self.client.delete("Pod", pod.namespace, pod.name, uid=pod.uid)
        except NotFound:
            pass
        self._scheduled.pop(pod.key, None)
