"""Node-pressure eviction, as upstream's ``pkg/kubelet/eviction`` (``eviction_manager.go``
synchronize and Admit, ``helpers.go`` signals, thresholds and ranking), one manager per node.

Each pass (every 10 s on the kubelet's grid while there is anything to watch; see
``ksched.kubelet.fake``):

1. observe the signals from the usage model (``ksched.kubelet.usage``): ``memory.available`` =
   node memory capacity - (system + pods' working sets), ``allocatableMemory.available`` =
   allocatable memory - pods' working sets, ``nodefs.available`` from ephemeral-storage,
   ``nodefs.inodesFree``, ``imagefs.available`` (images in ``status.images`` + the node's
   ``ksched.io/usage-imagefs``), ``pid.available``; a signal whose capacity the node does not
   declare is not observed (``ksched.io/capacity-inodes``, ``ksched.io/capacity-imagefs``,
   ``ksched.io/capacity-pids`` annotations on the Node give the last three);
2. thresholds met (available < threshold), ignoring grace periods, plus those met before and
   not yet reclaimed past their minimum reclaim;
3. node conditions (MemoryPressure, DiskPressure, PIDPressure) from them, kept until not
   observed for the pressure-transition period;
4. thresholds whose grace period has passed; none -> done;
5. the threshold to reclaim (memory first), ranking of the active pods for its signal, and the
   first non-critical pod in rank evicted: an ``Evicted`` event and the ``DisruptionTarget``
   condition (``TerminationByKubelet``) at once; its containers get SIGTERM and the grace
   period (:func:`eviction_grace_period`: 1 s for a hard threshold, ``evictionMaxPodGracePeriod``
   bound by the pod's ``terminationGracePeriodSeconds`` for a soft one), stopping after their
   ``ksched.io/termination-seconds`` or killed when the grace period (at least the runtime's 2 s)
   ends (``ksched.kubelet.runtime.kill_delay``). Until then the pod keeps running and using
   what it uses, and the manager, waiting for the kill as upstream's blocking call does, makes
   no pass: the node stays under pressure. Then the pod is ``Failed``, reason ``Evicted``, with
   upstream's message. At most one pod a pass; the next pass follows 1 s after the kill
   (upstream's cleanup wait).

Ranking (first = evicted first): memory -- usage above the pod's memory request, then lower
priority, then larger usage minus request; disk -- the same with ephemeral-storage (inodes:
request 0); pids -- lower priority, then more processes. Python's sort is stable: pods equal
on every key keep the order they are given in, which ``ksched.kubelet.pressure`` makes their
namespace/name order (upstream's sort is not stable, and its pods come from a map).

A node with MemoryPressure admits only pods that are not BestEffort, or BestEffort pods that
tolerate ``node.kubernetes.io/memory-pressure:NoSchedule``; any other pressure refuses every
pod ("The node had condition: [DiskPressure]. ", reason ``Evicted``); critical pods always pass.

Divergences: no node-level reclaim (container and image garbage collection) before evicting;
no local-storage (emptyDir/limit) evictions; the memcg notifier is not simulated
(memory is seen at the 10 s passes, usage profiles make that exact at steps); the Evicted
event carries no annotations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.priorityclass import SYSTEM_CRITICAL_PRIORITY
from ksched.api.quantity import format_bytes, format_value, value
from ksched.api.resources import QOS_BEST_EFFORT, qos_class
from ksched.api.taints import NO_SCHEDULE, Taint, tolerations_tolerate_taint
from ksched.kubelet import evictionapi as api
from ksched.kubelet.evictionapi import EvictionConfig, Threshold
from ksched.kubelet.lifecycle import ADMITTED, PodAdmitAttributes, PodAdmitResult
from ksched.kubelet.usage import container_usage, node_system_usage

__all__ = ["EvictionManager", "Observation", "PodStats", "eviction_grace_period", "is_critical", "rank",
           "thresholds_met"]

CAPACITY_ANNOTATION = "ksched.io/capacity-"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
MONITORING_PERIOD = 10.0
CLEANUP_POLL = 1.0
IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1

CONDITIONS = {
    "MemoryPressure": (("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
                       ("KubeletHasSufficientMemory", "kubelet has sufficient memory available")),
    "DiskPressure": (("KubeletHasDiskPressure", "kubelet has disk pressure"),
                     ("KubeletHasNoDiskPressure", "kubelet has no disk pressure")),
    "PIDPressure": (("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
                    ("KubeletHasSufficientPID", "kubelet has sufficient PID available")),
}


@dataclass(frozen=True, slots=True)
class Observation:
    available: int
    capacity: int


@dataclass(slots=True)
class PodStats:
    """A pod's usage now: per container, per resource (None: the pod has no stats)."""

    pod: Pod
    containers: dict[str, dict[str, int]] | None = None

    def usage(self, resource: str) -> int | None:
        if self.containers is None:
            return None
        return sum(c.get(resource, 0) for c in self.containers.values())


def is_critical(pod: Pod) -> bool:
    """kubelettypes.IsCriticalPod: static, mirror, or priority >= 2000000000."""
    src = pod.annotations.get("kubernetes.io/config.source", "")
    if (src and src != "api") or "kubernetes.io/config.mirror" in pod.annotations:
        return True
    return pod.priority >= SYSTEM_CRITICAL_PRIORITY


def pod_request(pod: Pod, resource: str) -> int:
    """helpers.go podRequest: the sum over containers, at least the largest init container."""
    total = sum(c.requests.get(resource, 0) for c in pod.containers)
    for c in pod.init_containers:
        total = max(total, c.requests.get(resource, 0))
    return total


# ---------------------------------------------------------------- observations


def _capacity_annotation(node: Node, name: str) -> int | None:
    text = node.annotations.get(CAPACITY_ANNOTATION + name)
    if not text:
        return None
    try:
        return value(text)
    except ValueError:
        return None


def observe(node: Node, stats: Iterable[PodStats], now: float) -> dict[str, Observation]:
    """makeSignalObservations from the usage model."""
    stats = list(stats)

    def pods_total(resource: str) -> int:
        return sum(s.usage(resource) or 0 for s in stats)

    out: dict[str, Observation] = {}
    mem_cap = node.capacity.get("memory") or node.allocatable.get("memory")
    if mem_cap:
        pods_mem = pods_total("memory")
        ws = node_system_usage(node, "memory", now) + pods_mem
        out[api.MEMORY_AVAILABLE] = Observation(mem_cap - ws, mem_cap)
        alloc = node.allocatable.get("memory", mem_cap)
        out[api.ALLOCATABLE_MEMORY_AVAILABLE] = Observation(alloc - pods_mem, alloc)
    fs_cap = node.capacity.get("ephemeral-storage") or node.allocatable.get("ephemeral-storage")
    if fs_cap:
        used = node_system_usage(node, "ephemeral-storage", now) + pods_total("ephemeral-storage")
        out[api.NODEFS_AVAILABLE] = Observation(fs_cap - used, fs_cap)
    inodes = _capacity_annotation(node, "inodes")
    if inodes:
        used = node_system_usage(node, "inodes", now) + pods_total("inodes")
        out[api.NODEFS_INODES_FREE] = Observation(inodes - used, inodes)
    imagefs = _capacity_annotation(node, "imagefs")
    if imagefs:
        used = node_system_usage(node, "imagefs", now) + sum(i.size_bytes for i in node.images)
        out[api.IMAGEFS_AVAILABLE] = Observation(imagefs - used, imagefs)
    pids = _capacity_annotation(node, "pids")
    if pids:
        used = node_system_usage(node, "pids", now) + pods_total("pids")
        out[api.PID_AVAILABLE] = Observation(pids - used, pids)
    return out


# ---------------------------------------------------------------- thresholds


def thresholds_met(thresholds: Iterable[Threshold], observations: dict[str, Observation],
                   enforce_min_reclaim: bool) -> list[Threshold]:
    """helpers.go thresholdsMet: available < threshold (+ minimum reclaim when enforced)."""
    out = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        amount = t.value.amount(obs.capacity)
        if enforce_min_reclaim and t.min_reclaim is not None:
            amount += t.min_reclaim.amount(obs.capacity)
        if amount > obs.available:
            out.append(t)
    return out


def _merge(a: list[Threshold], b: list[Threshold]) -> list[Threshold]:
    out = list(a)
    for t in b:
        if t not in out:
            out.append(t)
    return out


# ---------------------------------------------------------------- ranking


def _cmp_key_memory(s: PodStats) -> tuple[int, int, int]:
    usage = s.usage("memory")
    if usage is None:
        return (-1, 0, 0)  # no stats: first
    req = pod_request(s.pod, "memory")
    return (0 if usage > req else 1, s.pod.priority, -(usage - req))


def _cmp_key_disk(resource: str) -> Callable[[PodStats], tuple[int, int, int]]:
    def key(s: PodStats) -> tuple[int, int, int]:
        usage = s.usage(resource)
        if usage is None:
            return (-1, 0, 0)
        req = pod_request(s.pod, "ephemeral-storage") if resource == "ephemeral-storage" else 0
        return (0 if usage > req else 1, s.pod.priority, -(usage - req))
    return key


def _cmp_key_pids(s: PodStats) -> tuple[int, int, int]:
    usage = s.usage("pids")
    if usage is None:
        return (-1, 0, 0)
    return (0, s.pod.priority, -usage)


def rank(signal: str, stats: list[PodStats]) -> list[PodStats]:
    """The active pods in eviction order for ``signal`` (signalToRankFunc)."""
    resource = api.SIGNAL_RESOURCE[signal]
    if resource == "memory":
        key: Callable[[PodStats], tuple[int, int, int]] = _cmp_key_memory
    elif resource == "pids":
        key = _cmp_key_pids
    else:
        key = _cmp_key_disk(resource)
    return sorted(stats, key=key)


# ---------------------------------------------------------------- messages


def _fmt(resource: str, amount: int) -> str:
    return format_bytes(amount) if resource in ("memory", "ephemeral-storage") else format_value(amount)


def eviction_message(resource: str, s: PodStats, thresholds: list[Threshold],
                     observations: dict[str, Observation]) -> str:
    """helpers.go evictionMessage."""
    msg = f"The node was low on resource: {resource}. "
    for t in thresholds:
        if api.SIGNAL_RESOURCE[t.signal] == resource and t.signal in observations:
            obs = observations[t.signal]
            msg += f"Threshold quantity: {t.value.text(obs.capacity, t.signal)}, " \
                   f"available: {_fmt(resource, obs.available)}. "
            break
    if s.containers is None or resource not in ("memory", "ephemeral-storage"):
        return msg
    for c in s.pod.containers:
        used = s.containers.get(c.name, {}).get(resource)
        if used is None:
            continue
        req = c.requests.get(resource, 0)
        if used > req:
            msg += (f"Container {c.name} was using {_fmt(resource, used)}, request is {_fmt(resource, req)}, "
                    f"has larger consumption of {resource}. ")
    return msg


# ---------------------------------------------------------------- grace periods


def eviction_grace_period(pod: Pod, hard: bool, max_pod_grace_period: int) -> int:
    """The grace period the evicted pod gets: eviction_manager.go synchronize's override -- 1 s
    (immediateEvictionGracePeriodSeconds) for a hard threshold, ``evictionMaxPodGracePeriod``
    bound by the pod's ``terminationGracePeriodSeconds`` for a soft one -- as the pod worker
    applies it (pod_workers.go calculateEffectiveGracePeriod): a deletion's shorter grace period
    stands; an override of 0 (``evictionMaxPodGracePeriod`` unset) leaves the pod's own
    ``terminationGracePeriodSeconds``; never less than 1 s."""
    override = IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS if hard else \
        min(max_pod_grace_period, pod.termination_grace_period_seconds)
    grace = pod.deletion_grace_period_seconds or 0
    if grace == 0 or override < grace:
        grace = override
    if grace == 0:
        grace = pod.termination_grace_period_seconds
    return max(grace, 1)


# ---------------------------------------------------------------- the manager


@dataclass
class Eviction:
    pod: Pod
    message: str
    grace_period: int
    threshold: Threshold


@dataclass
class EvictionManager:
    """One node's eviction manager: its state between passes."""

    node_name: str
    config: EvictionConfig
    thresholds_first_observed: dict[tuple[str, bool], float] = field(default_factory=dict)
    conditions_last_observed: dict[str, float] = field(default_factory=dict)
    thresholds_met: list[Threshold] = field(default_factory=list)
    conditions: set[str] = field(default_factory=set)
    last_observations: dict[str, Observation] = field(default_factory=dict)
    reclaiming: str = ""  # the signal of the last "Attempting to reclaim" (for its event)

    def synchronize(self, node: Node, stats: list[PodStats], now: float) -> tuple[Eviction | None, str]:
        """One pass: updates conditions; returns the pod to evict (or None) and the resource
        it reclaims."""
        cfg = self.config
        observations = observe(node, stats, now)
        self.last_observations = observations
        met = thresholds_met(cfg.thresholds, observations, False)
        if self.thresholds_met:
            met = _merge(met, thresholds_met(self.thresholds_met, observations, True))
        first = {t.key(): self.thresholds_first_observed.get(t.key(), now) for t in met}
        conds = {api.SIGNAL_CONDITION[t.signal] for t in met}
        last = dict(self.conditions_last_observed)
        for c in conds:
            last[c] = now
        self.conditions = {c for c, t in last.items() if now - t < cfg.pressure_transition_period}
        self.conditions_last_observed = {c: t for c, t in last.items() if c in self.conditions}
        ready = [t for t in met if now - first[t.key()] >= t.grace_period]
        self.thresholds_first_observed = first
        self.thresholds_met = ready
        if not ready:
            return None, ""
        # byEvictionPriority: memory signals first, then the rest in configuration order
        ready = sorted(ready, key=lambda t: 0 if api.SIGNAL_RESOURCE[t.signal] == "memory" else 1)
        threshold = ready[0]
        resource = api.SIGNAL_RESOURCE[threshold.signal]
        self.reclaiming = resource
        for s in rank(threshold.signal, stats):
            if is_critical(s.pod):
                continue
            grace = eviction_grace_period(s.pod, threshold.hard, cfg.max_pod_grace_period)
            return Eviction(s.pod, eviction_message(resource, s, ready, observations), grace, threshold), resource
        return None, resource

    def needs_watching(self) -> bool:
        """Whether the next 10 s pass may change anything even if usage stays the same."""
        return bool(self.thresholds_met or self.thresholds_first_observed or self.conditions)

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        """eviction_manager.go Admit."""
        return self.admit_without_pods(attrs.pod)

    def admit_without_pods(self, pod: Pod, other_count: int = 0,
                           other_requests: Mapping[str, int] | None = None) -> PodAdmitResult:
        """:meth:`admit`, which reads only the pod (``ksched.kubelet.lifecycle``)."""
        if not self.conditions or is_critical(pod):
            return ADMITTED
        if self.conditions == {"MemoryPressure"}:
            if qos_class(pod) != QOS_BEST_EFFORT:
                return ADMITTED
            if tolerations_tolerate_taint(pod.tolerations, Taint(TAINT_MEMORY_PRESSURE, "", NO_SCHEDULE)):
                return ADMITTED
        names = ", ".join(sorted(self.conditions))
        return PodAdmitResult(False, "Evicted", f"The node had condition: [{names}]. ")


def pod_stats(pod: Pod, since_start: float | None) -> PodStats:
    """The usage model's reading of a running pod (no stats before it started)."""
    if since_start is None:
        return PodStats(pod, None)
    per: dict[str, dict[str, int]] = {c.name: {} for c in pod.containers}
    for resource in ("memory", "ephemeral-storage", "pids", "inodes", "cpu"):
        u = container_usage(pod, resource, since_start)
        if u is None:
            continue
        for name, amount in u.items():
            per.setdefault(name, {})[resource] = amount
    return PodStats(pod, per)


def condition_dicts(manager_conditions: set[str], old: list[dict[str, Any]], ts: str) -> list[dict[str, Any]]:
    """The node's conditions with the pressure ones as the manager sees them (nodestatus
    setters): unchanged ones keep their transition time."""
    out = [c for c in old if c.get("type") not in CONDITIONS]
    by_type = {c.get("type"): c for c in old}
    for ctype, ((rt, mt), (rf, mf)) in CONDITIONS.items():
        on = ctype in manager_conditions
        prev = by_type.get(ctype)
        if prev is None and not on:
            continue
        status = "True" if on else "False"
        c = {"type": ctype, "status": status, "reason": rt if on else rf, "message": mt if on else mf,
             "lastHeartbeatTime": ts, "lastTransitionTime": ts}
        if prev is not None and prev.get("status") == status and prev.get("lastTransitionTime"):
            c["lastTransitionTime"] = prev["lastTransitionTime"]
        out.append(c)
    return out
