"""Scheduler instances: registration and heartbeat through a coordination.k8s.io/v1 Lease per
instance, and the Scheduler an instance runs (only the pods dispatched to it, optionally only
the nodes of its partition).

An instance ``NAME`` holds the Lease ``ksched-instance-NAME`` (in ``kube-system`` by default)::

    metadata:
      labels:                      # what the dispatcher's policy matches
        ksched.io/role: scheduler-instance
        ksched.io/instance: NAME
        gpu: "true"                # the instance's own labels
      annotations:
        ksched.io/partition-label: topology.ksched.io/partition   # with a partition only
        ksched.io/partition: a
        ksched.io/stats: '{"scheduled": 812, "attempts": 840, "conflicts": 9}'
    spec: {holderIdentity: NAME@host_pid, leaseDurationSeconds: 15, renewTime: ...}

It renews ``renewTime`` every third of the lease duration. A clean shutdown releases the
Lease (empty holder, as client-go's ReleaseOnCancel), so the dispatcher hands the instance's
pods to the others at once instead of waiting for the lease to expire.

So that several instances reach one scheduler's outcome (docs/multi-scheduler.md), an instance
also: keeps the nominations of the pods of its profiles that other instances hold (the room a
preemption made stays reserved; ``ksched.scheduler.eventhandlers``); holds back its queue while
another instance has a pod of higher priority still to try (:class:`PriorityBarrier`); and
evicts the preemption victims a PDB covers instead of deleting them
(:func:`evict_within_budgets`), so the API server charges each budget once.

Divergences from upstream (which has no instances): the barrier and the eviction of victims
are ksched's own; upstream's preemption deletes its victims.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError, Conflict, NotFound
from ksched.api.lease import Lease
from ksched.api.meta import format_micro_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock, RealClock
from ksched.scheduler.config import SchedulerConfiguration
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption
from ksched.scheduler.preemption import Candidate, filter_pods_with_pdb_violation, pdb_selects_pod
from ksched.scheduler.runner import guarded
from ksched.scheduler.scheduler import Scheduler

__all__ = [
    "DEFAULT_LEASE_NAMESPACE",
    "GROUP_LABEL",
    "INSTANCE_ANNOTATION",
    "INSTANCE_LABEL",
    "LEASE_PREFIX",
    "PARTITION_ANNOTATION",
    "PARTITION_LABEL_ANNOTATION",
    "ROLE_LABEL",
    "ROLE_VALUE",
    "STATS_ANNOTATION",
    "InstanceInfo",
    "InstanceRegistration",
    "PriorityBarrier",
    "evict_within_budgets",
    "SchedulerInstance",
    "instance_from_lease",
    "instance_pod_filter",
    "lease_name",
    "partition_node_filter",
    "validate_instance_name",
]

log = logging.getLogger(__name__)

INSTANCE_ANNOTATION = "ksched.io/instance"  # on a pod: the instance it is dispatched to
GROUP_LABEL = "ksched.io/group"  # on a pod: pods of one group go to one instance
ROLE_LABEL = "ksched.io/role"
ROLE_VALUE = "scheduler-instance"
INSTANCE_LABEL = "ksched.io/instance"  # on a Lease: the instance's name
PARTITION_LABEL_ANNOTATION = "ksched.io/partition-label"
PARTITION_ANNOTATION = "ksched.io/partition"
STATS_ANNOTATION = "ksched.io/stats"
LEASE_PREFIX = "ksched-instance-"
DEFAULT_LEASE_NAMESPACE = "kube-system"

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_instance_name(name: str) -> str | None:
    """Why ``name`` cannot name an instance (it is a label value and part of a Lease name)."""
    if not name:
        return "an instance name is required"
    if len(name) > 63:
        return f"instance name {name!r} is longer than 63 characters"
    if not _NAME_RE.match(name):
        return (f"instance name {name!r} must consist of lower case alphanumeric characters or '-', and must "
                f"start and end with an alphanumeric character")
    return None


def lease_name(instance: str) -> str:
    return LEASE_PREFIX + instance


def instance_pod_filter(name: str) -> Callable[[Pod], bool]:
    """The unscheduled pods instance ``name`` takes: those dispatched to it."""

    def f(pod: Pod) -> bool:
        return pod.annotations.get(INSTANCE_ANNOTATION) == name

    return f


def partition_node_filter(label: str, value: str) -> Callable[[Any], bool]:
    """The nodes of one partition: ``label`` equals ``value``."""

    def f(node: Any) -> bool:
        return isinstance(node, Node) and node.labels.get(label) == value

    return f


def _first_attempt_pending(pod: Pod) -> bool:
    """Whether an unscheduled pod has yet to be tried: no PodScheduled condition (or only the
    SchedulingGated one the API server writes at creation, gates since removed) and no
    nominated node (a pod waiting for its preemption, or at Permit, has been tried)."""
    if pod.nominated_node_name or pod.scheduling_gates:
        return False
    cond = pod.condition("PodScheduled")
    return cond is None or cond.get("reason") == "SchedulingGated"


class PriorityBarrier:
    """The priority order of one scheduler, kept across instances.

    One scheduler never tries a pod while a pod of higher priority waits in its activeQ. An
    instance sees only its own queue, so without this it would bind its low-priority pods while
    another instance's high-priority pods wait their turn, and those would then preempt them.
    The barrier follows, through the instance's pod informer, the pods of its profiles
    dispatched to other instances that have not been tried yet (:func:`_first_attempt_pending`),
    and holds back the head of the instance's queue while one of them has a strictly higher
    priority. Pods of equal priority go on in parallel, so throughput is only lost at priority
    boundaries; the instance holding the highest untried pod is never held, so there is no
    deadlock. A retry (after backoff or a cluster event) is not waited for: only first attempts
    are visible in the API."""

    def __init__(self, name: str, scheduler_names: Iterable[str]) -> None:
        self.name = name
        self.scheduler_names = frozenset(scheduler_names)
        self._untried: dict[str, int] = {}  # pod key -> priority
        self._by_priority: Counter[int] = Counter()
        self._highest: int | None = None
        self.handler = EventHandler(self._add, self._update, self._delete, filter=self.untried_elsewhere)

    def untried_elsewhere(self, obj: Any) -> bool:
        """An unscheduled pod of our profiles, dispatched to another instance, not tried yet."""
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if not isinstance(obj, Pod) or obj.node_name or obj.is_terminal or obj.deletion_timestamp is not None:
            return False
        if obj.scheduler_name not in self.scheduler_names:
            return False
        owner = obj.annotations.get(INSTANCE_ANNOTATION, "")
        return bool(owner) and owner != self.name and _first_attempt_pending(obj)

    def _add(self, pod: Pod) -> None:
        self._delete(pod)
        prio = pod.priority
        self._untried[pod.key] = prio
        self._by_priority[prio] += 1
        if self._highest is None or prio > self._highest:
            self._highest = prio

    def _update(self, old: Pod, new: Pod) -> None:
        self._add(new)

    def _delete(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        prio = self._untried.pop(pod.key, None)
        if prio is None:
            return
        left = self._by_priority[prio] - 1
        if left:
            self._by_priority[prio] = left
            return
        del self._by_priority[prio]
        if prio == self._highest:
            self._highest = max(self._by_priority) if self._by_priority else None

    @property
    def highest(self) -> int | None:
        """The highest priority of the pods other instances have yet to try."""
        return self._highest

    def __len__(self) -> int:
        return len(self._untried)

    def holds(self, pod: Pod) -> bool:
        """Whether ``pod`` must wait: another instance has a pod of higher priority to try first."""
        h = self._highest
        return h is not None and h > pod.priority


def evict_within_budgets(plugin: DefaultPreemption) -> None:
    """Make ``plugin`` evict (``pods/eviction``) the victims it preempts within a PDB's budget.

    Upstream's preemption deletes its victims; it respects PDBs only through its dry run,
    against the PDB statuses it last saw. One scheduler sees its own preemptions in those
    statuses soon enough; instances preempting at the same moment could each spend the same
    last disruption a budget allows. Evicted instead, such a victim is charged to its budget by
    the API server atomically: the second eviction is refused (429), that preemption fails and
    its pod tries again on fresh statuses. Victims no PDB covers, and those the dry run
    already counted as violating one (no better candidate existed), are deleted as upstream."""
    executor = plugin.executor
    evaluator = plugin.evaluator

    def remove(c: Candidate, victim: Pod) -> None:
        client = executor.handle.client
        pdbs = evaluator.pdb_lister()
        if any(pdb_selects_pod(pdb, victim) for pdb in pdbs):
            violating, _ = filter_pods_with_pdb_violation([PodInfo(v) for v in c.victims.pods], pdbs)
            if all(pi.pod.key != victim.key for pi in violating):
                client.evict(victim.namespace, victim.name)
                return
        client.delete("Pod", victim.namespace, victim.name)

    executor.remove_victim = remove


class InstanceInfo:
    """What the dispatcher knows of an instance, read from its Lease."""

    __slots__ = ("holder", "labels", "lease_duration", "name", "partition", "partition_label", "released",
                 "renew_time", "resource_version", "stats")

    def __init__(self, name: str, labels: Mapping[str, str], holder: str, lease_duration: float,
                 renew_time: float | None, resource_version: str, partition_label: str = "",
                 partition: str = "", stats: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.labels = dict(labels)
        self.holder = holder
        self.lease_duration = lease_duration
        self.renew_time = renew_time
        self.resource_version = resource_version
        self.partition_label = partition_label
        self.partition = partition
        self.released = not holder
        self.stats = dict(stats or {})

    def __repr__(self) -> str:
        return f"InstanceInfo({self.name!r}, labels={self.labels!r}, holder={self.holder!r})"


def instance_from_lease(lease: Lease) -> InstanceInfo | None:
    """The instance a Lease registers, or None if it is not an instance Lease."""
    if lease.labels.get(ROLE_LABEL) != ROLE_VALUE:
        return None
    name = lease.labels.get(INSTANCE_LABEL) or ""
    if not name and lease.name.startswith(LEASE_PREFIX):
        name = lease.name[len(LEASE_PREFIX):]
    if not name:
        return None
    ann = lease.annotations
    stats: dict[str, Any] = {}
    raw_stats = ann.get(STATS_ANNOTATION)
    if raw_stats:
        try:
            parsed = json.loads(raw_stats)
            if isinstance(parsed, dict):
                stats = parsed
        except ValueError:
            pass
    labels = {k: v for k, v in lease.labels.items() if k not in (ROLE_LABEL, INSTANCE_LABEL)}
    return InstanceInfo(name, labels, lease.holder_identity, float(lease.lease_duration_seconds or 0),
                        lease.renew_time, lease.resource_version, ann.get(PARTITION_LABEL_ANNOTATION, ""),
                        ann.get(PARTITION_ANNOTATION, ""), stats)


def default_identity(name: str) -> str:
    return f"{name}@{socket.gethostname()}_{os.getpid()}"


class InstanceRegistration:
    """Registers instance ``name`` with a Lease and keeps it renewed.

    ``heartbeat()`` creates or renews the Lease and returns whether this process holds it; a Lease
    held by another live process (the same instance name started twice) is left alone, as
    leader election would. ``run(stop)`` heartbeats every ``renew_interval`` until ``stop`` and then
    releases the Lease."""

    def __init__(self, client: Any, name: str, *, labels: Mapping[str, str] | None = None,
                 namespace: str = DEFAULT_LEASE_NAMESPACE, lease_duration: float = 15.0,
                 renew_interval: float | None = None, identity: str | None = None, partition_label: str = "",
                 partition: str = "", clock: Clock | None = None,
                 stats: Callable[[], Mapping[str, Any]] | None = None) -> None:
        why = validate_instance_name(name)
        if why is not None:
            raise ValueError(why)
        if bool(partition_label) != bool(partition):
            raise ValueError("a partition needs both a node label and a value")
        self.client = client
        self.name = name
        self.labels = dict(labels or {})
        for k in (ROLE_LABEL, INSTANCE_LABEL):
            if k in self.labels:
                raise ValueError(f"label {k} is reserved")
        self.namespace = namespace
        self.lease_duration = max(1, round(lease_duration))
        self.renew_interval = renew_interval if renew_interval is not None else max(0.2, lease_duration / 3)
        self.identity = identity or default_identity(name)
        self.partition_label = partition_label
        self.partition = partition
        self.clock: Clock = clock or RealClock()
        self.stats = stats
        self.holding = False
        self.last_renew: float | None = None

    @property
    def lease_name(self) -> str:
        return lease_name(self.name)

    def _metadata(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        md = dict(base or {})
        md["name"] = self.lease_name
        md["namespace"] = self.namespace
        md["labels"] = {**self.labels, ROLE_LABEL: ROLE_VALUE, INSTANCE_LABEL: self.name}
        ann = {k: v for k, v in (md.get("annotations") or {}).items()
               if k not in (PARTITION_LABEL_ANNOTATION, PARTITION_ANNOTATION, STATS_ANNOTATION)}
        if self.partition_label:
            ann[PARTITION_LABEL_ANNOTATION] = self.partition_label
            ann[PARTITION_ANNOTATION] = self.partition
        if self.stats is not None:
            ann[STATS_ANNOTATION] = json.dumps(dict(self.stats()), sort_keys=True, separators=(",", ":"))
        md["annotations"] = ann
        return md

    def _spec(self, old: Lease | None, holder: str, duration: int) -> dict[str, Any]:
        now = format_micro_time(self.clock.now())
        ours = old is not None and old.holder_identity == self.identity
        spec_old = (old.raw.get("spec") or {}) if old is not None else {}
        transitions = 0 if old is None else old.lease_transitions + (0 if ours or not holder else 1)
        return {"holderIdentity": holder, "leaseDurationSeconds": duration,
                "acquireTime": spec_old.get("acquireTime") if ours and spec_old.get("acquireTime") else now,
                "renewTime": now, "leaseTransitions": transitions}

    def heartbeat(self) -> bool:
        """Create or renew the Lease. True when this process holds it afterwards."""
        try:
            ok = self._heartbeat()
        except ApiError as e:
            log.warning("instance %s: renewing lease %s/%s failed: %s", self.name, self.namespace,
                        self.lease_name, e)
            ok = False
        if ok:
            self.last_renew = self.clock.now()
        self.holding = ok
        return ok

    def _heartbeat(self) -> bool:
        for _ in range(3):
            try:
                lease = self.client.get("Lease", self.namespace, self.lease_name)
            except NotFound:
                try:
                    self.client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": self._metadata(),
                                        "spec": self._spec(None, self.identity, self.lease_duration)})
                    return True
                except (AlreadyExists, Conflict):
                    continue
            assert isinstance(lease, Lease)
            holder = lease.holder_identity
            if holder and holder != self.identity:
                renew = lease.renew_time or 0.0
                duration = lease.lease_duration_seconds or self.lease_duration
                if self.clock.now() < renew + duration:
                    log.warning("instance %s: lease %s/%s is held by %s", self.name, self.namespace,
                                self.lease_name, holder)
                    return False
            raw = {**lease.raw, "metadata": self._metadata(lease.raw.get("metadata")),
                   "spec": self._spec(lease, self.identity, self.lease_duration)}
            try:
                self.client.update(raw)
                return True
            except Conflict:
                continue  # written meanwhile (by us before a restart, or a rival): read again
        return False

    def release(self) -> None:
        """Give the Lease up (empty holder): the dispatcher re-dispatches our pods at once."""
        if not self.holding:
            return
        try:
            lease = self.client.get("Lease", self.namespace, self.lease_name)
            assert isinstance(lease, Lease)
            if lease.holder_identity != self.identity:
                return
            raw = {**lease.raw, "metadata": self._metadata(lease.raw.get("metadata")),
                   "spec": self._spec(lease, "", 1)}
            self.client.update(raw)
        except ApiError as e:
            log.warning("instance %s: releasing lease failed: %s", self.name, e)
        self.holding = False

    def run(self, stop: threading.Event, ready: threading.Event | None = None,
            on_lost: Callable[[], None] | None = None) -> None:
        """Heartbeat until ``stop`` (after ``ready``, if given), then release the Lease.
        ``on_lost`` is called when renewals have failed for a whole lease duration."""
        if ready is not None:
            while not ready.wait(0.1):
                if stop.is_set():
                    return
        lost_reported = False
        while not stop.is_set():
            if self.heartbeat():
                lost_reported = False
            elif not lost_reported and self.last_renew is not None and \
                    self.clock.now() - self.last_renew > self.lease_duration:
                lost_reported = True
                log.warning("instance %s: lease %s/%s expired; its pods go to other instances", self.name,
                            self.namespace, self.lease_name)
                if on_lost is not None:
                    on_lost()
            stop.wait(self.renew_interval)
        self.release()


class SchedulerInstance:
    """One scheduler instance: a Scheduler that takes only the pods dispatched to it (and with a
    partition sees only the nodes of that partition), its cache seeing every bound pod through
    the informer, and the Lease that tells the dispatcher it is alive.

    Single-threaded (tests, simulation): ``register()`` then ``step()`` / ``run_until_idle()``.
    Threaded: ``start()`` / ``stop()``; the Lease is taken once the informers have synced."""

    def __init__(self, client: Any, name: str, config: SchedulerConfiguration | None = None, *,
                 labels: Mapping[str, str] | None = None, partition_label: str = "", partition: str = "",
                 namespace: str = DEFAULT_LEASE_NAMESPACE, lease_duration: float = 15.0,
                 renew_interval: float | None = None, clock: Clock | None = None,
                 informers: InformerFactory | None = None, seed: int = 0, threaded: bool = False,
                 metrics: SchedulerMetrics | None = None, record_events: bool = True,
                 identity: str | None = None) -> None:
        self.name = name
        self.clock: Clock = clock or RealClock()
        self.metrics = metrics or SchedulerMetrics()
        node_filter = partition_node_filter(partition_label, partition) if partition_label else None
        self.registration = InstanceRegistration(
            client, name, labels=labels, namespace=namespace, lease_duration=lease_duration,
            renew_interval=renew_interval, identity=identity, partition_label=partition_label,
            partition=partition, clock=self.clock, stats=self.stats)
        self.scheduler = Scheduler(client, config, clock=self.clock, informers=informers, seed=seed,
                                   threaded=threaded, pod_filter=instance_pod_filter(name),
                                   node_filter=node_filter, metrics=self.metrics, record_events=record_events)
        for fw in self.scheduler.profiles.values():
            for pf in fw.points["postFilter"]:
                if isinstance(pf, DefaultPreemption):
                    evict_within_budgets(pf)
        # The priority order across instances (with the default PrioritySort; instances owning
        # disjoint partitions do not compete for nodes and need none).
        self.barrier: PriorityBarrier | None = None
        profiles = self.scheduler.profiles
        if not partition_label and all(fw.queue_sort().name == "PrioritySort" for fw in profiles.values()):
            self.barrier = PriorityBarrier(name, profiles)
            self.scheduler.informers.informer("Pod").add_handler(self.barrier.handler)
            self.scheduler.queue.hold = self.barrier.holds
        self._sched_stop = threading.Event()
        self.crashed = threading.Event()  # set if the scheduling loop dies of an exception
        self._lease_stop = threading.Event()
        self._ready = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---------------------------------------------------------------- numbers

    def _counter(self, name: str, labels: Mapping[str, str] | None = None) -> int:
        v = self.metrics.registry.get_sample_value(name, dict(labels or {}))
        return int(v or 0)

    @property
    def conflicts(self) -> int:
        return self._counter("ksched_binding_conflicts_total")

    @property
    def attempts(self) -> int:
        """Scheduling cycles run (whatever their result)."""
        n = 0
        for m in self.metrics.schedule_attempts.collect():
            for smp in m.samples:
                if smp.name.endswith("_total"):
                    n += int(smp.value)
        return n

    def stats(self) -> dict[str, int]:
        """What the instance has done: pods bound, scheduling cycles, bindings refused by the
        conflict resolver, other binding failures."""
        return {"scheduled": self.scheduler.scheduled, "attempts": self.attempts, "conflicts": self.conflicts,
                "binding_errors": self._counter("ksched_binding_errors_total")}

    # ---------------------------------------------------------------- single-threaded

    def register(self) -> bool:
        return self.registration.heartbeat()

    def step(self) -> bool:
        return self.scheduler.step()

    def run_until_idle(self, max_steps: int | None = None) -> int:
        return self.scheduler.run_until_idle(max_steps)

    # ---------------------------------------------------------------- threaded

    @property
    def ready(self) -> threading.Event:
        return self._ready

    def start(self) -> None:
        sched = self.scheduler
        t1 = threading.Thread(target=guarded(lambda: sched.run(self._sched_stop, self._ready), self.crashed),
                              name=f"scheduler-{self.name}", daemon=True)
        t2 = threading.Thread(target=lambda: self.registration.run(self._lease_stop, self._ready),
                              name=f"lease-{self.name}", daemon=True)
        self._threads = [t1, t2]
        t1.start()
        t2.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop scheduling, wait for the bindings in flight, then release the Lease (with the
        final stats), so no pod of ours is handed on while we may still bind it."""
        self._sched_stop.set()
        if self._threads:
            self._threads[0].join(timeout)
        self._lease_stop.set()
        for t in self._threads[1:]:
            t.join(timeout)
        self._threads = []
