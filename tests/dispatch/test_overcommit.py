"""The problem is real: several instances, each with its own cache, over-commit a tight cluster
when nothing checks bindings; with the API server's conflict resolver on, never. And what an
instance does with a refused binding: forget the assumed pod, retry at once, count it."""

from __future__ import annotations

import re

import pytest
from dispatch_harness import UPSTREAM_FIT_ERROR, Cluster, node, overcommitted, pod

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.dispatch.instance import INSTANCE_ANNOTATION, SchedulerInstance


def tight(resolver: bool, seed: int, n_instances: int) -> Cluster:
    """4 nodes with room for 2 one-CPU pods each, 16 such pods, instances whose watches lag."""
    c = Cluster(resolver=resolver, seed=seed)
    c.create(node(f"n{i}", cpu="2") for i in range(4))
    for i in range(n_instances):
        c.add_instance(f"s{i}")
    c.create(pod(f"p{i}", cpu="1") for i in range(16))
    c.dispatcher.run_until_idle()
    for inst in c.instances.values():
        inst.scheduler.sync()  # every instance holds its pods, and the same (empty) view
    c.race(poll_prob=0.1)
    return c


@pytest.mark.parametrize("n_instances", [2, 3, 4])
def test_without_the_resolver_instances_overcommit_nodes(n_instances: int) -> None:
    over_runs = 0
    for seed in range(5):
        c = tight(False, seed, n_instances)
        over = overcommitted(c.store)
        bound = [p for p in c.pods() if p.node_name]
        if over:
            over_runs += 1
            assert all(what == ["cpu"] for what in over.values())
            assert len(bound) > 8  # more pods placed than the cluster has room for
        assert sum(i.conflicts for i in c.instances.values()) == 0
    assert over_runs == 5  # the race is the rule, not the exception


@pytest.mark.parametrize("n_instances", [2, 3, 4])
def test_with_the_resolver_no_node_is_ever_overcommitted(n_instances: int) -> None:
    conflicts = 0
    for seed in range(5):
        c = tight(True, seed, n_instances)
        assert overcommitted(c.store) == {}
        pods = c.pods()
        bound = [p for p in pods if p.node_name]
        assert len(bound) == 8  # the cluster is full, not under-used
        for p in pods:
            if p.node_name:
                continue
            cond = p.condition("PodScheduled")
            assert cond is not None and cond["reason"] == "Unschedulable"
            assert re.match(UPSTREAM_FIT_ERROR, cond["message"])
            assert cond["message"].startswith("0/4 nodes are available: 4 Insufficient cpu.")
        conflicts += sum(i.conflicts for i in c.instances.values())
        # Every binding the resolver refused was retried: attempts = bound + unschedulable
        # verdicts + refused bindings.
        for inst in c.instances.values():
            s = inst.stats()
            assert s["attempts"] >= s["scheduled"] + s["conflicts"]
    assert conflicts > 0  # the instances did race; the resolver settled it


def test_a_refused_binding_is_forgotten_and_retried_at_once_without_backoff() -> None:
    clock = VirtualClock()
    store = Store(clock)
    # Both instances prefer n1 (more room left after the pod: LeastAllocated), which has room
    # for one pod only.
    store.create(node("n1", cpu="1500m"))
    store.create(node("n2", cpu="1"))
    a = SchedulerInstance(InProcessClient(store), "a", clock=clock, record_events=False, seed=1)
    b = SchedulerInstance(InProcessClient(store), "b", clock=clock, record_events=False, seed=2)
    for name, inst in (("pa", "a"), ("pb", "b")):
        m = pod(name, cpu="1")
        m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: inst}
        store.create(m)
    sa, sb = a.scheduler, b.scheduler
    sa.sync()
    sb.sync()
    assert [q.pod.name for q in sa.queue.pending_pods()] == ["pa"]
    assert [q.pod.name for q in sb.queue.pending_pods()] == ["pb"]
    assert sb.schedule_one() and sb.run_bindings() == 1
    assert store.get("Pod", "default", "pb").node_name == "n1"  # type: ignore[attr-defined]
    # a has not seen that binding: it assumes pa on n1 and the resolver refuses the binding.
    assert sa.schedule_one()
    assert sa.run_bindings() == 1
    assert a.conflicts == 1 and a.stats()["binding_errors"] == 0
    p = store.get("Pod", "default", "pa")
    assert isinstance(p, Pod) and not p.node_name
    assert p.condition("PodScheduled") is None  # not reported unschedulable: it is retried
    # Forgotten (n1 shows nothing of pa in a's cache) and back in activeQ at once, no backoff.
    assert not any(sa.cache.is_assumed(q.pod) for q in sa.queue.pending_pods())
    assert sa.cache.check_invariants() == []
    qpi = sa.queue.pending_pods()[0]
    assert qpi.backoff_expiration is None
    assert sa.queue.has_poppable()  # without the clock moving
    # The retry, once a's informer shows pb, lands on n2.
    sa.informers.poll()
    assert sa.schedule_one() and sa.run_bindings() == 1
    p = store.get("Pod", "default", "pa")
    assert isinstance(p, Pod) and p.node_name == "n2"
    assert overcommitted(store) == {}
    assert a.stats() == {"scheduled": 1, "attempts": 2, "conflicts": 1, "binding_errors": 0}


def test_a_binding_refused_for_a_host_port_seen_meanwhile_is_not_tried_again() -> None:
    """a assumes pa (host port 443) on n1; b binds pb (port 443) there first, and a's informer
    delivers it while pa is still assumed; a's binding is refused. Forgetting pa must leave 443
    in use on n1 (pb holds it): a reports pa unschedulable instead of trying n1 again and again."""
    clock = VirtualClock()
    store = Store(clock)
    store.create(node("n1", cpu="4"))
    a = SchedulerInstance(InProcessClient(store), "a", clock=clock, record_events=False)
    for name, inst in (("pa", "a"), ("pb", "b")):
        m = pod(name, cpu="1", host_port=443)
        m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: inst}
        store.create(m)
    sa = a.scheduler
    sa.sync()
    assert sa.schedule_one()  # pa assumed on n1, binding not sent yet
    store.bind("default", "pb", "n1")
    sa.informers.poll()
    assert sa.run_bindings() == 1 and a.conflicts == 1
    assert sa.run_until_idle(max_steps=10) < 10 and a.conflicts == 1
    p = store.get("Pod", "default", "pa")
    assert isinstance(p, Pod) and not p.node_name
    cond = p.condition("PodScheduled")
    assert cond is not None and "didn't have free ports" in cond["message"]
