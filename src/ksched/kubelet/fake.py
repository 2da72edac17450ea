"""A simulated node agent: bound pods start (Running, Ready) after a start-up delay, pods being
deleted stop once their grace period ends, on the cluster's clock.

It is what the simulator needs of a kubelet for scheduling to behave as on a real cluster:
preemption victims go away after ``terminationGracePeriodSeconds``, PodDisruptionBudgets see
healthy pods, and pods get a ``startTime`` (preemption prefers to keep older pods).
"""

from __future__ import annotations

import heapq
import logging
from typing import Any

from ksched.api.errors import ApiError
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.client.informer import EventHandler, InformerFactory

__all__ = ["FakeKubelet"]

log = logging.getLogger(__name__)


class FakeKubelet:
    """One agent for every node (it acts for all of them)."""

    def __init__(self, client: Any, informers: InformerFactory, clock: Any, startup_delay: float = 0.0) -> None:
        self.client = client
        self.clock = clock
        self.startup_delay = startup_delay
        self._to_start: list[tuple[float, int, str]] = []
        self._seq = 0
        self.informer = informers.informer("Pod")
        self.informer.add_handler(EventHandler(self._on_add, self._on_update, None))

    def _on_add(self, pod: Pod) -> None:
        self._maybe_schedule_start(pod)

    def _on_update(self, old: Pod, new: Pod) -> None:
        if not old.node_name and new.node_name:
            self._maybe_schedule_start(new)

    def _maybe_schedule_start(self, pod: Pod) -> None:
        if not pod.node_name or pod.phase != "Pending" or pod.deletion_timestamp is not None:
            return
        self._seq += 1
        heapq.heappush(self._to_start, (self.clock.now() + self.startup_delay, self._seq, pod.key))

    def next_wakeup(self) -> float | None:
        return self._to_start[0][0] if self._to_start else None

    def step(self) -> int:
        """Start every pod whose start-up time has come. Returns how many started."""
        now = self.clock.now()
        n = 0
        while self._to_start and self._to_start[0][0] <= now:
            _, _, key = heapq.heappop(self._to_start)
            pod = self.informer.get(key)
            if not isinstance(pod, Pod) or not pod.node_name or pod.phase != "Pending" or \
                    pod.deletion_timestamp is not None:
                continue
            ts = format_time(now)
            conds = [c for c in pod.conditions if c.get("type") not in ("Ready", "ContainersReady", "Initialized")]
            conds += [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                      for t in ("Initialized", "ContainersReady", "Ready")]
            try:
                self.client.patch("Pod", pod.namespace, pod.name,
                                  {"status": {"phase": "Running", "startTime": ts, "conditions": conds}},
                                  "application/merge-patch+json", "status")
                n += 1
            except ApiError as e:
                log.debug("starting %s failed: %s", key, e)
        return n
