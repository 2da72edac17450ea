"""A deterministic multi-scheduler cluster for tests: one Store on a virtual clock, a
dispatcher and several scheduler instances (each with its own client, informers, cache and
queue), stepped by hand in a seeded random order. An instance polls its informers only now
and then, as a watch stream lags, so instances race each other for the same room."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.api.watch import MODIFIED
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.dispatch.dispatcher import Dispatcher
from ksched.dispatch.instance import INSTANCE_ANNOTATION, SchedulerInstance
from ksched.dispatch.policy import DispatchPolicy

UPSTREAM_FIT_ERROR = r"^0/(\d+) nodes are available: .+\. no new claims to deallocate, preemption: 0/\1 nodes are available: .+\.$"


def node(name: str, cpu: str = "2", memory: str = "4Gi", pods: int = 110, labels: dict[str, str] | None = None,
         **extra: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **extra}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str = "1", memory: str = "100Mi", *, namespace: str = "default",
        labels: dict[str, str] | None = None, host_port: int = 0, gpu: int = 0,
        node_selector: dict[str, str] | None = None, scheduler_name: str = "") -> dict[str, Any]:
    req: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpu:
        req["nvidia.com/gpu"] = str(gpu)
    c: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10",
                         "resources": {"requests": dict(req), "limits": dict(req)}}
    if host_port:
        c["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    spec: dict[str, Any] = {"containers": [c]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def overcommitted(store: Store) -> dict[str, list[str]]:
    """Nodes whose bound pods request more than allocatable (or exceed the pod count, or share a
    host port), recomputed from scratch from the store: node -> what is over."""
    nodes = {n.name: n for n in store.items("Node")}
    used: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}
    ports: dict[str, list[tuple[str, int]]] = {}
    for p in store.items("Pod"):
        assert isinstance(p, Pod)
        if not p.node_name or p.is_terminal:
            continue
        u = used.setdefault(p.node_name, {})
        # Extended resources the pod got as DRA devices (its extendedResourceClaimStatus) on a node
        # that advertises none of them are its claim's, not the node's allocatable.
        ext = ((p.raw.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings") or ()
        from_dra = {m.get("resourceName") for m in ext}
        alloc = nodes[p.node_name].allocatable  # type: ignore[attr-defined]
        for k, v in pod_requests(p).items():
            if k in from_dra and alloc.get(k, 0) <= 0:
                continue
            u[k] = u.get(k, 0) + v
        count[p.node_name] = count.get(p.node_name, 0) + 1
        for hp in p.host_ports():
            ports.setdefault(p.node_name, []).append((hp.protocol, hp.host_port))
    out: dict[str, list[str]] = {}
    for name, u in used.items():
        alloc = nodes[name].allocatable  # type: ignore[attr-defined]
        over = [k for k, v in u.items() if v > alloc.get(k, 0)]
        if count[name] > alloc.get("pods", 0):
            over.append("pods")
        ps = ports.get(name, [])
        if len(ps) != len(set(ps)):
            over.append("hostPort")
        if over:
            out[name] = over
    return out


@dataclass
class Cluster:
    resolver: bool = True
    seed: int = 0
    lease_duration: float = 10.0
    policy: DispatchPolicy | None = None
    clock: VirtualClock = field(default_factory=VirtualClock)
    pod_conflicts: bool = False  # the resolver also checks anti-affinity, spread, ReadWriteOncePod

    def __post_init__(self) -> None:
        self.store = Store(self.clock, conflict_resolver=self.resolver)
        if self.pod_conflicts:
            self.store.enable_pod_conflicts()
        self.rng = random.Random(self.seed)
        self.dispatcher = Dispatcher(InProcessClient(self.store), clock=self.clock, policy=self.policy)
        self.instances: dict[str, SchedulerInstance] = {}
        self.dead: set[str] = set()
        self.zombies: dict[str, SchedulerInstance] = {}
        # Every binding the store commits, in order: (pod key, node).
        self.bindings: list[tuple[str, str]] = []
        self.store.on_commit.append(self._record)

    def _record(self, etype: str, kind: str, obj: Any, rv: int) -> None:
        if kind == "Pod" and etype == MODIFIED and obj.node_name:
            prev = [n for k, n in self.bindings if k == obj.key]
            if not prev or prev[-1] != obj.node_name:
                self.bindings.append((obj.key, obj.node_name))

    def create(self, objs: Iterable[dict[str, Any]]) -> None:
        for o in objs:
            self.store.create(o)

    def add_instance(self, name: str, labels: dict[str, str] | None = None, partition_label: str = "",
                     partition: str = "", client: InProcessClient | None = None) -> SchedulerInstance:
        inst = SchedulerInstance(client or InProcessClient(self.store), name, labels=labels, partition_label=partition_label,
                                 partition=partition, clock=self.clock, seed=self.rng.randrange(1 << 30),
                                 lease_duration=self.lease_duration, record_events=False)
        assert inst.register()
        inst.scheduler.sync()
        self.instances[name] = inst
        return inst

    @property
    def alive(self) -> list[SchedulerInstance]:
        return [i for n, i in self.instances.items() if n not in self.dead]

    def heartbeat(self) -> None:
        for i in self.alive:
            assert i.registration.heartbeat()

    def kill(self, name: str, *, leave_binding: bool = False) -> None:
        """The instance stops: no more steps, no more heartbeats (its lease runs out). With
        ``leave_binding``, it is frozen mid-cycle: one pod assumed, its binding not yet sent."""
        inst = self.instances[name]
        if leave_binding:
            inst.scheduler.informers.poll()
            inst.scheduler.schedule_one()
        self.dead.add(name)
        self.zombies[name] = inst

    def resume_zombie(self, name: str) -> int:
        """A frozen instance wakes up long after its lease expired and sends the bindings it had
        in flight (then stops for good)."""
        inst = self.zombies.pop(name)
        return inst.scheduler.run_bindings()

    def round(self, poll_prob: float = 0.3) -> bool:
        """One round: the dispatcher steps, then each live instance in random order either polls
        its informers and runs a step, or runs a scheduling cycle on the view it has."""
        moved = self.dispatcher.step()
        order = self.alive
        self.rng.shuffle(order)
        for inst in order:
            s = inst.scheduler
            if self.rng.random() < poll_prob:
                moved = s.step() or moved
            else:
                moved = s.schedule_one() or moved
                moved = s.run_bindings() > 0 or moved
        return moved

    def rounds(self, n: int, poll_prob: float = 0.3) -> None:
        for _ in range(n):
            self.round(poll_prob)

    def race(self, poll_prob: float = 0.3, max_rounds: int = 20000) -> int:
        """Rounds until nothing moves and every watch has been caught up with."""
        rounds = 0
        quiet = 0
        while rounds < max_rounds:
            rounds += 1
            if self.round(poll_prob):
                quiet = 0
                continue
            quiet += 1
            if quiet >= 2 and self.dispatcher.idle() and all(i.scheduler.idle() for i in self.alive):
                return rounds
            for inst in self.alive:
                inst.scheduler.informers.poll()
        raise AssertionError("the cluster did not settle")

    def settle(self, seconds: float = 0.0) -> None:
        """Let virtual time pass (heartbeats keep the live instances' leases), then race to rest."""
        step = max(1.0, self.lease_duration / 4)
        left = seconds
        while left > 0:
            d = min(step, left)
            self.clock.advance(d)
            left -= d
            self.heartbeat()
            self.race()
        self.race()

    def pods(self) -> list[Pod]:
        return [p for p in self.store.items("Pod") if isinstance(p, Pod)]

    def by_instance(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pods():
            inst = p.annotations.get(INSTANCE_ANNOTATION, "")
            out[inst] = out.get(inst, 0) + 1
        return out
