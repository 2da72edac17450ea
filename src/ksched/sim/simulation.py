"""A simulated cluster on a virtual clock: the embedded API store and controllers, the scheduler
(single-threaded, deterministic for a seed), a simulated kubelet; ``run`` advances time from one timer to the next
until nothing more can change.

The kubelets hold their Lease renewals in memory (``lazy_leases``, ``ksched.kubelet.nodestatus``)
and the simulation writes them where the eager path would have had them read: when the clock
reaches a pass of the node lifecycle controller (right where the eager renewals are written),
before a timeline action and at the end of a run; the controller's pass also asks for them
itself (a ``progress`` callback, which looks at pods, may find older Leases). ``lazy_leases=False``
is the reference path (a write per renewal). ``admitted_index=False``: the kubelets look up each
node's pods in their informer at every use rather than keeping them (``ksched.kubelet.admitted``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import ApiError
from ksched.api.meta import KubeObject
from ksched.client.informer import InformerFactory
from ksched.clock import DEFAULT_EPOCH, VirtualClock
from ksched.kubelet.dradriver import DRADriver
from ksched.kubelet.evictionapi import EvictionConfig
from ksched.kubelet.fake import FakeKubelet
from ksched.scheduler.config import SchedulerConfiguration
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.gcpacing import fewer_collections
from ksched.sim.loading import LOAD_ORDER, LoadReport, load_objects

__all__ = ["DELIVERED_HISTORY", "LOAD_ORDER", "Simulation", "SimulationResult"]

# Changes of a kind its watches have all taken that the store's watch history still keeps
# (``Store(delivered_history=...)``).
DELIVERED_HISTORY = 1000


@dataclass(slots=True)
class SimulationResult:
    virtual_seconds: float
    steps: int
    scheduled: int
    attempts_failed: int
    stopped_by_limit: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Simulation:
    def __init__(self, config: SchedulerConfiguration | None = None, *, seed: int = 0, explain: bool = False,
                 kubelet: bool = True, start: float = DEFAULT_EPOCH, record_events: bool = True,
                 vectorize: bool = True, conflict_resolver: bool = True, batching: bool = True,
                 disable_admission_plugins: Iterable[str] = (),
                 eviction_configs: list[EvictionConfig] | None = None, lazy_leases: bool = True,
                 admitted_index: bool = True) -> None:
        self.clock = VirtualClock(start)
        # generateName suffixes (the controllers' pods) come from the seed too.
        # The watch history keeps what its watches may still resume from (they never do: the
        # informers list and watch at once), not every version of every pod.
        self.cluster = EmbeddedCluster(self.clock, auto_create_namespaces=True, conflict_resolver=conflict_resolver,
                                       disable_admission_plugins=disable_admission_plugins, name_seed=seed,
                                       delivered_history=DELIVERED_HISTORY)
        self.store = self.cluster.store
        self.client = self.cluster.client
        self.informers = InformerFactory(self.client)
        self.scheduler = Scheduler(self.client, config, clock=self.clock, informers=self.informers, seed=seed,
                                   explain=explain, record_events=record_events, vectorize=vectorize,
                                   record_attempts=True, batching=batching)
        self.kubelet = FakeKubelet(self.client, self.informers, self.clock, eviction_configs=eviction_configs,
                                   lazy_leases=lazy_leases, admitted_index=admitted_index) if kubelet else None
        self._node_lifecycle: Any = next((c for c in self.cluster.controllers.controllers
                                          if c.name == "node-lifecycle-controller"), None)
        if self.kubelet is not None and lazy_leases and self._node_lifecycle is not None:
            self._node_lifecycle.before_monitor = self._flush_leases
        self.last_load = LoadReport()
        # The node side of DRA: publishes the nodes' devices as ResourceSlices.
        self.dra_driver = DRADriver(self.client, self.informers, self.clock) if kubelet else None
        self.timeline: Any = None  # a ksched.sim.timeline.TimelineRunner
        self.history: Any = None  # its ksched.sim.timeline.History

    def use_timeline(self, actions: list[Any]) -> None:
        """Run a scenario timeline (``ksched.sim.timeline``) from now on, recording its history."""
        from ksched.sim.timeline import History, TimelineRunner

        self.history = History(self.clock, self.clock.now())
        kubelet = self.kubelet
        self.history.watch(self.client, kubelet.since_start if kubelet is not None else (lambda p: None))
        self.timeline = TimelineRunner(self, actions, self.history)

    def load(self, objects: Iterable[KubeObject | dict[str, Any]],
             existing: Iterable[int] = (), *, owned: bool = False,
             validated: bool = False) -> list[tuple[int, ApiError]]:
        """Create objects in dependency order (``ksched.sim.loading``); ``existing``: indices of
        the objects exported from another cluster; ``owned``: the caller hands their manifests
        over (no copy; the store may change them); ``validated``: they passed validation as they
        are (the loader's ``build_objects``), so a pod is validated again only where admission may
        have made it invalid. Returns (index in the input, error) for each
        refused; :attr:`last_load` has the whole report. The controllers start once everything is
        loaded, so they adopt what a dump holds (bound pods of its ReplicaSets, its revisions)
        rather than making their own."""
        with self.cluster.controllers.held(), fewer_collections():
            self.last_load = load_objects(self.store, list(objects), set(existing), owned=owned,
                                          validated=validated)
        return self.last_load.errors

    def _next_timer(self) -> float | None:
        cands = [self.scheduler.queue.next_backoff_wakeup(), self.store.next_deletion_deadline(),
                 self.cluster.next_wakeup(), self.scheduler.next_binding_retry()]
        if self.dra_driver is not None:
            cands.append(self.dra_driver.next_wakeup())
        for fw in self.scheduler.profiles.values():
            cands.append(fw.next_permit_deadline())
        if self.kubelet is not None:
            cands.append(self.kubelet.next_wakeup())
        if self.timeline is not None:
            cands.append(self.timeline.next_time())
        times = [t for t in cands if t is not None]
        return min(times) if times else None

    def _resync_node_lifecycle(self) -> None:
        """While a failed node still shows Ready, the node lifecycle controller passes on each
        heartbeat tick, as its 5 s loop would (its passes otherwise follow changes only)."""
        c = self._node_lifecycle
        if c is not None:
            c.resync()

    def _flush_leases(self) -> bool:
        """Write the Lease renewals the kubelets hold (lazy); True when any was written."""
        return self.kubelet is not None and self.kubelet.heartbeats.flush() > 0

    def _leases_read_now(self) -> bool:
        """Whether a pass of the node lifecycle controller (the Leases' reader) is due now."""
        c = self._node_lifecycle
        due = c.monitor_due() if c is not None else None
        return due is not None and due <= self.clock.now()

    def run(self, max_seconds: float = 7 * 24 * 3600.0,
            progress: Callable[[Simulation], None] | None = None) -> SimulationResult:
        """Run until nothing more can change: no pod ready to schedule, no binding or start-up
        pending, no timer left but the periodic retry of unschedulable pods (which, in a cluster
        nothing else changes, gives the same answer again)."""
        with fewer_collections():
            return self._run(max_seconds, progress)

    def _run(self, max_seconds: float, progress: Callable[[Simulation], None] | None) -> SimulationResult:
        start = self.clock.now()
        last_change = start
        steps = 0
        limited = False
        sched = self.scheduler
        controllers = self.cluster.controllers
        while True:
            rv = self.store.resource_version
            if self.timeline is not None:
                t = self.timeline.next_time()
                if t is not None and t <= self.clock.now() + 1e-9:
                    with controllers.held(settle=lambda: False):
                        self._flush_leases()  # the eager path wrote them before this turn
                    rv = self.store.resource_version
                self.timeline.apply_due()
            # The controllers react once to all the bindings of this instant, and once to all the
            # pod starts and stops, rather than after each write: the same outcome at the same
            # virtual time, without a ReplicaSet re-counting its pods once per pod. A block that
            # wrote nothing settles nothing (as no write would), so a sync due now still runs
            # after the kubelet's step, as it would without the blocks.
            changed = False
            if self.dra_driver is not None:
                self.informers.poll()
                self.dra_driver.step()
            before = self.store.resource_version
            with controllers.held(settle=lambda rv=before: self.store.resource_version != rv):
                steps += sched.run_until_idle()
            if progress is not None:
                progress(self)
            before = self.store.resource_version
            with controllers.held(settle=lambda rv=before: self.store.resource_version != rv):
                if self.kubelet is not None and self.kubelet.step():
                    changed = True
                if self.store.finalize_expired():
                    changed = True
            if controllers.settle():
                changed = True
            if self.dra_driver is not None and self.dra_driver.step():
                changed = True
            if self.store.resource_version != rv:
                last_change = self.clock.now()
                changed = True
            if self.history is not None:
                self.history.poll(self)
            if changed or not sched.idle():
                continue
            t = self._next_timer()
            if t is None:
                break
            if t - start > max_seconds:
                limited = True
                break
            self.clock.advance_to(t)
            if self.kubelet is not None:
                # Live nodes renew their leases before anyone looks at them (heartbeats are not
                # changes of the cluster's state: they do not lengthen the simulated time).
                with self.cluster.controllers.held(settle=lambda: False):
                    self.kubelet.heartbeat()  # the controllers look at the next turn, counted there
                    if self._leases_read_now():
                        self._flush_leases()
                if self.kubelet.heartbeats.unnoticed(self.kubelet.node):
                    self._resync_node_lifecycle()
        with controllers.held(settle=lambda: False):
            self._flush_leases()  # what a reader of the store finds after the run
        if self.history is not None:
            self.history.poll(self)
            self.history.sample(self)
        # The simulated time is until the cluster last changed: a controller's timer that fires
        # and finds nothing to do (a Deployment's progress check) does not lengthen it.
        return SimulationResult(last_change - start, steps, sched.scheduled, sched.failed_attempts, limited)
