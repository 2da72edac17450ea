"""The pod garbage collector, as upstream's ``pkg/controller/podgc/gc_controller.go``: every
20 s it

* force-deletes terminated pods beyond ``--terminated-pod-gc-threshold`` (12500; 0 or less turns
  it off), evicted ones first, then the oldest, then by name;
* force-deletes terminating pods on NotReady nodes tainted ``node.kubernetes.io/out-of-service``;
* force-deletes pods bound to a node that no longer exists, once the node has been missing for
  the 40 s quarantine and a live GET confirms it, marking them Failed with the
  ``DisruptionTarget`` condition (``DeletionByPodGC``, "PodGC: node no longer exists");
* force-deletes terminating pods that were never scheduled.

A pod not yet terminal is patched to Failed before the delete with grace 0.

Divergence: the 20 s pass runs only while there may be something to collect (upstream's ticks
find nothing otherwise), so a simulation with nothing to collect has no timer of its own; the
passes keep upstream's 20 s grid from the controller's start.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import format_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["GC_CHECK_PERIOD", "QUARANTINE_TIME", "TERMINATED_POD_GC_THRESHOLD", "PodGCController"]

log = logging.getLogger(__name__)

GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
TERMINATED_POD_GC_THRESHOLD = 12500
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
_KEY = "gc"


def _terminated(p: Pod) -> bool:
    return p.phase in ("Succeeded", "Failed")


def _node_ready(n: Node) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (n.raw.get("status") or {}).get("conditions") or ())


def _out_of_service(n: Node) -> bool:
    return any(t.get("key") == OUT_OF_SERVICE_TAINT for t in (n.raw.get("spec") or {}).get("taints") or ())


class PodGCController(Controller):
    """One key: the periodic pass."""

    name = "pod-garbage-collector"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock,
                 terminated_pod_gc_threshold: int = TERMINATED_POD_GC_THRESHOLD) -> None:
        super().__init__(client, informers, clock)
        self.threshold = terminated_pod_gc_threshold
        self.started = clock.now()
        self.pods = informers.informer("Pod")
        self.nodes = informers.informer("Node")
        self.pods.indexer.add_indexer("podgc-node", lambda p: [p.node_name] if p.node_name else [])
        self._terminated: set[str] = set()
        # Node name -> when the pass found it missing (its quarantine ends 40 s later).
        self._quarantine: dict[str, float] = {}
        self.pods.add_handler(EventHandler(self._on_pod, self._on_pod_update, self._on_pod_delete))
        self.nodes.add_handler(EventHandler(self._on_node, lambda old, new: self._on_node(new),
                                            self._on_node_delete))

    # ---------------------------------------------------------------- when to pass

    def _schedule(self, later: bool = False) -> None:
        """The next pass of the 20 s grid (now, if now is on it; ``later``: strictly after now)."""
        now = self.clock.now()
        ticks = (now - self.started) / GC_CHECK_PERIOD
        k = math.floor(ticks + 1e-9) + 1 if later else math.ceil(ticks - 1e-9)
        self.queue.add_after(_KEY, self.started + k * GC_CHECK_PERIOD - now)

    def _may_collect(self, p: Pod) -> bool:
        if p.deletion_timestamp is not None and not p.node_name:
            return True
        if p.node_name:
            node = self.nodes.get(p.node_name)
            if node is None:
                return True
            if p.deletion_timestamp is not None and isinstance(node, Node) and _out_of_service(node) \
                    and not _node_ready(node):
                return True
        return False

    def _on_pod(self, p: Pod) -> None:
        if _terminated(p):
            self._terminated.add(p.key)
        else:
            self._terminated.discard(p.key)
        if (0 < self.threshold < len(self._terminated)) or self._may_collect(p):
            self._schedule()

    def _on_pod_update(self, old: Pod, new: Pod) -> None:
        """``_on_pod(new)``, written out (the informer calls it for every Pod status write); of
        ``_may_collect(new)``, a pod not being deleted on a node the informer has (most updates)
        answers False without the call."""
        if new.phase in ("Succeeded", "Failed"):  # _terminated(new)
            self._terminated.add(new.key)
        else:
            self._terminated.discard(new.key)
        if 0 < self.threshold < len(self._terminated):
            self._schedule()
            return
        node_name = new.node_name
        if node_name and new.deletion_timestamp is None and \
                self.nodes.indexer.items.get(node_name) is not None:
            return
        if self._may_collect(new):
            self._schedule()

    def _on_pod_delete(self, obj: Any) -> None:
        p = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._terminated.discard(p.key)

    def _on_node(self, n: Node) -> None:
        if _out_of_service(n) and not _node_ready(n) and self.pods.indexer.by_index("podgc-node", n.name):
            self._schedule()

    def _on_node_delete(self, obj: Any) -> None:
        n = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if self.pods.indexer.by_index("podgc-node", n.name):
            self._schedule()

    # ---------------------------------------------------------------- the pass

    def sync(self, key: Any) -> None:
        pods = [p for p in self.pods.list() if isinstance(p, Pod)]
        if self.threshold > 0:
            self._gc_terminated(pods)
        self._gc_terminating(pods)
        self._gc_orphaned(pods)
        self._gc_unscheduled_terminating(pods)
        if self._quarantine:
            self._schedule(later=True)

    def _gc_terminated(self, pods: list[Pod]) -> None:
        terminated = [p for p in pods if _terminated(p)]
        n = len(terminated) - self.threshold
        if n <= 0:
            return
        terminated.sort(key=lambda p: (not (p.phase == "Failed" and (p.raw.get("status") or {}).get("reason")
                                            == "Evicted"), p.creation_timestamp or 0.0, p.name))
        for p in terminated[:n]:
            self._mark_failed_and_delete(p, None)

    def _gc_terminating(self, pods: list[Pod]) -> None:
        for p in pods:
            if p.deletion_timestamp is None or not p.node_name:
                continue
            node = self.nodes.get(p.node_name)
            if isinstance(node, Node) and not _node_ready(node) and _out_of_service(node):
                self._mark_failed_and_delete(p, None)

    def _gc_orphaned(self, pods: list[Pod]) -> None:
        now = self.clock.now()
        missing = {p.node_name for p in pods if p.node_name and self.nodes.get(p.node_name) is None}
        for name in list(self._quarantine):
            if name not in missing:
                del self._quarantine[name]
        for name in missing:
            self._quarantine.setdefault(name, now)
        deleted: set[str] = set()
        for name, since in list(self._quarantine.items()):
            if now - since < QUARANTINE_TIME:
                continue
            del self._quarantine[name]
            try:
                self.client.get("Node", "", name)
                continue  # it exists after all (the cache lagged)
            except NotFound:
                deleted.add(name)
        if not deleted:
            return
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": format_time(now)}
        for p in pods:
            if p.node_name in deleted:
                self._mark_failed_and_delete(p, cond)

    def _gc_unscheduled_terminating(self, pods: list[Pod]) -> None:
        for p in pods:
            if p.deletion_timestamp is not None and not p.node_name:
                self._mark_failed_and_delete(p, None)

    def _mark_failed_and_delete(self, p: Pod, condition: dict[str, Any] | None) -> None:
        """markFailedAndDeletePodWithCondition."""
        log.info("PodGC is force deleting Pod %s", p.key)
        try:
            if not _terminated(p):
                status: dict[str, Any] = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [*(c for c in p.conditions if c.get("type") != condition["type"]),
                                            condition]
                self.client.patch("Pod", p.namespace, p.name, {"status": status}, subresource="status")
            self.client.delete("Pod", p.namespace, p.name, grace_period_seconds=0)
        except NotFound:
            pass
        except ApiError as e:
            log.debug("pod GC: %s: %s", p.key, e)
