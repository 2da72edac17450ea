"""What several instances must share to act as one scheduler: the nominations of pods other
instances hold (the room a preemption made stays reserved), the priority order (no instance
binds a low-priority pod while another has a higher one still to try, and the dispatcher hands
out higher priorities first), and PDB budgets (victims under a budget are evicted, so two
instances cannot both spend its last disruption)."""

from __future__ import annotations

import threading
from typing import Any

from dispatch_harness import Cluster, node, pod

from ksched.api.errors import TooManyRequests
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.dispatch.instance import INSTANCE_ANNOTATION, SchedulerInstance
from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption

STATUS = "application/merge-patch+json"


PRIORITIES = (0, 10, 50, 99, 100, 200)


def cluster(**kw: Any) -> Cluster:
    """A Cluster with a PriorityClass ``prio-P`` for each priority the tests use (the API
    server's Priority admission computes spec.priority from the class)."""
    c = Cluster(**kw)
    c.create([{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"prio-{p}"},
               "value": p} for p in PRIORITIES])
    return c


def ppod(name: str, cpu: str, priority: int, owner: str = "", **kw: Any) -> dict[str, Any]:
    m = pod(name, cpu=cpu, **kw)
    m["spec"]["priorityClassName"] = f"prio-{priority}"
    m["spec"]["priority"] = priority
    if owner:
        m["metadata"]["annotations"] = {INSTANCE_ANNOTATION: owner}
    return m


def preemption_of(inst: SchedulerInstance) -> DefaultPreemption:
    (pf,) = (p for p in inst.scheduler.profiles["default-scheduler"].points["postFilter"]
             if isinstance(p, DefaultPreemption))
    return pf


def get(c: Cluster, name: str) -> Pod:
    p = c.store.get("Pod", "default", name)
    assert isinstance(p, Pod)
    return p


def nominate(c: Cluster, name: str, node_name: str) -> None:
    c.store.patch("Pod", "default", name, {"status": {"nominatedNodeName": node_name or None}}, STATUS, "status")


def mark_tried(c: Cluster, name: str) -> None:
    c.store.patch("Pod", "default", name, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}]}},
        STATUS, "status")


# ---------------------------------------------------------------------------- nominations


def test_an_instance_reserves_the_room_another_instance_nominated_a_pod_to() -> None:
    """h (priority 100, b's) is nominated to n1 after its preemption; m (priority 50, a's) must
    not take that room, as one scheduler would keep it for h; m goes to n2."""
    c = cluster()
    c.create([node("n1", cpu="2"), node("n2", cpu="1")])
    a = c.add_instance("a")
    b = c.add_instance("b")
    c.store.create(ppod("h", "2", 100, owner="b"))
    nominate(c, "h", "n1")
    mark_tried(c, "h")  # tried (it preempted): nothing holds a back
    c.store.create(ppod("m", "1", 50, owner="a"))
    a.scheduler.sync()
    assert a.scheduler.queue.nominator.nominated_node(get(c, "h")) == "n1"
    assert [pi.pod.name for pi in a.scheduler.queue.nominator.pods_for_node("n1")] == ["h"]
    a.run_until_idle()
    assert get(c, "m").node_name == "n2"
    b.scheduler.sync()
    b.run_until_idle()
    assert get(c, "h").node_name == "n1"


def test_without_room_elsewhere_the_lower_priority_pod_waits_for_the_nominated_one() -> None:
    c = cluster()
    c.create([node("n1", cpu="2")])
    a = c.add_instance("a")
    c.store.create(ppod("h", "2", 100, owner="b"))
    nominate(c, "h", "n1")
    mark_tried(c, "h")
    c.store.create(ppod("m", "1", 50, owner="a"))
    a.scheduler.sync()
    a.run_until_idle()
    m = get(c, "m")
    assert not m.node_name
    cond = m.condition("PodScheduled")
    assert cond is not None and cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # A pod of the same priority as h is kept out too (nominated pods of >= priority count);
    # one of higher priority is not (it may take the room, as upstream).
    c.store.create(ppod("top", "2", 200, owner="a"))
    a.run_until_idle()
    assert get(c, "top").node_name == "n1"


def test_the_nominator_follows_a_pod_across_instances() -> None:
    """Another instance's pod: its status.nominatedNodeName, added, changed, cleared, deleted;
    handed to us, the queue takes the nomination over; handed away, the nominator keeps it."""
    c = cluster()
    c.create([node("n1", cpu="4"), node("n2", cpu="4")])
    a = c.add_instance("a")
    nom = a.scheduler.queue.nominator
    c.store.create(ppod("x", "1", 10, owner="b", node_selector={"none": "x"}))
    a.scheduler.sync()
    assert nom.nominated_node(get(c, "x")) == "" and len(nom) == 0
    nominate(c, "x", "n1")
    a.scheduler.sync()
    assert nom.nominated_node(get(c, "x")) == "n1"
    nominate(c, "x", "n2")
    a.scheduler.sync()
    assert nom.nominated_node(get(c, "x")) == "n2" and nom.node_names() == ["n2"]
    # Handed to a: in its queue now, still nominated to n2.
    c.store.patch("Pod", "default", "x", {"metadata": {"annotations": {INSTANCE_ANNOTATION: "a"}}})
    a.scheduler.sync()
    assert [q.pod.name for q in a.scheduler.queue.pending_pods()] == ["x"]
    assert nom.nominated_node(get(c, "x")) == "n2" and len(nom) == 1
    # Handed back to b: out of a's queue, still reserved.
    c.store.patch("Pod", "default", "x", {"metadata": {"annotations": {INSTANCE_ANNOTATION: "b"}}})
    a.scheduler.sync()
    assert not a.scheduler.queue.pending_pods()
    assert nom.nominated_node(get(c, "x")) == "n2" and len(nom) == 1
    nominate(c, "x", "")
    a.scheduler.sync()
    assert len(nom) == 0
    nominate(c, "x", "n1")
    a.scheduler.sync()
    assert len(nom) == 1
    c.store.delete("Pod", "default", "x")
    a.scheduler.sync()
    assert len(nom) == 0
    # Pods of schedulers we do not run are none of our business.
    c.store.create(ppod("other", "1", 10, owner="b", scheduler_name="someone-else"))
    nominate(c, "other", "n1")
    a.scheduler.sync()
    assert len(nom) == 0


# ---------------------------------------------------------------------------- priority order


def test_the_barrier_counts_only_untried_pods_of_other_instances() -> None:
    c = cluster()
    c.create([node("n1", cpu="4")])
    a = c.add_instance("a")
    barrier = a.barrier
    assert barrier is not None and a.scheduler.queue.hold == barrier.holds
    cases = {
        "untried": (ppod("untried", "1", 100, owner="b"), True),
        "mine": (ppod("mine", "1", 100, owner="a"), False),
        "undispatched": (ppod("undispatched", "1", 100), False),
        "tried": (ppod("tried", "1", 100, owner="b"), False),
        "nominated": (ppod("nominated", "1", 100, owner="b"), False),
        "gated": (ppod("gated", "1", 100, owner="b"), False),
        "other-scheduler": (ppod("other-scheduler", "1", 100, owner="b", scheduler_name="x"), False),
        "bound": (ppod("bound", "1", 100, owner="b"), False),
    }
    cases["gated"][0]["spec"]["schedulingGates"] = [{"name": "wait"}]
    for m, _ in cases.values():
        c.store.create(m)
    mark_tried(c, "tried")
    nominate(c, "nominated", "n1")
    c.store.bind("default", "bound", "n1")
    a.scheduler.sync()
    assert {k: barrier.untried_elsewhere(get(c, k)) for k in cases} == {k: v for k, (_, v) in cases.items()}
    assert len(barrier) == 1 and barrier.highest == 100
    assert barrier.holds(Pod.from_dict(ppod("low", "1", 99)))
    assert not barrier.holds(Pod.from_dict(ppod("same", "1", 100)))
    # The gates removed: the SchedulingGated condition the API server wrote does not count as a try.
    c.store.patch("Pod", "default", "gated", {"spec": {"schedulingGates": None}})
    a.scheduler.sync()
    assert barrier.untried_elsewhere(get(c, "gated")) and len(barrier) == 2
    mark_tried(c, "untried")
    c.store.delete("Pod", "default", "gated")
    a.scheduler.sync()
    assert len(barrier) == 0 and barrier.highest is None


def test_an_instance_holds_its_lower_priority_pods_until_another_tries_its_higher_one() -> None:
    """One node with room for one pod. Without the barrier a would bind its low pod before b
    gets to its high one, which would then preempt it; one scheduler binds the high one and
    leaves the low one pending."""
    c = cluster()
    c.create([node("n1", cpu="1")])
    a = c.add_instance("a")
    b = c.add_instance("b")
    c.store.create(ppod("low", "1", 0, owner="a"))
    c.store.create(ppod("high", "1", 100, owner="b"))
    a.scheduler.sync()
    assert a.barrier is not None and a.barrier.highest == 100
    assert not a.step() or not get(c, "low").node_name
    assert a.scheduler.idle() and a.run_until_idle() == 0 and not get(c, "low").node_name
    b.scheduler.sync()
    b.run_until_idle()
    assert get(c, "high").node_name == "n1"
    a.run_until_idle()
    low = get(c, "low")
    assert not low.node_name and low.condition("PodScheduled") is not None
    # Pods of equal priority are never held: another untried pod of b's at priority 0.
    c.store.create(node("n2", cpu="1"))
    c.store.create(ppod("peer", "1", 0, owner="b"))
    c.store.create(ppod("low2", "1", 0, owner="a", node_selector={"kubernetes.io/hostname": "n2"}))
    a.run_until_idle()
    assert get(c, "low2").node_name == "n2"


def test_priority_barrier_turned_off_with_a_partition() -> None:
    c = cluster()
    inst = SchedulerInstance(InProcessClient(c.store), "p", partition_label="zone", partition="a", clock=c.clock)
    assert inst.barrier is None and inst.scheduler.queue.hold is None


def test_dispatcher_hands_out_higher_priorities_first_and_one_band_at_a_time() -> None:
    c = cluster()
    c.add_instance("a")
    for name, prio in (("l1", 0), ("m1", 50), ("h1", 100), ("l2", 0), ("h2", 100)):
        c.store.create(ppod(name, "1", prio))
    d = c.dispatcher
    d.informers.poll()
    order: list[str] = []
    release = threading.Event()

    class Slow(InProcessClient):
        def patch(self, kind: str, namespace: str, name: str, body: Any, *args: Any) -> Any:
            order.append(name)
            release.wait(10)
            return super().patch(kind, namespace, name, body, *args)

    d.client = Slow(c.store)
    from concurrent.futures import ThreadPoolExecutor

    d._executor = ThreadPoolExecutor(4)
    try:
        # Both priority-100 pods go out together; nothing of lower priority while they are in flight.
        assert d.dispatch(limit=10) == 2
        assert d.dispatch(limit=10) == 0
        release.set()
        d._executor.shutdown(wait=True)
        d._executor = ThreadPoolExecutor(4)
        d._drain_completed()
        assert d.dispatch(limit=10) == 1  # m1
        d._executor.shutdown(wait=True)
        d._drain_completed()
        d._executor = None
        assert d.dispatch() == 2  # l1, l2 (answered at once without an executor)
    finally:
        if d._executor is not None:
            d._executor.shutdown(wait=True)
    assert sorted(order[:2]) == ["h1", "h2"] and order[2:] == ["m1", "l1", "l2"]
    assert {p.name for p in c.pods() if p.annotations.get(INSTANCE_ANNOTATION) == "a"} == {"l1", "m1", "h1", "l2", "h2"}


def test_a_dead_instances_pods_no_one_may_take_stop_holding_the_others_back() -> None:
    """b dies holding an untried high-priority pod the policy lets no one else take: the
    dispatcher removes its annotation, so a's low-priority pods go on."""
    from ksched.dispatch.policy import DispatchPolicy

    policy = DispatchPolicy.from_dict({"rules": [
        {"name": "gpu", "pods": {"labelSelector": {"matchLabels": {"gpu": "yes"}}},
         "instances": {"labelSelector": {"matchLabels": {"gpu": "true"}}}}]})
    c = cluster(policy=policy)
    c.create([node("n1", cpu="2")])
    a = c.add_instance("a")
    b = c.add_instance("b", labels={"gpu": "true"})
    c.store.create(ppod("gpu", "1", 100, labels={"gpu": "yes"}))
    c.dispatcher.run_until_idle()
    assert get(c, "gpu").annotations[INSTANCE_ANNOTATION] == "b"
    c.kill("b")
    c.store.create(ppod("low", "1", 0))
    c.settle(seconds=c.lease_duration * 2)
    assert INSTANCE_ANNOTATION not in get(c, "gpu").annotations and c.dispatcher.released == 1
    assert a.barrier is not None and len(a.barrier) == 0
    assert get(c, "low").node_name == "n1"
    assert b.barrier is not None


# ---------------------------------------------------------------------------- PDB budgets


def test_two_instances_preempting_at_once_spend_a_pdb_budget_once() -> None:
    """A PDB allows one disruption of web (two replicas, one per node). a and b each preempt
    for a high-priority pod, b on a view that has not seen a's preemption yet: b's victim is
    refused by the eviction API (429) instead of being deleted, so the budget holds."""
    c = cluster()
    c.create([node("n1", cpu="1"), node("n2", cpu="1")])
    for i in (1, 2):
        m = ppod(f"web{i}", "1", 0, labels={"app": "web"})
        m["spec"]["terminationGracePeriodSeconds"] = 30
        c.store.create(m)
        c.store.bind("default", f"web{i}", f"n{i}")
        c.store.patch("Pod", "default", f"web{i}", {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, STATUS, "status")
    c.store.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    c.store.patch("PodDisruptionBudget", "default", "web", {"status": {
        "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}, STATUS, "status")
    a = c.add_instance("a")
    b = c.add_instance("b")
    c.store.create(ppod("ha", "1", 100, owner="a", node_selector={"kubernetes.io/hostname": "n1"}))
    c.store.create(ppod("hb", "1", 100, owner="b", node_selector={"kubernetes.io/hostname": "n2"}))
    mark_tried(c, "ha")
    mark_tried(c, "hb")
    a.scheduler.sync()
    b.scheduler.sync()
    refused: list[str] = []
    for inst in (a, b):
        ex = preemption_of(inst).executor
        remove = ex.remove_victim

        def spy(cand: Any, victim: Pod, remove: Any = remove) -> None:
            try:
                remove(cand, victim)
            except TooManyRequests:
                refused.append(victim.name)
                raise

        ex.remove_victim = spy
    assert a.scheduler.schedule_one()  # a preempts one replica (its view: one disruption allowed)
    assert b.scheduler.schedule_one()  # b has not seen it: it tries the other one
    assert get(c, "web1").deletion_timestamp is not None
    assert refused == ["web2"] and get(c, "web2").deletion_timestamp is None
    pdb = c.store.get("PodDisruptionBudget", "default", "web")
    assert pdb.raw["status"]["disruptionsAllowed"] == 0  # type: ignore[attr-defined]
    # hb's attempt failed (it is tried again); on a fresh view b knows the budget is spent.
    assert not get(c, "hb").node_name
    b.scheduler.sync()
    assert preemption_of(b).evaluator.pdb_lister()[0].disruptions_allowed == 0
