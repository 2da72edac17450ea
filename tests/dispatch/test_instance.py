"""Scheduler instances: the Lease they register with, and the Scheduler they run (only their
pods; with a partition only their nodes; every bound pod in their cache)."""

from __future__ import annotations

import json
import re

import pytest
from dispatch_harness import UPSTREAM_FIT_ERROR, Cluster, node, pod

from ksched.api.lease import Lease
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.dispatch.instance import (
    INSTANCE_ANNOTATION,
    InstanceRegistration,
    SchedulerInstance,
    instance_from_lease,
    validate_instance_name,
)
from ksched.scheduler.recorder import BackgroundWriter


def test_lease_carries_labels_partition_and_stats_and_is_renewed() -> None:
    clock = VirtualClock()
    store = Store(clock)
    r = InstanceRegistration(InProcessClient(store), "gpu-1", labels={"gpu": "true"}, clock=clock,
                             lease_duration=9, identity="gpu-1@host_1", partition_label="zone", partition="a",
                             stats=lambda: {"scheduled": 3})
    assert r.heartbeat()
    lease = store.get("Lease", "kube-system", "ksched-instance-gpu-1")
    assert isinstance(lease, Lease)
    assert lease.labels == {"gpu": "true", "ksched.io/role": "scheduler-instance", "ksched.io/instance": "gpu-1"}
    assert lease.annotations["ksched.io/partition-label"] == "zone"
    assert lease.annotations["ksched.io/partition"] == "a"
    assert json.loads(lease.annotations["ksched.io/stats"]) == {"scheduled": 3}
    assert lease.holder_identity == "gpu-1@host_1" and lease.lease_duration_seconds == 9
    assert r.renew_interval == 3
    t0 = lease.renew_time
    clock.advance(3)
    assert r.heartbeat()
    lease2 = store.get("Lease", "kube-system", "ksched-instance-gpu-1")
    assert isinstance(lease2, Lease)
    assert lease2.renew_time == t0 + 3 and lease2.acquire_time == lease.acquire_time
    info = instance_from_lease(lease2)
    assert info is not None and info.name == "gpu-1" and info.labels == {"gpu": "true"}
    assert (info.partition_label, info.partition, info.released) == ("zone", "a", False)
    # A second process with the same instance name is refused while the lease is live...
    other = InstanceRegistration(InProcessClient(store), "gpu-1", clock=clock, lease_duration=9, identity="x")
    assert not other.heartbeat()
    # ...and a clean shutdown releases it (empty holder): the dispatcher reacts at once.
    r.release()
    lease3 = store.get("Lease", "kube-system", "ksched-instance-gpu-1")
    assert isinstance(lease3, Lease) and lease3.holder_identity == ""
    info3 = instance_from_lease(lease3)
    assert info3 is not None and info3.released
    assert other.heartbeat()  # a released lease is free to take


@pytest.mark.parametrize("bad", ["", "Upper", "-x", "x-", "a_b", "x" * 64])
def test_instance_names_must_be_label_values_and_lease_names(bad: str) -> None:
    assert validate_instance_name(bad) is not None
    with pytest.raises(ValueError):
        InstanceRegistration(InProcessClient(Store()), bad)


def test_reserved_labels_and_half_partitions_are_refused() -> None:
    client = InProcessClient(Store())
    with pytest.raises(ValueError, match="reserved"):
        InstanceRegistration(client, "a", labels={"ksched.io/role": "x"})
    with pytest.raises(ValueError, match="partition"):
        InstanceRegistration(client, "a", partition_label="zone")


def test_instance_schedules_only_its_pods_but_sees_every_bound_pod() -> None:
    c = Cluster()
    c.create([node("n1", cpu="3")])
    a = c.add_instance("a")
    b = c.add_instance("b")
    for i, owner in enumerate(["a", "a", "b"]):
        m = pod(f"p{i}", cpu="1")
        m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: owner}
        c.store.create(m)
    a.scheduler.sync()
    assert sorted(q.pod.name for q in a.scheduler.queue.pending_pods()) == ["p0", "p1"]
    a.run_until_idle()
    b.run_until_idle()
    assert {p.name: p.node_name for p in c.pods()} == {"p0": "n1", "p1": "n1", "p2": "n1"}
    # Both caches count all three pods on n1, whoever bound them.
    for inst in (a, b):
        inst.scheduler.sync()
        inst.scheduler.cache.update_snapshot(inst.scheduler.snapshot)
        ni = inst.scheduler.snapshot.get("n1")
        assert ni is not None and len(ni.pods) == 3
    # A new pod of a's no longer fits: reported as upstream would.
    m = pod("p3", cpu="1")
    m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: "a"}
    c.store.create(m)
    a.run_until_idle()
    p3 = c.store.get("Pod", "default", "p3")
    assert isinstance(p3, Pod) and not p3.node_name
    cond = p3.condition("PodScheduled")
    assert cond is not None and re.match(UPSTREAM_FIT_ERROR, cond["message"])
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_partitioned_instances_see_only_their_nodes_and_never_conflict() -> None:
    c = Cluster(seed=3)
    c.create(node(f"a{i}", cpu="2", labels={"part": "a"}) for i in range(3))
    c.create(node(f"b{i}", cpu="2", labels={"part": "b"}) for i in range(3))
    ia = c.add_instance("ia", partition_label="part", partition="a")
    ib = c.add_instance("ib", partition_label="part", partition="b")
    c.create(pod(f"p{i}", cpu="1") for i in range(14))
    c.dispatcher.run_until_idle()
    for inst in (ia, ib):
        inst.scheduler.sync()
    c.race(poll_prob=0.05)
    placed = {p.name: (p.annotations[INSTANCE_ANNOTATION], p.node_name) for p in c.pods()}
    for owner, node_name in placed.values():
        if node_name:
            assert node_name.startswith(owner[1])  # ia binds only to a*, ib only to b*
    assert sum(1 for _, n in placed.values() if n) == 12
    assert ia.conflicts == 0 and ib.conflicts == 0  # disjoint partitions: nothing to race for
    for p in c.pods():
        if not p.node_name:
            cond = p.condition("PodScheduled")
            assert cond is not None and cond["message"].startswith("0/3 nodes are available")


def test_a_failure_for_a_pod_handed_to_another_instance_meanwhile_is_not_reported() -> None:
    """Instance a's binding fails (API error) after the dispatcher gave the pod to b: a must not
    write its failure into the pod's status, nor keep the pod."""
    from ksched.api.errors import InternalError

    c = Cluster()
    c.create([node("n1", cpu="4")])

    class Flaky(InProcessClient):
        def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
            raise InternalError("etcdserver: request timed out")

    a = c.add_instance("a", client=Flaky(c.store))
    m = pod("x", cpu="1")
    m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: "a"}
    c.store.create(m)
    sa = a.scheduler
    sa.sync()
    assert sa.schedule_one()  # assumed on n1, binding not yet sent
    c.store.patch("Pod", "default", "x", {"metadata": {"annotations": {INSTANCE_ANNOTATION: "b"}}})
    sa.informers.poll()
    assert sa.run_bindings() == 1
    x = c.store.get("Pod", "default", "x")
    assert isinstance(x, Pod) and x.condition("PodScheduled") is None
    assert not sa.queue.pods and sa.cache.check_invariants() == []


def test_threaded_instances_send_events_from_a_background_thread() -> None:
    """As upstream's event broadcaster: the scheduling thread never waits for an Event write;
    queued events are sent before the instance stops; a full queue drops rather than blocks."""
    import threading

    store = Store()
    client = InProcessClient(store)
    inst = SchedulerInstance(client, "a", threaded=True, lease_duration=3)
    writers = {rec.client for rec in inst.scheduler.recorders.values()}
    assert len(writers) == 1 and isinstance(writers.pop(), BackgroundWriter)
    store.create(node("n1"))
    m = pod("x", cpu="1")
    m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: "a"}
    store.create(m)
    inst.start()
    try:
        assert inst.ready.wait(10)
        deadline = threading.Event()
        for _ in range(100):
            if store.get("Pod", "default", "x").node_name:  # type: ignore[attr-defined]
                break
            deadline.wait(0.05)
    finally:
        inst.stop()
    events = [e for e in store.items("Event") if e.raw.get("reason") == "Scheduled"]
    assert len(events) == 1 and events[0].raw["message"] == "Successfully assigned default/x to n1"
    lease = store.get("Lease", "kube-system", "ksched-instance-a")
    assert isinstance(lease, Lease) and lease.holder_identity == ""  # released on stop
    assert json.loads(lease.annotations["ksched.io/stats"])["scheduled"] == 1

    gate = threading.Event()

    class Slow:
        def create(self, obj: object) -> None:
            gate.wait(5)

    w = BackgroundWriter(Slow(), limit=1)
    for _ in range(5):
        w.create({"kind": "Event"})
    assert w.dropped >= 3
    gate.set()
    w.close()
