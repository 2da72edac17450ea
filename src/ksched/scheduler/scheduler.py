"""The scheduler: profiles, cache, queue and the scheduling loop.

Two ways to run it:

* ``step()`` / ``run_until_idle()`` -- a single thread does everything (informer events,
  scheduling cycles, binding cycles run right after their scheduling cycle). Used by
  ``ksched simulate`` and the in-process benchmark: deterministic for a seed.
* ``run(stop)`` -- informers read in background threads and binding cycles run on a thread pool
  (API calls overlap), while cache and queue are only touched by the loop thread.
"""

from __future__ import annotations

import logging
import queue as _queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ksched.api.errors import ApiError, BindingConflict
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.client.informer import InformerFactory
from ksched.clock import Clock, RealClock
from ksched.scheduler.cache.cache import Cache, CacheError
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.config import SchedulerConfiguration, default_configuration
from ksched.scheduler.eventhandlers import add_all_event_handlers
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ASSIGNED_POD_DELETE, ClusterEvent
from ksched.scheduler.framework.interface import PostFilterResult, QueueSortPlugin
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, FitError, Status, fit_error_message
from ksched.scheduler.framework.types import PodInfo, QueuedPodInfo
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.queue.scheduling_queue import PriorityQueue, QueueingHintEntry
from ksched.scheduler.recorder import BackgroundWriter, EventRecorder
from ksched.scheduler.schedule_one import Algorithm, Explanation, NoNodesAvailable, SchedulingError

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)

REASON_UNSCHEDULABLE = "Unschedulable"
# Upstream's clearNominatedNode: a failure outside PostFilter drops the pod's nomination.
CLEAR_NOMINATION = PostFilterResult("", PostFilterResult.MODE_OVERRIDE)
REASON_SCHEDULER_ERROR = "SchedulerError"
_VOLUME_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")


@dataclass(slots=True)
class BindingTask:
    fw: Framework
    state: CycleState
    qpi: QueuedPodInfo
    assumed: Pod
    host: str
    start: float
    status: Status | None = None
    done: bool = False
    permit_passed: bool = False  # past WaitOnPermit: the pod is no longer in flight (upstream's Done)


def pod_with_node(pod: Pod, node_name: str) -> Pod:
    """The assumed copy of a pod: spec.nodeName set (the stored object is untouched)."""
    p = pod.shallow_copy()
    raw = dict(pod.raw)
    spec = dict(raw.get("spec") or {})
    spec["nodeName"] = node_name
    raw["spec"] = spec
    p.raw = raw
    p.node_name = node_name
    return p


class Scheduler:
    def __init__(self, client: Any, config: SchedulerConfiguration | None = None, *,
                 clock: Clock | None = None, informers: InformerFactory | None = None, seed: int = 0,
                 vectorize: bool = True, registry: Registry | None = None, explain: bool = False,
                 record_events: bool = True, threaded: bool = False, binding_workers: int = 16,
                 pod_filter: Callable[[Pod], bool] | None = None, metrics: SchedulerMetrics | None = None,
                 node_filter: Callable[[Any], bool] | None = None, record_attempts: bool = False) -> None:
        self.client = client
        self.config = config or default_configuration()
        self.clock: Clock = clock or RealClock()
        self.informers = informers or InformerFactory(client)
        self.rng = random.Random(seed)
        self.cache = Cache()
        self.snapshot = Snapshot(self.cache.table.cols)
        self.metrics = metrics or SchedulerMetrics()
        self.pod_filter = pod_filter
        # Which nodes this scheduler may place pods on (None: all). Pods bound to other nodes
        # are kept on node-less "ghost" NodeInfos, which are never candidates.
        self.node_filter = node_filter
        # One recorder per profile: events name the profile's scheduler as their source.
        self.recorders = {p.scheduler_name: EventRecorder(client, self.clock, enabled=record_events,
                                                          component=p.scheduler_name)
                          for p in self.config.profiles}
        self.events = self.recorders[self.config.profiles[0].scheduler_name]
        # Threaded, events go out from a background thread, as upstream's broadcaster: a remote
        # API server's round trip stays off the scheduling thread.
        self._event_writer: BackgroundWriter | None = None
        if threaded and record_events:
            self._event_writer = BackgroundWriter(client)
            for rec in self.recorders.values():
                rec.client = self._event_writer
        self.explain_enabled = explain
        self.explanations: dict[str, Explanation] = {}
        # Attempts per pod key, for reports (simulation); off by default: a long-running
        # scheduler would keep an entry for every pod it ever saw.
        self.record_attempts = record_attempts
        self.attempts: dict[str, int] = {}
        self.profiles: dict[str, Framework] = {}
        for prof in self.config.profiles:
            fw = Framework(prof, registry, client=client, informers=self.informers, clock=self.clock,
                           event_recorder=self.recorders[prof.scheduler_name], vectorize=vectorize,
                           parallelism=int(self.config.parallelism),
                           percentage_of_nodes_to_score=int(self.config.percentage_of_nodes_to_score))
            fw.set_snapshot(self.snapshot)
            fw.rng = self.rng
            fw.metrics = self.metrics
            self.profiles[prof.scheduler_name] = fw
        first = next(iter(self.profiles.values()))
        qs = first.queue_sort()
        sort_key = qs.sort_key if type(qs).sort_key is not QueueSortPlugin.sort_key else None
        hints: dict[str, dict[ClusterEvent, list[QueueingHintEntry]]] = {}
        self._volume_interest = False
        for name, fw in self.profiles.items():
            hm: dict[ClusterEvent, list[QueueingHintEntry]] = {}
            for plugin, evs in fw.events_to_register().items():
                for e in evs:
                    hm.setdefault(e.event, []).append(QueueingHintEntry(plugin, e.hint))
                    if e.event.resource in _VOLUME_KINDS:
                        self._volume_interest = True
            hints[name] = hm
        self.queue = PriorityQueue(
            self.clock, first.less, sort_key,
            pre_enqueue=lambda pod: self.profiles[pod.scheduler_name].run_pre_enqueue(pod),
            hints=hints,
            initial_backoff=float(self.config.pod_initial_backoff_seconds),
            max_backoff=float(self.config.pod_max_backoff_seconds))
        for fw in self.profiles.values():
            fw.nominator = self.queue.nominator
            fw.pod_activator = self.queue.activate
        self.algorithm = Algorithm(self.rng)
        self.threaded = threaded
        self._binding_tasks: deque[BindingTask] = deque()
        self._completed: _queue.SimpleQueue[BindingTask] = _queue.SimpleQueue()
        self._executor: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=binding_workers, thread_name_prefix="binding") if threaded else None)
        self._inflight_bindings = 0
        self._wake = threading.Event()
        self.scheduled = 0
        self.failed_attempts = 0
        self.metrics_observer: Callable[[float], None] | None = None
        add_all_event_handlers(self)
        self._attempt_counters: dict[tuple[str, str], Any] = {}
        # scheduler_pending_pods{queue}: computed when scraped.
        q = self.queue
        pending = self.metrics.pending_pods
        pending.labels("active").set_function(q.active_count)
        pending.labels("backoff").set_function(q.backoff_count)
        # (list() copies the dict in one step: a scrape from another thread never sees it change.)
        pending.labels("unschedulable").set_function(
            lambda: sum(1 for x in list(q.unschedulable.values()) if not x.gated))
        pending.labels("gated").set_function(lambda: sum(1 for x in list(q.unschedulable.values()) if x.gated))

    # ---------------------------------------------------------------- who we schedule

    def _recorder(self, pod: Pod) -> EventRecorder:
        return self.recorders.get(pod.scheduler_name, self.events)

    def responsible_for(self, pod: Pod) -> bool:
        if pod.scheduler_name not in self.profiles:
            return False
        return self.pod_filter is None or self.pod_filter(pod)

    def watches(self, kind: str) -> bool:
        return kind in _VOLUME_KINDS and self._volume_interest

    # ---------------------------------------------------------------- the scheduling cycle

    def schedule_one(self) -> bool:
        """Pop one pod and run its scheduling cycle. False when no pod was ready."""
        qpi = self.queue.pop()
        if qpi is None:
            return False
        pod = qpi.pod
        fw = self.profiles.get(pod.scheduler_name)
        if fw is None or self._skip(pod):
            self.queue.done(pod)
            return True
        start = time.perf_counter()
        if self.record_attempts:
            self.attempts[pod.key] = qpi.attempts
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        explain = Explanation() if self.explain_enabled else None
        try:
            result = self.algorithm.schedule_pod(fw, state, pod, self.snapshot, explain)
        except FitError as fe:
            # Upstream: clearNominatedNode unless a PostFilter plugin ran (then its result, if any).
            nominating: PostFilterResult | None = None if fw.has_post_filter_plugins() else CLEAR_NOMINATION
            if fw.has_post_filter_plugins():
                res, st = fw.run_post_filter(state, pod, fe.diagnosis)
                if st.code != Code.SUCCESS or res is None or not res.nominated_node_name:
                    fe.diagnosis.post_filter_msg = st.message()
                if res is not None and res.mode != PostFilterResult.MODE_NOOP:
                    nominating = res
            if explain is not None:
                for p in fw.points["postFilter"]:
                    decision = getattr(p, "last_decision", None)
                    if decision is not None and hasattr(decision, "to_dict"):
                        explain.preemption = decision.to_dict()
            qpi.unschedulable_plugins = set(fe.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(fe.diagnosis.pending_plugins)
            msg = str(fe)
            if explain is not None:
                explain.message = msg
                self.explanations[pod.key] = explain
            self._record_attempt(fw, "unschedulable", start)
            self._handle_failure(fw, qpi, Status(Code.UNSCHEDULABLE, msg), REASON_UNSCHEDULABLE, nominating)
            return True
        except (SchedulingError, NoNodesAvailable) as e:
            msg = str(e)
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            if explain is not None:
                explain.message = msg
                self.explanations[pod.key] = explain
            if isinstance(e, NoNodesAvailable):
                # Upstream: UnschedulableAndUnresolvable (reason Unschedulable), no rejector plugin.
                self._record_attempt(fw, "unschedulable", start)
                self._handle_failure(fw, qpi, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg),
                                     REASON_UNSCHEDULABLE, CLEAR_NOMINATION)
                return True
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, Status.as_error(msg), REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)
            return True
        if explain is not None:
            self.explanations[pod.key] = explain
        host = result.suggested_host
        assumed = pod_with_node(pod, host)
        try:
            self.cache.assume_pod(assumed)
        except CacheError as e:
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, Status.as_error(str(e)), REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)
            return True
        self.queue.nominator.delete(pod)
        st = fw.run_reserve(state, assumed, host)
        if st is not None:
            fw.run_unreserve(state, assumed, host)
            self._forget(assumed)
            self._fail_after_assume(fw, qpi, st, start, host)
            return True
        st = fw.run_permit(state, assumed, host)
        if st is not None and st.code != Code.WAIT:
            fw.run_unreserve(state, assumed, host)
            self._forget(assumed)
            self._fail_after_assume(fw, qpi, st, start, host)
            return True
        self._record_attempt(fw, "scheduled", start)
        task = BindingTask(fw, state, qpi, assumed, host, start)
        if self._executor is not None:
            self._inflight_bindings += 1
            self._executor.submit(self._run_binding_in_thread, task)
        else:
            self._binding_tasks.append(task)
        return True

    def _skip(self, pod: Pod) -> bool:
        if pod.deletion_timestamp is not None:
            self._recorder(pod).event(pod, "Warning", "FailedScheduling", "Scheduling",
                              f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            return True
        return self.cache.is_assumed(pod)

    def _forget(self, assumed: Pod) -> None:
        try:
            self.cache.forget_pod(assumed)
        except CacheError as e:
            log.error("scheduler cache forget_pod failed: %s", e)

    def _fail_after_assume(self, fw: Framework, qpi: QueuedPodInfo, st: Status, start: float,
                           host: str = "") -> None:
        if st.is_rejected():
            qpi.unschedulable_plugins = {st.plugin} if st.plugin and st.code != Code.PENDING else set()
            qpi.pending_plugins = {st.plugin} if st.plugin and st.code == Code.PENDING else set()
            self._record_attempt(fw, "unschedulable", start)
            # Upstream wraps a Reserve/Permit rejection in a FitError over the one chosen node.
            d = Diagnosis()
            d.node_to_status[host] = st
            st = Status(st.code, fit_error_message(1, d), plugin=st.plugin)
            self._handle_failure(fw, qpi, st, REASON_UNSCHEDULABLE, CLEAR_NOMINATION)
        else:
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, st, REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)

    def _record_attempt(self, fw: Framework, result: str, start: float) -> None:
        key = (result, fw.profile_name)
        c = self._attempt_counters.get(key)
        if c is None:
            c = self._attempt_counters[key] = (self.metrics.schedule_attempts.labels(result, fw.profile_name),
                                               self.metrics.attempt_duration.labels(result, fw.profile_name))
        d = time.perf_counter() - start
        c[0].inc()
        c[1].observe(d)
        if self.metrics_observer is not None:
            self.metrics_observer(d)
        if result != "scheduled":
            self.failed_attempts += 1

    # ---------------------------------------------------------------- the binding cycle

    def _binding_cycle(self, task: BindingTask) -> Status | None:
        fw, state, pod, host = task.fw, task.state, task.assumed, task.host
        st = fw.wait_on_permit_result(pod)
        if st is not None:
            return st
        task.permit_passed = True
        pf = fw.run_pre_bind_pre_flights(state, pod, host)
        if pf is not None and pf.code not in (Code.SUCCESS, Code.SKIP):
            return pf
        if pf is None:
            st = fw.run_pre_bind(state, pod, host)
            if st is not None:
                return st
        st = fw.run_bind(state, pod, host)
        if st is not None:
            return st
        fw.run_post_bind(state, pod, host)
        return None

    def _run_binding_in_thread(self, task: BindingTask) -> None:
        try:
            wp = task.fw.get_waiting_pod(task.assumed.uid or task.assumed.key)
            while wp is not None and not wp.resolved:
                wp.wait(0.5)
                now = self.clock.now()
                wp.check_timeout(now)
            task.status = self._binding_cycle(task)
        except Exception as e:  # a plugin's crash fails this binding, not the scheduler
            log.exception("binding cycle crashed")
            task.status = Status.as_error(e)
        task.done = True
        self._completed.put(task)
        self._wake.set()

    def run_bindings(self) -> int:
        """Single-threaded mode: run the binding cycles whose pods are not waiting at Permit."""
        n = 0
        tasks = self._binding_tasks
        for _ in range(len(tasks)):
            task = tasks.popleft()
            wp = task.fw.get_waiting_pod(task.assumed.uid or task.assumed.key)
            if wp is not None and not wp.resolved:
                tasks.append(task)
                continue
            try:
                task.status = self._binding_cycle(task)
            except Exception as e:
                log.exception("binding cycle crashed")
                task.status = Status.as_error(e)
            self._complete_binding(task)
            n += 1
        return n

    def _drain_completed(self) -> int:
        n = 0
        while True:
            try:
                task = self._completed.get_nowait()
            except _queue.Empty:
                return n
            self._inflight_bindings -= 1
            self._complete_binding(task)
            n += 1

    def _complete_binding(self, task: BindingTask) -> None:
        pod = task.assumed
        if task.status is None or task.permit_passed:
            # Upstream calls Done once WaitOnPermit passes; a pod rejected while waiting is still
            # in flight, so the events seen meanwhile decide where it goes back to.
            self.queue.done(pod)
        if task.status is None:
            self.cache.finish_binding(pod)
            self.scheduled += 1
            self._recorder(pod).event(task.qpi.pod, "Normal", "Scheduled", "Binding",
                              f"Successfully assigned {pod.namespace}/{pod.name} to {task.host}")
            return
        st = task.status
        task.fw.run_unreserve(task.state, pod, task.host)
        self._forget(pod)
        qpi = task.qpi
        err = st.error
        if isinstance(err, BindingConflict):
            # The conflict resolver refused: another instance took the room. Fail fast, retry now,
            # with no backoff penalty: the informer shows the other binding by the next attempt.
            self.metrics.binding_conflicts.inc()
            self._recorder(pod).event(qpi.pod, "Warning", "FailedScheduling", "Scheduling",
                              f"Binding rejected: {err.message}")
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self.queue.requeue_after_conflict(qpi)
            return
        if isinstance(err, ApiError):
            self.metrics.binding_errors.inc()
        if st.is_rejected():
            # Deferred and without the pod itself, as upstream (its own hints would requeue it).
            self._fail_after_assume(task.fw, qpi, st, task.start, task.host)
            others = [q for q in self.queue.unschedulable.values() if q is not qpi]
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None, others)
            return
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)
        self._fail_after_assume(task.fw, qpi, st, task.start, task.host)

    # ---------------------------------------------------------------- failures

    def _handle_failure(self, fw: Framework, qpi: QueuedPodInfo, st: Status, reason: str,
                        nominating: PostFilterResult | None) -> None:
        pod = qpi.pod
        msg = st.message()
        self._recorder(pod).event(pod, "Warning", "FailedScheduling", "Scheduling", msg)
        inf = self.informers.informers.get("Pod")
        cached = inf.get(pod.key) if inf is not None else None
        nominated = ""
        if cached is None or (cached.uid and pod.uid and cached.uid != pod.uid):
            # Deleted meanwhile: nothing to requeue.
            self.queue.done(pod)
            return
        assert isinstance(cached, Pod)
        if cached.node_name:
            self.queue.done(pod)
            return
        if not self.responsible_for(cached):
            # Handed to another scheduler meanwhile (another instance): its verdict, not ours.
            self.queue.done(pod)
            return
        if cached is not pod:
            qpi.pod_info = PodInfo(cached)
        self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
        if nominating is not None and nominating.mode == PostFilterResult.MODE_OVERRIDE:
            # Reserve (or clear) the nominated node in memory now, before the status patch
            # comes back through the informer.
            nominated = nominating.nominated_node_name
            if nominated:
                self.queue.nominator.add(qpi.pod_info, nominated)
            else:
                self.queue.nominator.delete(qpi.pod)
        self._update_pod_status(cached, reason, msg, nominated, nominating is not None)

    def _update_pod_status(self, pod: Pod, reason: str, message: str, nominated: str, set_nominated: bool) -> None:
        cond = pod.condition("PodScheduled")
        same = cond is not None and cond.get("status") == "False" and cond.get("reason") == reason and \
            cond.get("message") == message
        nn_change = set_nominated and pod.nominated_node_name != nominated
        if same and not nn_change:
            return
        patch: dict[str, Any] = {"status": {}}
        if not same:
            ltt = cond.get("lastTransitionTime") if cond is not None and cond.get("status") == "False" else None
            patch["status"]["conditions"] = [{
                "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": None, "lastTransitionTime": ltt or format_time(self.clock.now())}]
        if nn_change:
            patch["status"]["nominatedNodeName"] = nominated or None
        try:
            self.client.patch("Pod", pod.namespace, pod.name, patch, "application/strategic-merge-patch+json",
                              "status")
        except ApiError as e:
            log.debug("updating the status of %s failed: %s", pod.key, e)

    # ---------------------------------------------------------------- loops

    def next_wakeup(self) -> float | None:
        times = [t for t in (self.queue.next_wakeup(), *(fw.next_permit_deadline() for fw in self.profiles.values()))
                 if t is not None]
        return min(times) if times else None

    def _timers(self) -> None:
        now = self.clock.now()
        for fw in self.profiles.values():
            if fw.waiting_pods:
                fw.check_permit_timeouts(now)
        self.queue.flush_backoff_completed()
        self.queue.flush_unschedulable_leftover()

    def step(self) -> bool:
        """Single-threaded: take informer events, fire timers, run one scheduling cycle and the
        ready binding cycles. True if anything happened."""
        progressed = self.informers.poll() > 0
        self._timers()
        if self._binding_tasks and self.run_bindings():
            progressed = True
        if self.schedule_one():
            progressed = True
            if self._binding_tasks:
                self.run_bindings()
        return progressed

    def idle(self) -> bool:
        """Nothing to do without time passing or the cluster changing."""
        if self.informers.pending():
            return False
        if self.queue.has_poppable():
            return False
        return not any(
            (wp := t.fw.get_waiting_pod(t.assumed.uid or t.assumed.key)) is None or wp.resolved
            for t in self._binding_tasks)

    def run_until_idle(self, max_steps: int | None = None) -> int:
        """Run steps until idle (does not advance the clock). Returns the steps taken."""
        n = 0
        while max_steps is None or n < max_steps:
            if not self.step() and self.idle():
                return n
            n += 1
        return n

    def sync(self) -> None:
        """Single-threaded: list everything and deliver it (informers synced)."""
        self.informers.poll()

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Threaded mode: until ``stop`` is set."""
        self.informers.notify = self._wake.set
        for inf in self.informers.informers.values():
            inf.reflector.notify = self._wake.set
        self.informers.start()
        deadline = time.monotonic() + 60
        while not all(inf.reflector.listed for inf in self.informers.informers.values()):
            if stop.is_set() or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if ready is not None:
            ready.set()
        try:
            while not stop.is_set():
                self._wake.clear()
                self.informers.process()
                self._drain_completed()
                self._timers()
                worked = False
                for _ in range(64):
                    if not self.schedule_one():
                        break
                    worked = True
                self._drain_completed()
                if worked:
                    continue
                nxt = self.next_wakeup()
                timeout = 1.0 if nxt is None else max(0.0, min(1.0, nxt - self.clock.now()))
                self._wake.wait(timeout)
        finally:
            self.informers.stop()
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._drain_completed()
            if self._event_writer is not None:
                self._event_writer.close()
