"""When the simulated nodes' eviction managers (``ksched.kubelet.eviction``) run, and what they
write: upstream's manager synchronizes every 10 s (``evictionMonitoringPeriod``) and, after an
eviction, again once the evicted pod is cleaned up (1 s polls). Here a node's passes stay on
that 10 s grid (from the kubelet's start) but run only while there is something to watch: from
the first tick after a pod starts or ends on the node or its usage annotations change, at the
ticks where a usage profile steps or a ramp segment ends, at the tick where a ramp would cross a
threshold (usage is linear between profile points: the crossing is computed, not polled for),
and on every tick while a threshold, a grace period or a pressure condition is in flight. A node whose pods declare no usage and
whose manager is idle has no passes (its signals could not change).

The node's pressure conditions are written when they change (``ksched.kubelet.eviction``
``condition_dicts``); the evicted pod is terminated by the kubelet (``FakeKubelet.evict``), and
the node's manager makes no pass until 1 s after the kill (upstream's synchronize blocks in the
kill, then waits for the pod's cleanup).
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Any

from ksched.api.meta import format_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.eviction import (
    CLEANUP_POLL,
    CONDITIONS,
    MONITORING_PERIOD,
    EvictionManager,
    Observation,
    condition_dicts,
    observe,
    pod_stats,
)
from ksched.kubelet.evictionapi import EvictionConfig, config_for_node
from ksched.kubelet.usage import (
    USAGE_ANNOTATION,
    UsageError,
    has_usage,
    next_usage_change,
    next_usage_point,
    parse_profile,
)

__all__ = ["NodePressure"]

log = logging.getLogger(__name__)


# ``kick`` asks whether a node without a pass due has anything to watch before working out the
# tick, and whether a node object declares usage is worked out once per object. False: the
# tick first and the node's annotations read at every kick (the reference).
QUICK_KICK = True


def _declares_usage(node: Node) -> bool:
    return any(k.startswith(USAGE_ANNOTATION) for k in node.annotations)


class NodePressure:
    def __init__(self, kubelet: Any, configs: list[EvictionConfig] | None = None) -> None:
        self.kubelet = kubelet
        self.configs = list(configs or ())
        self.started = kubelet.clock.now()
        self.managers: dict[str, EvictionManager] = {}
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._busy: dict[str, float] = {}  # node -> until when its manager waits for an eviction's kill
        self._node_usage: dict[str, tuple[Node, bool]] = {}  # node -> (the object, whether it declares usage)
        self.passes = 0

    def manager(self, node_name: str) -> EvictionManager:
        m = self.managers.get(node_name)
        if m is None:
            node = self.kubelet.node(node_name)
            cfg = config_for_node(self.configs, node.labels if node is not None else {})
            m = self.managers[node_name] = EvictionManager(node_name, cfg)
        return m

    def forget(self, node_name: str) -> None:
        self.managers.pop(node_name, None)
        self._node_usage.pop(node_name, None)
        self._due.pop(node_name, None)
        self._busy.pop(node_name, None)

    # ---------------------------------------------------------------- timers

    def _tick_at_or_after(self, t: float) -> float:
        k = math.ceil((t - self.started) / MONITORING_PERIOD - 1e-9)
        return self.started + k * MONITORING_PERIOD

    def _tick_after(self, t: float) -> float:
        k = math.floor((t - self.started) / MONITORING_PERIOD + 1e-9) + 1
        return self.started + k * MONITORING_PERIOD

    def _at(self, node_name: str, t: float) -> None:
        cur = self._due.get(node_name)
        if cur is not None and cur <= t:
            return
        self._due[node_name] = t
        heapq.heappush(self._heap, (t, node_name))

    def _watched(self, node_name: str) -> bool:
        node = self.kubelet.node(node_name)
        if node is None:
            return False
        m = self.managers.get(node_name)
        if m is not None and (m.needs_watching() or m.conditions):
            return True
        if QUICK_KICK:
            seen = self._node_usage.get(node_name)
            if seen is None or seen[0] is not node:  # (a Node is never changed in place)
                seen = self._node_usage[node_name] = (node, _declares_usage(node))
            if seen[1]:
                return True
        elif _declares_usage(node):
            return True
        return bool(self.kubelet.any_usage(node_name))

    def kick(self, node_name: str) -> None:
        """Something changed on the node: a pass at the next tick, if there is anything to watch.
        With ``QUICK_KICK``, a node with no pass due that has nothing to watch is left without
        working out the tick (``_watched`` changes nothing: asked first, the same outcome)."""
        if not node_name:
            return
        if QUICK_KICK and node_name not in self._due:
            if self._watched(node_name):
                self._at(node_name, self._tick_at_or_after(self.kubelet.clock.now()))
            return
        t = self._tick_at_or_after(self.kubelet.clock.now())
        due = self._due.get(node_name)
        if due is not None and due <= t:
            return  # a pass is due by then already (what _at would keep)
        if self._watched(node_name):
            self._at(node_name, t)

    def next_wakeup(self) -> float | None:
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    # ---------------------------------------------------------------- passes

    def step(self) -> int:
        now = self.kubelet.clock.now()
        n = 0
        while (t := self.next_wakeup()) is not None and t <= now:
            _, name = heapq.heappop(self._heap)
            del self._due[name]
            if self._pass(name, now):
                n += 1
        return n

    def _pass(self, node_name: str, now: float) -> bool:
        kubelet = self.kubelet
        node = kubelet.node(node_name)
        if node is None or node_name in kubelet.heartbeats.down:
            return False
        busy = self._busy.get(node_name)
        if busy is not None:
            if now < busy:  # still waiting for an evicted pod's kill
                self._at(node_name, busy)
                return False
            del self._busy[node_name]
        self.passes += 1
        m = self.manager(node_name)
        # In name order: the ranking's ties fall the same way whatever order the node's pods are
        # kept in (the informer's index has none).
        pods = sorted(kubelet.admitted_pods(node_name), key=_pod_key)
        stats = []
        for p in pods:
            try:
                stats.append(pod_stats(p, kubelet.since_start(p)))
            except UsageError as e:
                kubelet.bad_usage(p, e)
        try:
            eviction, resource = m.synchronize(node, stats, now)
        except UsageError as e:
            log.warning("kubelet: node %s: %s", node_name, e)
            return False
        changed = self._write_conditions(node, m.conditions, now)
        if eviction is not None:
            kubelet.recorder.event(node, "Warning", "EvictionThresholdMet", "", f"Attempting to reclaim {resource}")
            killed = kubelet.evict(eviction.pod, eviction.message, now, eviction.grace_period)
            # upstream's manager waits for the kill, then polls for the cleanup: no pass until then
            self._busy[node_name] = killed + CLEANUP_POLL
            self._at(node_name, killed + CLEANUP_POLL)
            return True
        nxt = self._next_change(node, pods, now)
        if m.needs_watching() or m.conditions:
            nxt = now if nxt is None else min(nxt, now)
        if nxt is not None:
            # the first tick at or after the change, and after this pass
            self._at(node_name, max(self._tick_at_or_after(nxt), self._tick_after(now)))
        return changed

    def _next_change(self, node: Node, pods: list[Pod], now: float) -> float | None:
        """The first time the node's signals may cross a threshold by themselves: usage is
        linear between profile points, so until the next point a crossing is where the line
        meets the threshold; at the point the pass looks again. None: usage stays put."""
        horizon: float | None = None
        ramping = False
        for p in pods:
            since = self.kubelet.since_start(p)
            if since is None or not has_usage(p):
                continue
            try:
                change = next_usage_change(p, since)
                point = next_usage_point(p, since)
            except UsageError:
                continue
            if change is None:
                continue
            ramping = ramping or change <= since
            at = now + ((point if point is not None else change) - since)
            horizon = at if horizon is None else min(horizon, at)
        created = node.creation_timestamp or 0.0
        for k, v in node.annotations.items():
            if k.startswith(USAGE_ANNOTATION):
                res = k[len(USAGE_ANNOTATION):]
                try:
                    prof = parse_profile(v, res if res != "imagefs" else "ephemeral-storage")
                except UsageError:
                    continue
                change = prof.changing_after(now - created)
                if change is None:
                    continue
                ramping = ramping or change <= now - created
                point = prof.next_point(now - created)
                at = created + (point if point is not None else change)
                horizon = at if horizon is None else min(horizon, at)
        if horizon is None or not ramping:
            return horizon
        return min(horizon, self._crossing(node, pods, now, horizon))

    def _crossing(self, node: Node, pods: list[Pod], now: float, until: float) -> float:
        """Where a threshold is first crossed on the straight line from now to ``until``."""
        m = self.manager(node.name)

        def observe_at(t: float) -> dict[str, Observation]:
            stats = []
            for p in pods:
                since = self.kubelet.since_start(p)
                try:
                    stats.append(pod_stats(p, None if since is None else since + (t - now)))
                except UsageError:
                    continue
            return observe(node, stats, t)

        try:
            a, b = observe_at(now), observe_at(until)
        except UsageError:
            return now
        best = until
        for th in m.config.thresholds:
            oa, ob = a.get(th.signal), b.get(th.signal)
            if oa is None or ob is None:
                continue
            limit = th.value.amount(oa.capacity)
            if oa.available >= limit > ob.available:
                x = now + (until - now) * (oa.available - limit) / (oa.available - ob.available)
                best = min(best, x)
        return best

    def _write_conditions(self, node: Node, conditions: set[str], now: float) -> bool:
        have = {str(c.get("type")): c.get("status") for c in node.conditions if c.get("type") in CONDITIONS}
        want = {t: "True" for t in conditions}
        if all(have.get(t, "False") == want.get(t, "False") for t in CONDITIONS):
            return False
        conds = condition_dicts(conditions, node.conditions, format_time(now))
        try:
            self.kubelet.client.patch("Node", "", node.name, {"status": {"conditions": conds}},
                                      "application/merge-patch+json", "status")
        except Exception as e:  # an API error: the next pass writes them again
            log.debug("kubelet: node %s conditions: %s", node.name, e)
            return False
        return True


def _pod_key(pod: Pod) -> str:
    return pod.key
