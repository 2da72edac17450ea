"""The node lifecycle controller, as upstream's ``pkg/controller/nodelifecycle/
node_lifecycle_controller.go`` ('node-lifecycle-controller'):

* **health**: a node's heartbeat is its Lease in ``kube-node-lease`` (``renewTime``) or its Ready
  condition's ``lastHeartbeatTime``, whichever is newer; a node not heard from for the
  node-monitor grace period (50 s) gets Ready, MemoryPressure, DiskPressure and PIDPressure
  ``Unknown`` (``NodeStatusUnknown``, "Kubelet stopped posting node status."; a condition never
  posted: ``NodeStatusNeverUpdated``, "Kubelet never posted node status."), an event
  ``NodeNotReady``, and its pods' Ready condition False;
* **NoSchedule taints following the conditions** (TaintNodesByCondition): Ready False ->
  ``node.kubernetes.io/not-ready``, Unknown -> ``node.kubernetes.io/unreachable``,
  MemoryPressure / DiskPressure / PIDPressure / NetworkUnavailable -> ``memory-pressure`` /
  ``disk-pressure`` / ``pid-pressure`` / ``network-unavailable``, ``spec.unschedulable`` ->
  ``unschedulable``; added and removed to match, at once;
* **NoExecute taints**: ``not-ready:NoExecute`` (Ready False) or ``unreachable:NoExecute``
  (Ready Unknown), swapped for each other, removed when the node is Ready again. New ones go
  through a per-zone rate limiter: a token bucket (burst 1) at ``--node-eviction-rate`` 0.1/s
  in a healthy or fully disrupted zone, ``--secondary-node-eviction-rate`` 0.01/s in a partially
  disrupted one (more than 2 nodes not Ready and at least ``--unhealthy-zone-threshold`` 55 %)
  of more than ``--large-cluster-size-threshold`` 50 nodes, else 0; when every zone is fully
  disrupted, no taints are added and the NoExecute taints are removed from all nodes.

The pods on a NoExecute-tainted node are evicted by the taint eviction controller
(``ksched.controllers.tainteviction``) after their ``tolerationSeconds``.

As upstream, the tainting follows the Ready condition observed at the start of a pass: a node
marked Unknown in one pass is tainted (rate limits permitting) in the next, 5 s later.

Divergences, for a simulation that ends when nothing is left to happen: passes run on
upstream's 5 s grid only while there is something to watch -- after a node's status changes,
while a taint waits for its zone's rate limiter or follows a new Ready condition, at the moment
a heartbeat that looks old (more than 20 s) would pass the grace period (the simulated kubelet
renews its Leases whenever the clock moves on, so a live node is always fresh by then), and on
the simulation's hint (``resync``) while a failed node still shows Ready. Lease renewals are
read at the passes, not waited for; a simulation whose kubelets hold their renewals in memory
writes them before a pass (``monitor_due``, and ``before_monitor``, called at the start of a
pass: the Leases it writes are read at once).
Nodes without a Lease in ``kube-node-lease`` (nodes no simulated kubelet runs, such as
scheduler_perf's fake nodes) are left alone. The node startup grace period does not apply (the
kubelet posts Ready when it registers the node). No nodes are deleted for a cloud provider.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.lease import Lease
from ksched.api.meta import format_time, parse_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["NodeLifecycleController"]

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_MONITOR_PERIOD = 5.0
NODE_MONITOR_GRACE_PERIOD = 50.0
NODE_EVICTION_PERIOD = 0.1
EVICTION_RATE = 0.1
SECONDARY_EVICTION_RATE = 0.01
UNHEALTHY_ZONE_THRESHOLD = 0.55
LARGE_CLUSTER_SIZE_THRESHOLD = 50
LEASE_LOOKS_OLD = 20.0
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
# condition type -> {status: taint key} (nodeConditionToTaintKeyStatusMap)
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
}
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE_KEYS = frozenset({TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE,
                              *(k for m in CONDITION_TAINTS.values() for k in m.values())})
UNKNOWN_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")

NORMAL, PARTIAL, FULL = "Normal", "PartialDisruption", "FullDisruption"
_MONITOR, _TAINT = "monitor", "taint"


@dataclass
class _TokenBucket:
    qps: float
    tokens: float = 1.0
    last: float = 0.0

    def _refill(self, now: float) -> None:
        if self.qps > 0:
            self.tokens = min(1.0, self.tokens + (now - self.last) * self.qps)
        self.last = now

    def try_accept(self, now: float) -> bool:
        self._refill(now)
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            return True
        return False

    def next_token(self, now: float) -> float | None:
        self._refill(now)
        if self.qps <= 0:
            return None
        return now + max(0.0, 1.0 - self.tokens) / self.qps

    def set_qps(self, qps: float, now: float) -> None:
        if qps != self.qps:
            self._refill(now)
            self.qps = qps


@dataclass
class _Zone:
    limiter: _TokenBucket
    queue: deque[str] = field(default_factory=deque)
    state: str = NORMAL


def _ready_status(node: Node) -> str:
    for c in node.conditions:
        if c.get("type") == "Ready":
            return str(c.get("status") or "Unknown")
    return ""


def _zone_key(node: Node) -> str:
    return f"{node.region}:\x00:{node.zone}"


class NodeLifecycleController(Controller):
    name = "node-lifecycle-controller"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock,
                 grace_period: float = NODE_MONITOR_GRACE_PERIOD, eviction_rate: float = EVICTION_RATE,
                 secondary_eviction_rate: float = SECONDARY_EVICTION_RATE,
                 unhealthy_zone_threshold: float = UNHEALTHY_ZONE_THRESHOLD,
                 large_cluster_size_threshold: int = LARGE_CLUSTER_SIZE_THRESHOLD) -> None:
        super().__init__(client, informers, clock)
        self.grace_period = grace_period
        self.eviction_rate = eviction_rate
        self.secondary_eviction_rate = secondary_eviction_rate
        self.unhealthy_zone_threshold = unhealthy_zone_threshold
        self.large_cluster_size_threshold = large_cluster_size_threshold
        self.started = clock.now()
        self.recorder = EventRecorder(client, clock, component="node-controller")
        self.nodes = informers.informer("Node")
        self.leases = informers.informer("Lease")
        self.pods = informers.informer("Pod")
        self.pods.indexer.add_indexer("nodelifecycle-node", lambda p: [p.node_name] if p.node_name else [])
        # node -> (probe time, the heartbeat it saw: lease renewTime, Ready lastHeartbeatTime)
        self._health: dict[str, tuple[float, tuple[float, float]]] = {}
        self._zones: dict[str, _Zone] = {}
        self._queued: dict[str, str] = {}  # node -> the NoExecute taint key it waits for
        self._all_disrupted = False
        self._fresh: dict[str, Node] = {}
        self._kubelets: set[str] = set()  # nodes with a Lease in kube-node-lease
        self._resync_requested = False
        # Called at the start of a pass; True when it wrote Leases (they are read at once).
        self.before_monitor: Callable[[], bool] | None = None
        self.leases.add_handler(EventHandler(self._on_lease, lambda o, n: self._on_lease(n), self._on_lease_gone))
        self.nodes.add_handler(EventHandler(lambda n: self._wake(), lambda o, n: self._on_node_update(o, n),
                                            self._on_node_delete))

    # ---------------------------------------------------------------- when to pass

    def _tick_after(self, t: float) -> float:
        """The first tick of the 5 s grid strictly after ``t``."""
        k = math.floor((t - self.started) / NODE_MONITOR_PERIOD + 1e-9) + 1
        return self.started + k * NODE_MONITOR_PERIOD

    def _pass_at(self, t: float) -> None:
        self.queue.add_after(_MONITOR, self._tick_after(t) - self.clock.now())

    def _wake(self) -> None:
        if self._kubelets:
            self._pass_at(self.clock.now())  # nodes without a kubelet (no Lease) are left alone

    def resync(self) -> None:
        """A pass at the next tick (the simulation's hint while a failed node is unnoticed:
        upstream's controller passes every 5 s regardless)."""
        self._wake()

    def request_resync(self) -> None:
        """:meth:`resync` from another thread (``ksched serve``'s node agent): taken up by the
        controller's own thread at its next round (at most a second later)."""
        self._resync_requested = True

    def process(self, limit: int = 1 << 30) -> int:
        if self._resync_requested:
            self._resync_requested = False
            self._wake()
        return super().process(limit)

    def monitor_due(self) -> float | None:
        """When the next pass is due (None: none is waiting)."""
        return self.queue.due(_MONITOR)

    def _on_node_update(self, old: Node, new: Node) -> None:
        if old.raw.get("status") != new.raw.get("status") or old.unschedulable != new.unschedulable:
            self._wake()

    def _on_lease(self, lease: Lease) -> None:
        if lease.namespace == NODE_LEASE_NAMESPACE:
            self._kubelets.add(lease.name)

    def _on_lease_gone(self, obj: Any) -> None:
        lease = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if lease.namespace == NODE_LEASE_NAMESPACE:
            self._kubelets.discard(lease.name)

    def _on_node_delete(self, obj: Any) -> None:
        n = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._health.pop(n.name, None)
        self._queued.pop(n.name, None)

    # ---------------------------------------------------------------- sync

    def sync(self, key: Any) -> None:
        if key == _TAINT:
            self._drain()
        else:
            self._monitor()

    def _lease(self, name: str) -> Lease | None:
        obj = self.leases.get(f"{NODE_LEASE_NAMESPACE}/{name}")
        return obj if isinstance(obj, Lease) else None

    def _monitored(self) -> list[tuple[Node, Lease]]:
        out = []
        for n in self.nodes.list():
            if isinstance(n, Node):
                lease = self._lease(n.name)
                if lease is not None:
                    out.append((n, lease))
        return sorted(out, key=lambda x: x[0].name)

    def _monitor(self) -> None:
        """monitorNodeHealth: one pass over the nodes with a kubelet."""
        if self.before_monitor is not None and self.before_monitor():
            self.leases.poll()
        now = self.clock.now()
        monitored = self._monitored()
        observed: dict[str, str] = {}
        # the nodes as this pass last wrote them (the informer catches up later)
        fresh: dict[str, Node] = {}
        for node, lease in monitored:
            observed[node.name] = _ready_status(node) or "Unknown"
            node = self._update_health(node, lease, now)
            current = _ready_status(node) or "Unknown"
            if observed[node.name] == "True" and current != "True":
                self.recorder.event(node, "Normal", "NodeNotReady", "", f"Node {node.name} status is now: NodeNotReady")
                self._mark_pods_not_ready(node.name, now)
                self._pass_at(now)  # taint in the next pass, from the condition observed then
            fresh[node.name] = self._no_schedule_taints(node)
        self._fresh = fresh
        self._handle_disruption(list(fresh.values()), now)
        if not self._all_disrupted:
            for name, status in observed.items():
                node = fresh.get(name)
                if node is not None:
                    self._process_taint_based_eviction(node, status)
        self._schedule_drain()

    def _node(self, name: str) -> Node | None:
        n = self.nodes.get(name)
        return n if isinstance(n, Node) else None

    def _update_health(self, node: Node, lease: Lease, now: float) -> Node:
        """tryUpdateNodeHealth: refresh the probe time on a new heartbeat; past the grace period,
        the kubelet's conditions become Unknown."""
        ready = next((c for c in node.conditions if c.get("type") == "Ready"), None)
        hb = parse_time(ready.get("lastHeartbeatTime")) if ready else None
        seen = (lease.renew_time or 0.0, hb or 0.0)
        probe, last_seen = self._health.get(node.name, (now, (-1.0, -1.0)))
        if seen != last_seen:
            # Upstream's probe time is when its 5 s pass saw the new heartbeat; passes here run
            # only when needed, so the heartbeat's own time stands for it.
            probe = min(now, max(seen))
        self._health[node.name] = (probe, seen)
        if ready is not None and ready.get("status") == "Unknown":
            return node
        if now <= probe + self.grace_period:
            if max(seen) < now - LEASE_LOOKS_OLD and (ready is None or ready.get("status") == "True"):
                # looks old: look again when the grace period would be over
                self.queue.add_after(_MONITOR, self._tick_after(probe + self.grace_period) - now)
            return node
        ts = format_time(now)
        conds = [dict(c) for c in node.conditions]
        types = {c.get("type") for c in conds}
        for c in conds:
            if c.get("type") in UNKNOWN_CONDITIONS and c.get("status") != "Unknown":
                c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.",
                         lastTransitionTime=ts)
        for t in UNKNOWN_CONDITIONS:
            if t not in types:
                conds.append({"type": t, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                              "message": "Kubelet never posted node status.", "lastHeartbeatTime": format_time(probe),
                              "lastTransitionTime": ts})
        try:
            out = self.client.patch("Node", "", node.name, {"status": {"conditions": conds}},
                                    "application/merge-patch+json", "status")
        except NotFound:
            return node
        return out if isinstance(out, Node) else node

    def _mark_pods_not_ready(self, node_name: str, now: float) -> None:
        """MarkPodsNotReady: the node's pods are no longer Ready."""
        ts = format_time(now)
        for p in self.pods.indexer.by_index("nodelifecycle-node", node_name):
            if not isinstance(p, Pod) or p.is_terminal:
                continue
            conds = [dict(c) for c in p.conditions]
            changed = False
            for c in conds:
                if c.get("type") == "Ready" and c.get("status") != "False":
                    c.update(status="False", lastTransitionTime=ts)
                    changed = True
            if changed:
                try:
                    self.client.patch("Pod", p.namespace, p.name, {"status": {"conditions": conds}},
                                      "application/merge-patch+json", "status")
                except ApiError as e:
                    log.debug("node-lifecycle: marking %s not ready: %s", p.key, e)

    # ---------------------------------------------------------------- taints

    def _set_taints(self, node: Node, taints: list[dict[str, Any]]) -> Node:
        try:
            out = self.client.patch("Node", "", node.name, {"spec": {"taints": taints}},
                                    "application/merge-patch+json")
        except NotFound:
            return node
        if isinstance(out, Node):
            self._fresh[node.name] = out
            return out
        return node

    def _latest(self, node: Node) -> Node:
        """The node as this controller last wrote or read it."""
        return self._fresh.get(node.name) or self._node(node.name) or node

    def _no_schedule_taints(self, node: Node) -> Node:
        """doNoScheduleTaintingPass: the NoSchedule taints follow the conditions."""
        want: list[str] = []
        for c in node.conditions:
            key = CONDITION_TAINTS.get(str(c.get("type")), {}).get(str(c.get("status")))
            if key is not None:
                want.append(key)
        if node.unschedulable:
            want.append(TAINT_UNSCHEDULABLE)
        taints = list((node.raw.get("spec") or {}).get("taints") or ())
        have = [t for t in taints if t.get("effect") == "NoSchedule" and t.get("key") in NO_SCHEDULE_KEYS]
        if sorted(t.get("key") for t in have) == sorted(set(want)):
            return node
        keep = [t for t in taints if not (t.get("effect") == "NoSchedule" and t.get("key") in NO_SCHEDULE_KEYS)]
        ts = format_time(self.clock.now())
        old = {t.get("key"): t for t in have}
        added = [old.get(k) or {"key": k, "effect": "NoSchedule", "timeAdded": ts} for k in sorted(set(want))]
        return self._set_taints(node, keep + added)

    def _zone(self, key: str) -> _Zone:
        z = self._zones.get(key)
        if z is None:
            z = self._zones[key] = _Zone(_TokenBucket(self.eviction_rate, 1.0, self.clock.now()))
        return z

    def _process_taint_based_eviction(self, node: Node, observed: str) -> None:
        node = self._latest(node)
        taints = (node.raw.get("spec") or {}).get("taints") or []
        noexec = {t.get("key") for t in taints if t.get("effect") == "NoExecute"}
        if observed == "True":
            self._queued.pop(node.name, None)
            if noexec & {TAINT_NOT_READY, TAINT_UNREACHABLE}:
                self._swap_no_execute(node, None)
            return
        want = TAINT_NOT_READY if observed == "False" else TAINT_UNREACHABLE
        other = TAINT_UNREACHABLE if want == TAINT_NOT_READY else TAINT_NOT_READY
        if want in noexec:
            return
        if other in noexec:
            self._swap_no_execute(node, want)  # swapped at once, no rate limit
            return
        if self._queued.get(node.name) != want:
            self._queued[node.name] = want
            self._zone(_zone_key(node)).queue.append(node.name)

    def _swap_no_execute(self, node: Node, key: str | None) -> None:
        node = self._latest(node)
        taints = [t for t in (node.raw.get("spec") or {}).get("taints") or ()
                  if not (t.get("effect") == "NoExecute" and t.get("key") in (TAINT_NOT_READY, TAINT_UNREACHABLE))]
        if key is not None:
            taints.append({"key": key, "effect": "NoExecute", "timeAdded": format_time(self.clock.now())})
        self._set_taints(node, taints)

    def _drain(self) -> None:
        """The zones' rate-limited queues: each node waiting gets its NoExecute taint as its
        zone's limiter allows."""
        now = self.clock.now()
        self._fresh = {}
        for z in self._zones.values():
            while z.queue:
                name = z.queue[0]
                want = self._queued.get(name)
                node = self._node(name)
                if want is None or node is None:
                    z.queue.popleft()
                    continue
                if not z.limiter.try_accept(now):
                    break
                z.queue.popleft()
                del self._queued[name]
                if _ready_status(node) in ("False", "Unknown"):
                    self._swap_no_execute(node, TAINT_NOT_READY if _ready_status(node) == "False"
                                          else TAINT_UNREACHABLE)
        self._schedule_drain()

    def _schedule_drain(self) -> None:
        now = self.clock.now()
        due: float | None = None
        for z in self._zones.values():
            if z.queue:
                t = z.limiter.next_token(now)
                if t is not None and (due is None or t < due):
                    due = t
        if due is not None:
            # drained every 100 ms from the controller's start
            k = math.ceil((due - self.started) / NODE_EVICTION_PERIOD - 1e-9)
            self.queue.add_after(_TAINT, max(0.0, self.started + k * NODE_EVICTION_PERIOD - now))

    # ---------------------------------------------------------------- zones

    def _zone_state(self, nodes: list[Node]) -> str:
        ready = sum(1 for n in nodes if _ready_status(n) == "True")
        not_ready = len(nodes) - ready
        if ready == 0 and not_ready > 0:
            return FULL
        if not_ready > 2 and not_ready / (ready + not_ready) >= self.unhealthy_zone_threshold:
            return PARTIAL
        return NORMAL

    def _handle_disruption(self, nodes: list[Node], now: float) -> None:
        by_zone: dict[str, list[Node]] = {}
        for n in nodes:
            if EXCLUDE_DISRUPTION_LABEL in n.labels:
                continue
            by_zone.setdefault(_zone_key(n), []).append(n)
        states = {k: self._zone_state(v) for k, v in by_zone.items()}
        all_full = bool(states) and all(s == FULL for s in states.values())
        if all_full:
            if not self._all_disrupted:
                log.info("node-lifecycle: all nodes are not ready: entering master disruption mode")
                for n in nodes:
                    if any(t.get("effect") == "NoExecute" and t.get("key") in (TAINT_NOT_READY, TAINT_UNREACHABLE)
                           for t in (n.raw.get("spec") or {}).get("taints") or ()):
                        self._swap_no_execute(n, None)
            for k in by_zone:
                self._zone(k).limiter.set_qps(0.0, now)
            self._all_disrupted = True
            return
        self._all_disrupted = False
        for k, state in states.items():
            z = self._zone(k)
            z.state = state
            if state == PARTIAL:
                qps = self.secondary_eviction_rate if len(by_zone[k]) > self.large_cluster_size_threshold else 0.0
            else:
                qps = self.eviction_rate
            z.limiter.set_qps(qps, now)
