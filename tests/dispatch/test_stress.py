"""Seeded random workloads on several instances with the conflict resolver on, one instance
killed mid-run (sometimes frozen with a binding in flight that it sends much later, after its
pods went to others): no node over-committed at any checkpoint, no pod lost, no pod bound
twice, and every pod ends bound or reported unschedulable with upstream's message, by a live
instance that still holds it in its queue, and only when it truly fits nowhere."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from dispatch_harness import UPSTREAM_FIT_ERROR, Cluster, node, overcommitted, pod

from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.dispatch.instance import GROUP_LABEL, INSTANCE_ANNOTATION
from ksched.dispatch.policy import DispatchPolicy

LEASE = 10.0
GPU_POLICY = {"rules": [{"name": "gpu", "pods": {"labelSelector": {"matchLabels": {"accel": "gpu"}}},
                         "instances": {"labelSelector": {"matchLabels": {"gpu": "true"}}}}]}


def random_nodes(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(rng.randint(3, 8)):
        extra = {"nvidia.com/gpu": str(rng.choice([1, 2]))} if rng.random() < 0.3 else {}
        out.append(node(f"n{i}", cpu=rng.choice(["1", "2", "4"]), memory=rng.choice(["2Gi", "4Gi", "8Gi"]),
                        pods=rng.choice([3, 5, 110]), **extra))
    return out


def random_pods(rng: random.Random, prefix: str, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        labels: dict[str, str] = {}
        gpu = 0
        if rng.random() < 0.15:
            gpu = 1
            labels["accel"] = "gpu"
        if rng.random() < 0.2:
            labels[GROUP_LABEL] = f"g{rng.randrange(3)}"
        out.append(pod(f"{prefix}{i}", cpu=f"{rng.choice([100, 250, 500, 1000, 1500])}m",
                       memory=f"{rng.choice([100, 500, 1000, 2000])}Mi", labels=labels or None,
                       host_port=rng.choice([8080, 9090]) if rng.random() < 0.15 else 0, gpu=gpu))
    return out


def fits_somewhere(c: Cluster, p: Pod) -> list[str]:
    """Nodes where ``p`` would fit now (resources, pod count, host ports), from the store."""
    used: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}
    ports: dict[str, set[tuple[str, int]]] = {}
    for q in c.pods():
        if q.node_name:
            u = used.setdefault(q.node_name, {})
            for k, v in pod_requests(q).items():
                u[k] = u.get(k, 0) + v
            count[q.node_name] = count.get(q.node_name, 0) + 1
            ports.setdefault(q.node_name, set()).update((h.protocol, h.host_port) for h in q.host_ports())
    out = []
    for n in c.store.items("Node"):
        alloc = n.allocatable  # type: ignore[attr-defined]
        u = used.get(n.name, {})
        if count.get(n.name, 0) + 1 > alloc.get("pods", 0):
            continue
        if any(v > 0 and u.get(k, 0) + v > alloc.get(k, 0) for k, v in pod_requests(p).items()):
            continue
        if any((h.protocol, h.host_port) in ports.get(n.name, set()) for h in p.host_ports()):
            continue
        out.append(n.name)
    return out


def check_invariants(c: Cluster) -> None:
    assert overcommitted(c.store) == {}
    keys = [k for k, _ in c.bindings]
    assert len(keys) == len(set(keys)), "a pod was bound twice"


@pytest.mark.parametrize("seed", range(12))
def test_random_workload_with_an_instance_killed_mid_run(seed: int) -> None:
    rng = random.Random(seed)
    n_inst = rng.randint(2, 4)
    c = Cluster(resolver=True, seed=seed, lease_duration=LEASE, policy=DispatchPolicy.from_dict(GPU_POLICY))
    c.create(random_nodes(rng))
    for i in range(n_inst):
        c.add_instance(f"s{i}", labels={"gpu": "true"} if i < 2 else None)
    total = 0
    waves = [rng.randint(8, 25) for _ in range(3)]
    c.create(random_pods(rng, "a", waves[0]))
    total += waves[0]
    c.rounds(rng.randint(1, 15), poll_prob=0.2)
    check_invariants(c)
    victim = f"s{rng.randrange(n_inst)}"
    frozen = rng.random() < 0.5
    c.kill(victim, leave_binding=frozen)
    c.create(random_pods(rng, "b", waves[1]))
    total += waves[1]
    c.rounds(rng.randint(1, 15), poll_prob=0.2)
    check_invariants(c)
    # Time passes: the victim's lease runs out and its pods go to the others.
    c.settle(LEASE + 5)
    check_invariants(c)
    assert all(p.annotations.get(INSTANCE_ANNOTATION) != victim for p in c.pods() if not p.node_name)
    if frozen:
        c.resume_zombie(victim)  # its stale binding: refused if the pod is bound or the room is gone
        check_invariants(c)
    c.create(random_pods(rng, "c", waves[2]))
    total += waves[2]
    c.settle(5)
    # Past the unschedulable-pods flush (5 min): every pending pod is tried again.
    c.heartbeat()
    c.clock.advance(301)
    c.heartbeat()
    c.race()
    check_invariants(c)

    pods = c.pods()
    assert len(pods) == total
    live = {i.name: i for i in c.alive}
    for p in pods:
        inst = p.annotations.get(INSTANCE_ANNOTATION, "")
        if p.node_name:
            assert inst, f"{p.key} bound without being dispatched"
            continue
        # Not lost: held by a live instance that knows why it cannot place it.
        assert inst in live, f"{p.key} is dispatched to {inst!r}, which is not alive"
        assert p.uid in live[inst].scheduler.queue.pods, f"{p.key} is in no queue"
        cond = p.condition("PodScheduled")
        assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable", p.key
        assert re.match(UPSTREAM_FIT_ERROR, cond["message"]), cond["message"]
        assert fits_somewhere(c, p) == [], f"{p.key} reported unschedulable but fits: {cond['message']}"
    assert len(c.bindings) == sum(1 for p in pods if p.node_name)
    # The pending pods of one group (without GPU pods, which the policy confines) are all held
    # by one instance, failover included.
    groups: dict[str, list[Pod]] = {}
    for p in pods:
        if GROUP_LABEL in p.labels:
            groups.setdefault(p.labels[GROUP_LABEL], []).append(p)
    for members in groups.values():
        if any("accel" in p.labels for p in members):
            continue
        holders = {p.annotations[INSTANCE_ANNOTATION] for p in members if not p.node_name}
        assert len(holders) <= 1, holders


@pytest.mark.parametrize("zombie_first", [False, True])
def test_a_frozen_instance_sending_its_binding_after_failover_never_binds_twice(zombie_first: bool) -> None:
    c = Cluster(seed=1, lease_duration=LEASE)
    c.create([node("n0", cpu="4"), node("n1", cpu="4")])
    c.add_instance("a")
    b = c.add_instance("b")
    c.create([pod("x", cpu="1")])
    c.dispatcher.run_until_idle()
    owner = c.store.get("Pod", "default", "x").annotations[INSTANCE_ANNOTATION]  # type: ignore[attr-defined]
    other = b if owner == "a" else c.instances["a"]
    c.kill(owner, leave_binding=True)  # x assumed, its binding not yet sent
    assert len(c.zombies[owner].scheduler._binding_tasks) == 1
    # The lease runs out; the dispatcher hands x to the other instance.
    for _ in range(3):
        c.clock.advance(LEASE / 2)
        assert other.registration.heartbeat()
        c.dispatcher.run_until_idle()
    x = c.store.get("Pod", "default", "x")
    assert isinstance(x, Pod) and x.annotations[INSTANCE_ANNOTATION] == other.name and not x.node_name
    if zombie_first:
        assert c.resume_zombie(owner) == 1  # the stale binding lands first: it is valid, it wins
        c.race()
    else:
        c.race()  # the other instance binds x...
        assert c.resume_zombie(owner) == 1  # ...and the stale binding is refused
        c.race()
    x = c.store.get("Pod", "default", "x")
    assert isinstance(x, Pod) and x.node_name
    assert [k for k, _ in c.bindings] == ["default/x"]
    assert not other.scheduler.queue.pods and other.scheduler.cache.check_invariants() == []
