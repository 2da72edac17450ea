"""A simulated node agent, on the cluster's clock: bound pods start (Running, Ready, container
statuses) after a start-up delay; their containers run for ``ksched.io/run-seconds`` (for ever
without it) and exit with ``ksched.io/exit-code``, after which the pod succeeds or fails, or the
containers restart with the kubelet's CrashLoopBackOff, per the pod's restartPolicy; a deleted
pod's containers stop promptly (``ksched.io/termination-seconds``, default 1 s, at most the
grace period) and the kubelet then deletes the pod for good, as its status manager does
(``ksched.kubelet.runtime`` has the rules and the status it writes).

It is what the simulator needs of a kubelet for scheduling and the controllers to behave as on
a real cluster: preemption victims and deleted pods go away, PodDisruptionBudgets see healthy
pods, Jobs see their pods finish, and pods get a ``startTime`` (preemption prefers to keep
older pods).

Nodes that declare a NUMA layout or kubelet settings (``ksched.kubelet.cm``) run their CPU,
topology and device managers at admission: a pod they refuse ends ``Failed`` with their reason
and "Pod was rejected: <message>", as the kubelet's rejectPod; what an admitted pod was given is
written on it (``ksched.io/cpuset``, ``ksched.io/devices``), and the devices' capacity and
allocatable on the node's status.

Divergences: one agent acts for every node; resource usage and evictions are not simulated;
see ``ksched.kubelet.runtime`` for the containers.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.kubelet import runtime as rt
from ksched.kubelet.cm.node_managers import NodeManagers
from ksched.kubelet.lifecycle import PodAdmitResult

__all__ = ["FakeKubelet"]

log = logging.getLogger(__name__)

START, EXIT, RESTART, STOP = "start", "exit", "restart", "stop"


@dataclass
class _Run:
    """What the agent remembers of a pod's containers."""

    started: float | None = None  # when the current containers started
    restarts: int = 0
    last_state: dict[str, Any] | None = None
    finished: float | None = None  # when the last containers exited
    epoch: int = 0  # bumped on every transition: older timers are stale
    stopping: bool = False


class FakeKubelet:
    """One agent for every node (it acts for all of them)."""

    def __init__(self, client: Any, informers: InformerFactory, clock: Any, startup_delay: float = 0.0) -> None:
        self.client = client
        self.clock = clock
        self.startup_delay = startup_delay
        self.backoff = rt.CrashLoopBackOff()
        self._timers: list[tuple[float, int, str, str, str, int]] = []  # (due, seq, action, key, uid, epoch)
        self._seq = itertools.count()
        self._runs: dict[str, _Run] = {}
        self.informer = informers.informer("Pod")
        self.informer.add_handler(EventHandler(self._on_add, self._on_update, self._on_delete))
        self.node_managers = NodeManagers()
        informers.informer("Node").add_handler(EventHandler(
            self.node_managers.on_node, lambda _old, new: self.node_managers.on_node(new),
            lambda obj: self.node_managers.on_node_deleted(
                (obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj).name)))

    # ---------------------------------------------------------------- timers

    def _at(self, due: float, action: str, pod: Pod, run: _Run) -> None:
        heapq.heappush(self._timers, (due, next(self._seq), action, pod.key, pod.uid, run.epoch))

    def next_wakeup(self) -> float | None:
        return self._timers[0][0] if self._timers else None

    def _run(self, pod: Pod) -> _Run:
        run = self._runs.get(pod.uid)
        if run is None:
            run = self._runs[pod.uid] = _Run()
        return run

    # ---------------------------------------------------------------- informer handlers

    def _on_add(self, pod: Pod) -> None:
        if not pod.node_name or pod.is_terminal:
            return
        if pod.deletion_timestamp is not None:
            self._schedule_stop(pod)
        elif pod.phase == "Pending":
            self._at(self.clock.now() + self.startup_delay, START, pod, self._run(pod))
        elif pod.phase == "Running":
            self._adopt_running(pod)

    def _on_update(self, old: Pod, new: Pod) -> None:
        if new.is_terminal:
            self.node_managers.remove_pod(new)
        if not new.node_name or new.is_terminal:
            return
        if new.deletion_timestamp is not None and (old.deletion_timestamp is None or
                                                   new.deletion_timestamp < old.deletion_timestamp):
            self._schedule_stop(new)
        elif not old.node_name and new.phase == "Pending" and new.deletion_timestamp is None:
            self._at(self.clock.now() + self.startup_delay, START, new, self._run(new))

    def _on_delete(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.node_managers.remove_pod(pod)
        self._runs.pop(pod.uid, None)
        self.backoff.forget(pod.uid)

    def _adopt_running(self, pod: Pod) -> None:
        """A pod found Running (an agent started on a persisted cluster): its containers started
        at the pod's startTime."""
        run = self._run(pod)
        if run.started is not None:
            return
        run.started = pod.start_time if pod.start_time is not None else self.clock.now()
        run.restarts = max((int(c.get("restartCount") or 0) for c in
                            (pod.raw.get("status") or {}).get("containerStatuses") or ()), default=0)
        self._schedule_exit(pod, run)

    def _schedule_exit(self, pod: Pod, run: _Run) -> None:
        secs = rt.run_seconds(pod)
        if secs is not None and run.started is not None:
            self._at(max(self.clock.now(), run.started + secs), EXIT, pod, run)

    def _schedule_stop(self, pod: Pod) -> None:
        run = self._run(pod)
        delay, _ = rt.stop_delay(pod)
        run.epoch += 1  # a pending exit or restart no longer happens
        run.stopping = True
        self._at(self.clock.now() + delay, STOP, pod, run)

    # ---------------------------------------------------------------- step

    def step(self) -> int:
        """Carry out every container start, exit, restart and stop whose time has come.
        Returns how many pods changed."""
        now = self.clock.now()
        n = 0
        for name, patch in self.node_managers.node_status_patches():
            try:
                self.client.patch("Node", "", name, patch, "application/merge-patch+json", "status")
                n += 1
            except ApiError as e:
                log.debug("kubelet: status of node %s: %s", name, e)
        while self._timers and self._timers[0][0] <= now:
            _, _, action, key, uid, epoch = heapq.heappop(self._timers)
            pod = self.informer.get(key)
            run = self._runs.get(uid)
            if not isinstance(pod, Pod) or pod.uid != uid or run is None or run.epoch != epoch:
                continue
            try:
                if getattr(self, f"_{action}")(pod, run, now):
                    n += 1
            except NotFound:
                pass
            except ApiError as e:
                log.debug("kubelet: %s of %s failed: %s", action, key, e)
        return n

    def _patch_status(self, pod: Pod, status: dict[str, Any]) -> None:
        self.client.patch("Pod", pod.namespace, pod.name, {"status": status}, "application/merge-patch+json",
                          "status")

    def _start(self, pod: Pod, run: _Run, now: float) -> bool:
        if not pod.node_name or pod.phase != "Pending" or pod.deletion_timestamp is not None:
            return False
        admitted, annotations = self.node_managers.admit(pod)
        if not admitted.admit:
            self._reject(pod, run, admitted)
            return True
        if annotations:
            self.client.patch("Pod", pod.namespace, pod.name, {"metadata": {"annotations": annotations}},
                              "application/merge-patch+json")
        run.started = now
        run.epoch += 1
        status: dict[str, Any] = {
            "phase": "Running", "startTime": format_time(now),
            "conditions": rt.pod_conditions(pod, now, ready=True),
            "containerStatuses": [rt.container_status(pod, c, rt.running(now), 0, ready=True)
                                  for c in pod.containers]}
        if pod.init_containers:
            status["initContainerStatuses"] = rt.init_container_statuses(pod, now)
        self._patch_status(pod, status)
        self._schedule_exit(pod, run)
        return True

    def _reject(self, pod: Pod, run: _Run, result: PodAdmitResult) -> None:
        """The node refused the pod (upstream's rejectPod)."""
        run.epoch += 1
        self._patch_status(pod, {"phase": "Failed", "reason": result.reason,
                                 "message": f"Pod was rejected: {result.message}"})

    def _exit(self, pod: Pod, run: _Run, now: float) -> bool:
        """The containers exit: the pod is done, or they restart (now, or after their back-off)."""
        if pod.deletion_timestamp is not None or pod.is_terminal:
            return False
        code = rt.exit_code(pod)
        run.epoch += 1
        run.finished = now
        last = {c.name: rt.terminated(pod, c.name, run.restarts, code, run.started, now) for c in pod.containers}
        if not rt.should_restart(rt.restart_policy(pod), code):
            self._finish(pod, run, now, code, last)
            return True
        run.last_state = last
        if not self.backoff.in_backoff_since(pod.uid, now, now):
            self.backoff.next(pod.uid, now, now)
            self._restart_now(pod, run, now)
            return True
        # CrashLoopBackOff: waiting, not ready, until the back-off has passed since the exit.
        delay = self.backoff.get(pod.uid)
        msg = {c.name: rt.crash_loop_message(delay, c.name, pod) for c in pod.containers}
        statuses = [rt.container_status(pod, c, {"waiting": {"reason": "CrashLoopBackOff", "message": msg[c.name]}},
                                        run.restarts, last[c.name]) for c in pod.containers]
        names = ", ".join(c.name for c in pod.containers)
        self._patch_status(pod, {"conditions": rt.pod_conditions(
            pod, now, ready=False, reason="ContainersNotReady", message=f"containers with unready status: [{names}]"),
            "containerStatuses": statuses})
        self._at(now + delay, RESTART, pod, run)
        return True

    def _restart(self, pod: Pod, run: _Run, now: float) -> bool:
        if pod.deletion_timestamp is not None or pod.is_terminal or run.finished is None:
            return False
        run.epoch += 1
        self.backoff.next(pod.uid, run.finished, now)
        self._restart_now(pod, run, now)
        return True

    def _restart_now(self, pod: Pod, run: _Run, now: float) -> None:
        run.restarts += 1
        run.started = now
        last = run.last_state or {}
        self._patch_status(pod, {
            "conditions": rt.pod_conditions(pod, now, ready=True),
            "containerStatuses": [rt.container_status(pod, c, rt.running(now), run.restarts, last.get(c.name),
                                                      ready=True) for c in pod.containers]})
        self._schedule_exit(pod, run)

    def _finish(self, pod: Pod, run: _Run, now: float, code: int, states: dict[str, dict[str, Any]]) -> None:
        """All containers exited for good: the pod is Succeeded (all exit 0) or Failed."""
        status: dict[str, Any] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": rt.pod_conditions(pod, now, ready=False, reason="PodCompleted"),
            "containerStatuses": [rt.container_status(pod, c, states[c.name], run.restarts,
                                                      (run.last_state or {}).get(c.name))
                                  for c in pod.containers]}
        if any(c.is_sidecar for c in pod.init_containers):
            status["initContainerStatuses"] = [
                rt.container_status(pod, c, rt.terminated(pod, c.name, 0, 0, run.started, now), 0)
                for c in pod.init_containers]
        self._patch_status(pod, status)

    def _stop(self, pod: Pod, run: _Run, now: float) -> bool:
        """A deleted pod's containers have stopped: record it, then delete the pod for good
        (grace period 0, as the status manager does; finalizers still hold it)."""
        if not pod.is_terminal:
            _, killed = rt.stop_delay(pod)
            code = rt.SIGKILL_EXIT_CODE if killed else rt.SIGTERM_EXIT_CODE
            if run.started is not None:
                states = {c.name: rt.terminated(pod, c.name, run.restarts, code, run.started, now)
                          for c in pod.containers}
                self._finish(pod, run, now, code, states)
            else:
                self._patch_status(pod, {"phase": "Failed",
                                         "conditions": rt.pod_conditions(pod, now, ready=False,
                                                                         reason="PodCompleted")})
        run.epoch += 1
        self.client.delete("Pod", pod.namespace, pod.name, grace_period_seconds=0, uid=pod.uid)
        return True
