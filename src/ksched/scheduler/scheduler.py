"""The scheduler: profiles, cache, queue and the scheduling loop (upstream's scheduler.go; the
cycles themselves are in schedule_one.py, the informer handlers in eventhandlers.py).

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
from typing import Any

from ksched.api.pod import Pod
from ksched.client.informer import InformerFactory
from ksched.clock import Clock, RealClock
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.config import SchedulerConfiguration, default_configuration
from ksched.scheduler.eventhandlers import add_all_event_handlers
from ksched.scheduler.explanation import Explanation
from ksched.scheduler.framework.events import ClusterEvent
from ksched.scheduler.framework.interface import QueueSortPlugin
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.queue.scheduling_queue import PriorityQueue, QueueingHintEntry
from ksched.scheduler.recorder import BackgroundWriter, EventRecorder
from ksched.scheduler.schedule_one import Algorithm, BindingTask, ScheduleOne
from ksched.stepping import run_until_idle

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)

_VOLUME_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")
_DRA_KINDS = ("ResourceClaim", "ResourceSlice", "DeviceClass")


class Scheduler(ScheduleOne):
    def __init__(self, client: Any, config: SchedulerConfiguration | None = None, *,
                 clock: Clock | None = None, informers: InformerFactory | None = None, seed: int = 0,
                 vectorize: bool = True, registry: Registry | None = None, explain: bool = False,
                 record_events: bool = True, threaded: bool = False, binding_workers: int = 16,
                 pod_filter: Callable[[Pod], bool] | None = None, metrics: SchedulerMetrics | None = None,
                 node_filter: Callable[[Any], bool] | None = None, record_attempts: bool = False,
                 batching: bool = True) -> None:
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
                           percentage_of_nodes_to_score=int(self.config.percentage_of_nodes_to_score),
                           batching=batching)
            fw.set_snapshot(self.snapshot)
            fw.rng = self.rng
            fw.metrics = self.metrics
            self.profiles[prof.scheduler_name] = fw
        first = next(iter(self.profiles.values()))
        qs = first.queue_sort()
        sort_key = qs.sort_key if type(qs).sort_key is not QueueSortPlugin.sort_key else None
        hints: dict[str, dict[ClusterEvent, list[QueueingHintEntry]]] = {}
        self._volume_interest = False
        self._dra_interest = False
        for name, fw in self.profiles.items():
            hm: dict[ClusterEvent, list[QueueingHintEntry]] = {}
            for plugin, evs in fw.events_to_register().items():
                for e in evs:
                    hm.setdefault(e.event, []).append(QueueingHintEntry(plugin, e.hint))
                    if e.event.resource in _VOLUME_KINDS:
                        self._volume_interest = True
                    if e.event.resource in _DRA_KINDS:
                        self._dra_interest = True
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
        self._stopping: threading.Event | None = None  # threaded mode: run()'s stop event
        self._completed: _queue.SimpleQueue[BindingTask] = _queue.SimpleQueue()
        # Pod key -> the nominatedNodeName its binding cycle wrote (NominatedNodeNameForExpectation).
        self._nominations_written: dict[str, str] = {}
        self._executor: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=binding_workers, thread_name_prefix="binding") if threaded else None)
        self._wake = threading.Event()
        # Set by run() once the informers have listed and the handlers took the initial objects
        # (the readyz check sched-handler-sync).
        self.handlers_synced = threading.Event()
        self.scheduled = 0
        self.failed_attempts = 0
        self.metrics_observer: Callable[[float], None] | None = None
        add_all_event_handlers(self)
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
        return (kind in _VOLUME_KINDS and self._volume_interest) or (kind in _DRA_KINDS and self._dra_interest)

    # ---------------------------------------------------------------- loops

    def next_wakeup(self) -> float | None:
        times = [t for t in (self.queue.next_wakeup(), self.next_binding_retry(),
                             *(fw.next_permit_deadline() for fw in self.profiles.values()))
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
        now = self.clock.now()
        return not any(
            ((wp := t.fw.get_waiting_pod(t.assumed.uid or t.assumed.key)) is None or wp.resolved)
            and (t.retry_at is None or t.retry_at <= now)
            for t in self._binding_tasks)

    def run_until_idle(self, max_steps: int | None = None) -> int:
        """Run steps until idle (does not advance the clock). Returns the steps taken."""
        return run_until_idle(self.step, self.idle, max_steps)

    def sync(self) -> None:
        """Single-threaded: list everything and deliver it (informers synced)."""
        self.informers.poll()

    def wake(self) -> None:
        """Wake the threaded loop (something changed that it should look at now)."""
        self._wake.set()

    def _listed(self) -> bool:
        return all(inf.reflector.listed for inf in self.informers.informers.values())

    def run(self, stop: threading.Event, ready: threading.Event | None = None,
            schedule: threading.Event | None = None) -> None:
        """Threaded mode: until ``stop`` is set. ``ready`` is set once the informers have listed
        (or after 60 s); ``handlers_synced`` once the handlers have taken the initial objects.
        With ``schedule``, pods are scheduled only while it is set: until then the loop keeps
        the cache and queue up to date (a leader-election standby), as upstream's informers
        run before the lease is won."""
        self._stopping = stop
        self.informers.notify = self._wake.set
        for inf in self.informers.informers.values():
            inf.reflector.notify = self._wake.set
        self.informers.start()
        deadline = time.monotonic() + 60
        while not self._listed():
            if stop.is_set() or time.monotonic() > deadline:
                break
            # An informer whose list is done delivers it to the handlers now, while the others
            # still list (as each of upstream's informers runs its handlers on its own); no pod
            # is scheduled before every list is in.
            self._wake.clear()
            self.informers.process()
            self._wake.wait(0.01)
        if ready is not None:
            ready.set()
        try:
            while not stop.is_set():
                self._wake.clear()
                # Listed before this delivery: the initial objects are in it (a reflector queues
                # its list before it says it has listed).
                listed = self.handlers_synced.is_set() or self._listed()
                self.informers.process()
                if listed and not self.handlers_synced.is_set():
                    self.handlers_synced.set()
                self._drain_completed()
                self._timers()
                worked = False
                if schedule is None or schedule.is_set():
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
