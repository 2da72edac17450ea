"""One scheduler against several: the same objects run through ``ksched simulate``'s
Simulation (one Scheduler) and through a MultiSimulation (a dispatcher and N scheduler
instances) over the same embedded control plane (store, controllers, simulated kubelet) on a
virtual clock, and the outcomes compared.

A MultiSimulation is deterministic for its seed. Each round the dispatcher steps, then the
instances in a seeded random order: an instance catches up with its watches only now and then
(``poll_prob``), as a watch stream lags, and otherwise runs a scheduling cycle on the view it
has, so instances race each other for the same room and see each other's nominations late.
Instances run at different speeds (each sits a round out with its own probability, up to
``skew``), so one gets through its queue well before another, as processes on a busy machine
do; the dispatcher hands out a few pods a round (up to ``dispatch_batch``), so instances start
on the first pods dispatched while others wait for their patches.
Time moves on (kubelet start-ups, graceful deletions, backoffs, controller syncs) only once
every component is idle, exactly as in Simulation.run.

:func:`outcome` reduces a finished cluster to what "the same outcome" compares (see
:class:`Outcome`)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch_harness import overcommitted

from ksched.api.deviceconflicts import DeviceAllocations, slice_capacity
from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.api.podconflicts import BoundPods, pod_conflict
from ksched.api.resource import ResourceClaim
from ksched.api.storage import PersistentVolumeClaim
from ksched.api.watch import DELETED
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import DEFAULT_EPOCH, VirtualClock
from ksched.dispatch.dispatcher import Dispatcher
from ksched.dispatch.instance import SchedulerInstance
from ksched.kubelet.dradriver import DRADriver
from ksched.kubelet.fake import FakeKubelet
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.status import FitError
from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption
from ksched.scheduler.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.simulation import LOAD_ORDER, Simulation

BOUND = "bound"
PREEMPTED = "preempted"  # the fate of a pod deleted by preemption


def load(store: Any, objects: Iterable[KubeObject | dict[str, Any]]) -> None:
    """Create in dependency order (as Simulation.load); every object must be accepted."""

    def kind_of(o: KubeObject | dict[str, Any]) -> str:
        return o.KIND if isinstance(o, KubeObject) else str(o.get("kind", ""))

    rank = {k: i for i, k in enumerate(LOAD_ORDER)}
    for o in sorted(objects, key=lambda o: rank.get(kind_of(o), len(rank))):
        store.create(o)


class MultiSimulation:
    """A dispatcher and ``n`` scheduler instances over one embedded cluster."""

    def __init__(self, n: int, *, seed: int = 0, poll_prob: float = 0.5, skew: float = 0.8,
                 dispatch_batch: int = 8) -> None:
        self.clock = VirtualClock(DEFAULT_EPOCH)
        self.cluster = EmbeddedCluster(self.clock, auto_create_namespaces=True)
        self.store = self.cluster.store
        self.store.enable_pod_conflicts()  # as ksched serve --schedulers N
        self.rng = random.Random(seed)
        self.poll_prob = poll_prob
        self.dispatch_batch = dispatch_batch
        self.kubelet_informers = InformerFactory(InProcessClient(self.store))
        self.kubelet = FakeKubelet(InProcessClient(self.store), self.kubelet_informers, self.clock)
        # The node side of DRA (publishes the nodes' devices as ResourceSlices), as in Simulation.
        self.dra_driver = DRADriver(InProcessClient(self.store), self.kubelet_informers, self.clock)
        self.dispatcher = Dispatcher(InProcessClient(self.store), clock=self.clock)
        self.instances = [
            SchedulerInstance(InProcessClient(self.store), f"sched-{i}", clock=self.clock,
                              seed=self.rng.randrange(1 << 30), lease_duration=1e9, record_events=False)
            for i in range(n)]
        self.idle_prob = {inst.name: self.rng.uniform(0.0, skew) for inst in self.instances}
        for inst in self.instances:
            assert inst.register()
            inst.scheduler.sync()
        self.dispatcher.run_until_idle()

    def round(self) -> bool:
        d = self.dispatcher
        moved = d.informers.poll() > 0
        moved = d.dispatch(limit=self.rng.randint(1, self.dispatch_batch)) > 0 or moved
        order = list(self.instances)
        self.rng.shuffle(order)
        for inst in order:
            s = inst.scheduler
            if self.rng.random() < self.idle_prob[inst.name]:
                continue  # sits this round out
            if self.rng.random() < self.poll_prob:
                moved = s.step() or moved
            else:
                moved = s.schedule_one() or moved
                moved = s.run_bindings() > 0 or moved
        return moved

    def _race(self, max_rounds: int = 100000) -> None:
        """Rounds until nothing moves and every watch has been caught up with."""
        quiet = 0
        for _ in range(max_rounds):
            if self.round():
                quiet = 0
                continue
            quiet += 1
            if quiet >= 2 and self.dispatcher.idle() and all(i.scheduler.idle() for i in self.instances):
                return
            for inst in self.instances:
                inst.scheduler.informers.poll()
        raise AssertionError("the instances did not settle")

    def _next_timer(self) -> float | None:
        cands = [self.store.next_deletion_deadline(), self.cluster.next_wakeup(), self.kubelet.next_wakeup()]
        for inst in self.instances:
            cands.append(inst.scheduler.queue.next_backoff_wakeup())
            cands.append(inst.scheduler.next_binding_retry())  # a PreBind waiting (volumes, DRA)
            cands.extend(fw.next_permit_deadline() for fw in inst.scheduler.profiles.values())
        times = [t for t in cands if t is not None]
        return min(times) if times else None

    def run(self, max_seconds: float = 7 * 24 * 3600.0) -> None:
        """As Simulation.run: until nothing more can change."""
        start = self.clock.now()
        while True:
            self._race()
            self.kubelet_informers.poll()
            changed = bool(self.dra_driver.step())
            changed = bool(self.kubelet.step()) or changed
            changed = bool(self.store.finalize_expired()) or changed
            changed = bool(self.cluster.controllers.settle()) or changed
            if changed:
                continue
            t = self._next_timer()
            if t is None or t - start > max_seconds:
                return
            self.clock.advance_to(t)


class Deletions:
    """Records the pods the store removes (final state), by key, from a store's commits."""

    def __init__(self, store: Any) -> None:
        self.pods: dict[str, Pod] = {}
        store.on_commit.append(self._record)

    def _record(self, etype: str, kind: str, obj: Any, rv: int) -> None:
        if kind == "Pod" and etype == DELETED:
            self.pods[obj.key] = obj


Waves = list[list[Any]]


# Virtual seconds a wave may run: clusters with CronJobs never come to rest (examples/batch
# documents its run with --max-time 660); both sides stop at the same point of virtual time.
MAX_SECONDS = 660.0


def run_one(waves: Waves, seed: int = 0, max_seconds: float = MAX_SECONDS) -> Outcome:
    """The outcome of one scheduler (``ksched simulate``'s Simulation): each wave of objects is
    created once the previous one has come to rest (or ran ``max_seconds``)."""
    sim = Simulation(seed=seed, record_events=False)
    gone = Deletions(sim.store)
    for wave in waves:
        load(sim.store, wave)
        sim.run(max_seconds)
    return outcome(sim.store, gone.pods)


def run_many(waves: Waves, n: int, seed: int = 0, max_seconds: float = MAX_SECONDS, **kw: Any) -> Outcome:
    """The outcome of a dispatcher and ``n`` instances (options: MultiSimulation's)."""
    ms = MultiSimulation(n, seed=seed, **kw)
    gone = Deletions(ms.store)
    for wave in waves:
        load(ms.store, wave)
        ms.run(max_seconds)
    return outcome(ms.store, gone.pods)


def reordered(waves: Waves, seed: int) -> Waves:
    """The same waves with the pods of each in another order: 0 as given, 1 reversed, else
    shuffled (seeded). One scheduler takes pods of equal priority in arrival order."""
    out: Waves = []
    rng = random.Random(seed)
    for wave in waves:
        pods = [o for o in wave if _kind(o) == "Pod"]
        if seed == 1:
            pods.reverse()
        elif seed > 1:
            rng.shuffle(pods)
        it = iter(pods)
        out.append([next(it) if _kind(o) == "Pod" else o for o in wave])
    return out


_COUNT = re.compile(r"^\d+ ")
_PREEMPTION = ". preemption: "


def _reasons(part: str) -> str:
    """One part of a FitError message ("0/N nodes are available: ..."), its reasons without
    their node counts, sorted."""
    part = part.rstrip(".")
    head, sep, rest = part.partition(": ")
    if not (sep and head.split("/")[0].isdigit()):
        return part
    return head + ": " + ", ".join(sorted({_COUNT.sub("", r.strip()) for r in rest.split(", ") if r.strip()}))


def verdict(fate: str) -> str:
    """A fate reduced to: bound, preempted, deleted, or pending with the PostFilter part of its
    message (what preemption answered; none when it nominated a node or did not run)."""
    if fate in (BOUND, PREEMPTED, "deleted", "deleting", "absent"):
        return fate
    _, sep, post = fate.partition(_PREEMPTION)
    return "pending" + (" | preemption: " + _reasons(post) if sep else "")


@dataclass
class Outcome:
    """What one run ended with.

    * ``fates``: pod key -> ``"bound"``, ``"Preempted"`` (deleted by preemption), or the pod's
      PodScheduled message while it is pending;
    * ``bound_per_priority``: how many pods of each priority are bound;
    * ``preempted_per_priority``: how many pods of each priority preemption deleted;
    * ``overcommitted``: nodes over-committed (must be empty);
    * ``pdb_violations``: PDBs with fewer healthy pods than they desire (must be empty unless
      the cluster started that way);
    * ``nodes``: pod key -> node of the bound pods;
    * ``unsettled``: pending pods a scheduler would still act on (:func:`unsettled`; must be
      empty).
    """

    fates: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # pod key -> pod_class
    bound_per_priority: Counter[int] = field(default_factory=Counter)
    preempted_per_priority: Counter[int] = field(default_factory=Counter)
    overcommitted: dict[str, list[str]] = field(default_factory=dict)
    pdb_violations: list[str] = field(default_factory=list)
    nodes: dict[str, str] = field(default_factory=dict)
    unsettled: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # bound pods whose constraints between pods are broken


def broken_constraints(store: Any) -> list[str]:
    """The bound pods whose required anti-affinity, DoNotSchedule spread or ReadWriteOncePod
    claim the final state breaks (the resolver's check of ``ksched.api.podconflicts``, made as
    if each were bound now), and the claims allocated a device another claim holds
    (``ksched.api.deviceconflicts``), by key."""
    bound = BoundPods()
    pods = [p for p in store.items("Pod") if isinstance(p, Pod)]
    for p in pods:
        bound.add(p)
    nodes = {n.name: n for n in store.items("Node") if isinstance(n, Node)}
    namespaces = {ns.name: ns.labels for ns in store.items("Namespace")}
    claims = {c.key: c for c in store.items("PersistentVolumeClaim") if isinstance(c, PersistentVolumeClaim)}
    out = []
    for p in pods:
        n = nodes.get(p.node_name)
        if n is None or p.is_terminal:
            continue
        if pod_conflict(p, n, bound, nodes=nodes.values(), node_of=nodes.get, ns_labels=namespaces.get,
                        claim_of=lambda ns, name: claims.get(f"{ns}/{name}")) is not None:
            out.append(p.key)
    slices = list(store.items("ResourceSlice"))
    # A device two claims hold (unless both share it and its capacity suffices).
    held = DeviceAllocations(lambda key: slice_capacity(slices, key))
    for c in sorted(store.items("ResourceClaim"), key=lambda c: c.key):
        if isinstance(c, ResourceClaim):
            if held.conflict(None, c) is not None:
                out.append(c.key)
            held.update(None, c)
    return sorted(out)


def preempted(pod: Pod) -> bool:
    """Deleted by the scheduler's preemption (DisruptionTarget, reason PreemptionByScheduler)."""
    cond = pod.condition(DISRUPTION_TARGET) or {}
    return cond.get("status") == "True" and cond.get("reason") == PREEMPTION_BY_SCHEDULER


def outcome(store: Any, gone: Mapping[str, Pod]) -> Outcome:
    """The outcome of a finished run: ``store`` holds what is left, ``gone`` the pods deleted
    on the way (their last state, by key)."""
    out = Outcome(overcommitted=overcommitted(store), unsettled=unsettled(store), broken=broken_constraints(store))
    for p in store.items("Pod"):
        assert isinstance(p, Pod)
        k = p.key
        if p.deletion_timestamp is not None:
            out.fates[k] = PREEMPTED if preempted(p) else "deleting"
        elif p.node_name:
            out.fates[k] = BOUND
            out.nodes[k] = p.node_name
            out.bound_per_priority[p.priority] += 1
        else:
            cond = p.condition("PodScheduled") or {}
            out.fates[k] = cond.get("message", "") or "(no condition)"
        out.classes[k] = pod_class(p)
        if out.fates[k] == PREEMPTED:
            out.preempted_per_priority[p.priority] += 1
    for k, p in gone.items():
        if k in out.fates:
            continue  # deleted, then created again (by a controller)
        out.fates[k] = PREEMPTED if preempted(p) else "deleted"
        out.classes[k] = pod_class(p)
        if out.fates[k] == PREEMPTED:
            out.preempted_per_priority[p.priority] += 1
    for pdb in store.items("PodDisruptionBudget"):
        assert isinstance(pdb, PodDisruptionBudget)
        st = pdb.raw.get("status") or {}
        if int(st.get("currentHealthy", 0)) < int(st.get("desiredHealthy", 0)):
            out.pdb_violations.append(pdb.key)
    pods = {p.key: p for p in gone.values()}
    pods.update((p.key, p) for p in store.items("Pod") if isinstance(p, Pod))
    _stable_keys(out, pods)
    return out


def _stable_keys(out: Outcome, pods: Mapping[str, Pod]) -> None:
    """Key the pods a controller named (``generateName`` plus a random suffix, seeded per run)
    ``namespace/generateName*i`` (i: their order by name), so that runs with other seeds agree
    on them: the only pod of its generateName (a CronJob's Job's) is the same pod in every run;
    replicas are compared per class anyway."""
    groups: dict[str, list[str]] = {}
    for k, p in pods.items():
        gen = str((p.raw.get("metadata") or {}).get("generateName") or "")
        if gen and p.name.startswith(gen):
            groups.setdefault(f"{p.namespace}/{gen}*", []).append(k)
    for prefix, keys in groups.items():
        for i, k in enumerate(sorted(keys)):
            new = f"{prefix}{i}"
            for d in (out.fates, out.classes, out.nodes):
                if k in d:
                    d[new] = d.pop(k)


# The marks a StatefulSet gives each pod from its ordinal (besides the name).
_ORDINAL_LABELS = ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")


def pod_class(pod: Pod) -> str:
    """Pods of one class differ only in name: same namespace, labels and spec (replicas). The
    labels naming a controller's uid (a Job's, new in every run) are left out, and so are the
    marks of a StatefulSet pod's ordinal: its hostname, the pod-name and pod-index labels, and
    the names of the claims made from the set's volumeClaimTemplates (``<template>-<pod>``, each
    pod's own, created alike). StatefulSet pods are replicas like a Deployment's: one scheduler
    takes them in ordinal order (the controller creates them so), which several instances
    cannot reproduce, so only how many of them are bound is compared, not which ordinal lands
    where."""
    spec = {k: v for k, v in (pod.raw.get("spec") or {}).items() if k != "nodeName"}
    labels = {k: v for k, v in pod.labels.items() if not k.endswith("controller-uid")}
    ref = pod.controller_ref()
    if ref is not None and ref.kind == "StatefulSet":
        for k in _ORDINAL_LABELS:
            labels.pop(k, None)
        if spec.get("hostname") == pod.name:
            del spec["hostname"]
        suffix = "-" + pod.name
        vols = []
        for v in spec.get("volumes") or ():
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName", "")
            if claim.endswith(suffix):
                v = {**v, "persistentVolumeClaim": {**v["persistentVolumeClaim"],
                                                    "claimName": claim[:-len(suffix)] + "-"}}
            vols.append(v)
        if vols:
            spec["volumes"] = vols
    return json.dumps([pod.namespace, labels, spec], sort_keys=True)


@dataclass
class Envelope:
    """What a single scheduler's outcome does not depend on.

    One scheduler's outcome still depends on its random tie-breaks (which of equally scored
    nodes) and on the order of pods of equal priority (its queue takes them in arrival order):
    which replica of a set gets the last room, how GPUs of pods of one priority are packed.
    Several instances cannot reproduce either. Built from several runs of one scheduler with
    different seeds and arrival orders, the envelope keeps what all of them agree on:

    * ``bound_per_priority``, ``preempted_per_priority``: per priority, how many pods were
      bound, and how many preemption deleted;
    * ``bound_per_class``, ``preempted_per_class``: the same per set of replicas
      (:func:`pod_class`: pods that differ only in name are interchangeable);
    * ``verdicts``: for a pod with no replica, its :func:`verdict` -- bound, preempted, or
      pending with what preemption answered (the ``preemption:`` part of its message, up to
      node counts);
    * ``nodes``: for a pod without replicas every run bound to the same node (whatever the seed and the arrival
      order: the node is determined by the cluster, e.g. the only node that fits, or the
      cheapest preemption), that node;
    * ``pdb_violations``: the PDBs any run left violated.

    :meth:`check` lists where another outcome differs from it, and what must hold of every
    outcome: no node over-committed, no PDB violated that one scheduler does not violate.
    """

    verdicts: dict[str, str] = field(default_factory=dict)
    bound_per_class: dict[str, int] = field(default_factory=dict)
    preempted_per_class: dict[str, int] = field(default_factory=dict)
    bound_per_priority: dict[int, int] = field(default_factory=dict)
    preempted_per_priority: dict[int, int] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    pdb_violations: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)  # pods any run left with a constraint broken
    runs: int = 0

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> Envelope:
        assert outcomes
        env = cls(runs=len(outcomes))

        def agreed(values: list[Any]) -> tuple[bool, Any]:
            return all(v == values[0] for v in values), values[0]

        sizes = Counter(outcomes[0].classes.values())
        for k in sorted(set().union(*(o.fates for o in outcomes))):
            if sizes.get(outcomes[0].classes.get(k, ""), 0) != 1:
                continue  # a replica: counted with its class
            same, v = agreed([verdict(o.fates.get(k, "absent")) for o in outcomes])
            if same:
                env.verdicts[k] = v
        for attr, key in (("bound_per_class", BOUND), ("preempted_per_class", PREEMPTED)):
            counts = [_per_class(o, key) for o in outcomes]
            target = getattr(env, attr)
            for c in set().union(*counts):
                same, v = agreed([cnt.get(c, 0) for cnt in counts])
                if same:
                    target[c] = v
        for attr in ("bound_per_priority", "preempted_per_priority"):
            counts = [getattr(o, attr) for o in outcomes]
            target = getattr(env, attr)
            for prio in set().union(*counts):
                same, v = agreed([cnt.get(prio, 0) for cnt in counts])
                if same:
                    target[prio] = v
        for o in outcomes:
            assert not o.overcommitted and not o.unsettled, (o.overcommitted, o.unsettled)
            env.pdb_violations.update(o.pdb_violations)
            env.broken.update(o.broken)
        for k in outcomes[0].nodes:
            if sizes.get(outcomes[0].classes.get(k, ""), 0) != 1:
                continue  # a replica: which one lands where is not determined
            same, v = agreed([o.nodes.get(k, "") for o in outcomes])
            if same:
                env.nodes[k] = v
        return env

    def check_safe(self, out: Outcome) -> list[str]:
        """What must hold however the instances race: no node over-committed, nothing left
        unsettled, no PDB violated and no constraint between pods broken that one scheduler
        leaves intact."""
        bad: list[str] = []
        if out.overcommitted:
            bad.append(f"over-committed nodes: {out.overcommitted}")
        bad.extend(f"unsettled: {u}" for u in out.unsettled)
        extra = set(out.pdb_violations) - self.pdb_violations
        if extra:
            bad.append(f"PDBs violated: {sorted(extra)}")
        broken = set(out.broken) - self.broken
        if broken:
            bad.append(f"anti-affinity, spread or ReadWriteOncePod broken for: {sorted(broken)}")
        return bad

    def check_victims(self, out: Outcome) -> list[str]:
        """Preemption as one scheduler: per priority, as many pods preempted."""
        got = out.preempted_per_priority
        return [f"preempted_per_priority[{prio}]: {got.get(prio, 0)}, one scheduler: {want}"
                for prio, want in sorted(self.preempted_per_priority.items()) if got.get(prio, 0) != want]

    def check(self, out: Outcome) -> list[str]:
        """Where ``out`` differs from what one scheduler always does; empty when it does not."""
        bad = self.check_safe(out)
        for attr in ("bound_per_priority", "preempted_per_priority"):
            got_counts = getattr(out, attr)
            for prio, want_n in sorted(getattr(self, attr).items()):
                if got_counts.get(prio, 0) != want_n:
                    bad.append(f"{attr}[{prio}]: {got_counts.get(prio, 0)}, one scheduler: {want_n}")
        for attr, key in (("bound_per_class", BOUND), ("preempted_per_class", PREEMPTED)):
            got_counts = _per_class(out, key)
            for c, want_n in getattr(self, attr).items():
                if got_counts.get(c, 0) != want_n:
                    members = sorted(k for k, kc in out.classes.items() if kc == c)
                    bad.append(f"{key} of replicas {members}: {got_counts.get(c, 0)}, one scheduler: {want_n}")
        for k, want in sorted(self.nodes.items()):
            if out.nodes.get(k, "") != want:
                bad.append(f"{k}: on {out.nodes.get(k, '') or '(no node)'}, one scheduler: on {want}")
        for k, want in self.verdicts.items():
            got = verdict(out.fates.get(k, "absent"))
            if got != want:
                bad.append(f"{k}: {got!r} ({out.fates.get(k)!r}), one scheduler: {want!r}")
        return bad


def unsettled(store: Any) -> list[str]:
    """Pending pods a scheduler would still act on in the final state of ``store``: a node fits
    them, or preemption finds a candidate for them. One scheduler never ends like that (the
    events that could help a pod requeue it), and neither may several. Judged by a fresh
    scheduler over the store; nothing is written."""
    sched = Scheduler(InProcessClient(store), record_events=False)
    sched.sync()
    sched.cache.update_snapshot(sched.snapshot)
    bad: list[str] = []
    for pod in sorted(_pending(store), key=lambda p: p.key):
        fw = sched.profiles.get(pod.scheduler_name)
        if fw is None or pod.scheduling_gates:
            continue
        state = CycleState()
        try:
            res = sched.algorithm.schedule_pod(fw, state, pod, sched.snapshot)
        except FitError as fe:
            if pod.preemption_policy == "Never":
                continue
            for pf in fw.points["postFilter"]:
                if isinstance(pf, DefaultPreemption):
                    cands, _, _ = pf.evaluator.find_candidates(state, list(sched.snapshot.all_nodes()), pod,
                                                               fe.diagnosis)
                    if cands:
                        bad.append(f"{pod.key} could preempt {[p.key for p in cands[0].victims.pods]} "
                                   f"on {cands[0].name}")
            continue
        bad.append(f"{pod.key} fits on {res.suggested_host}")
    return bad


def store_of(objects: Iterable[KubeObject]) -> Store:
    """A store holding ``objects`` as they are (read from another API server), to judge a
    cluster's final state with :func:`outcome`."""
    store = Store(VirtualClock(DEFAULT_EPOCH), conflict_resolver=False, auto_create_namespaces=True)
    drop = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")

    def fresh(o: KubeObject) -> dict[str, Any]:
        raw = dict(o.raw)
        raw["metadata"] = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in drop}
        return raw

    have = {(o.KIND, o.key) for kind in ("Namespace", "PriorityClass") for o in store.items(kind)}
    load(store, [fresh(o) for o in objects if (o.KIND, o.key) not in have])  # built-ins are there
    return store


def _pending(store: Any) -> list[Pod]:
    return [p for p in store.items("Pod")
            if isinstance(p, Pod) and not p.node_name and not p.is_terminal and p.deletion_timestamp is None]


def _per_class(o: Outcome, fate: str) -> Counter[str]:
    return Counter(o.classes[k] for k, f in o.fates.items() if f == fate and k in o.classes)


def _kind(o: Any) -> str:
    return o.KIND if isinstance(o, KubeObject) else str(o.get("kind", ""))


# ---------------------------------------------------------------------------- generated scenarios

PRIORITY_CLASSES = (("low", 10, "PreemptLowerPriority"), ("mid", 500, "PreemptLowerPriority"),
                    ("never", 300, "Never"), ("high", 1000, "PreemptLowerPriority"))


def _pod(name: str, cpu: str, priority_class: str, app: str, grace: int) -> dict[str, Any]:
    req = {"cpu": cpu, "memory": "256Mi"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"priorityClassName": priority_class, "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": dict(req), "limits": dict(req)}}]}}


def generated_scenario(seed: int) -> Waves:
    """A cluster of 4-CPU nodes nearly filled with low-priority replicas of 1 CPU (some sets
    under a PDB allowing one disruption), then a wave that does not fit, in a random arrival
    order: high-priority pods (1 or 2 CPUs) and mid-priority ones (1 CPU) that preempt, pods
    that may not preempt (``never``, between low and mid), more low ones. The preemptors'
    nominations must be honoured while their victims terminate (30 s), and PDBs steer the
    choice of victims. Pods of one priority have one size, so how many pods of each priority
    end up bound or preempted does not depend on tie-breaks or arrival order."""
    rng = random.Random(seed)
    n_nodes = rng.randint(4, 7)
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
              "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                         "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True"}]}}
             for i in range(n_nodes)]
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "preemptionPolicy": policy} for name, value, policy in PRIORITY_CLASSES]
    first: list[Any] = [*classes, *nodes]
    room = 4 * n_nodes - rng.randint(1, n_nodes)  # CPUs the low replicas take
    a = 0
    while room > 0:
        replicas = min(room, rng.randint(3, 6))
        room -= replicas
        first += [_pod(f"low{a}-{r}", "1", "low", f"low{a}", 30) for r in range(replicas)]
        if replicas > 1 and rng.random() < 0.5:
            first.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": f"low{a}", "namespace": "default"},
                          "spec": {"minAvailable": replicas - 1, "selector": {"matchLabels": {"app": f"low{a}"}}}})
        a += 1
    second: list[Any] = []
    for cls, count, cpu in (("high", rng.randint(1, 4), rng.choice(("1", "2"))), ("mid", rng.randint(2, 5), "1"),
                            ("never", rng.randint(1, 3), "1"), ("low", rng.randint(1, 4), "1")):
        second += [_pod(f"{cls}-{i}", cpu, cls, cls, 30) for i in range(count)]
    rng.shuffle(second)
    return [first, second]
