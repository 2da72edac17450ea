"""The scheduling loop end to end: embedded store + in-process client + scheduler on a virtual
clock (upstream schedule_one_test.go TestSchedulerScheduleOne and friends)."""

from __future__ import annotations

import threading
import time
from typing import Any

from core_helpers import (
    CallLog,
    Env,
    FakeFit,
    WaitingPermit,
    bind_plugin,
    config,
    fake_filter,
    label_score,
    post_bind_plugin,
    post_filter_plugin,
    pre_bind_plugin,
    profile_cfg,
    reserve_plugin,
)

from ksched.api.pod import Pod
from ksched.clock import RealClock
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import PreBindPlugin
from ksched.scheduler.framework.status import Code
from ksched.scheduler.queue.scheduling_queue import BACKOFF, UNSCHEDULABLE
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

UPSTREAM_CORE = ("PrioritySort", "SchedulingGates", "NodeUnschedulable", "NodeName", "DefaultBinder")


def cond(pod: Pod) -> dict[str, Any] | None:
    return pod.condition("PodScheduled")


def fit_env(*extra: Any, plugins: tuple[type, ...] = (), **kw: Any) -> Env:
    cfg = config(profile_cfg("FakeFit", *extra, core=UPSTREAM_CORE))
    return Env(cfg, (FakeFit, *plugins), **kw)


def cpu_pod(name: str, cpu: str = "1", **kw: Any) -> Pod:
    return make_pod(name, requests={"cpu": cpu, "memory": "1Mi"}, **kw)


# ------------------------------------------------------------------------------------ binding


def test_pods_bound_through_the_store():
    env = fit_env()
    env.create(make_node("n1", cpu="2"), make_node("n2", cpu="2"))
    env.create(*(cpu_pod(f"p{i}") for i in range(4)))
    env.run()
    pods = env.pods()
    assert all(p.node_name for p in pods)
    assert sorted(p.node_name for p in pods) == ["n1", "n1", "n2", "n2"]
    for p in pods:
        c = cond(p)
        assert c is not None and c["status"] == "True"
    evs = env.events("Scheduled")
    assert len(evs) == 4
    assert {e.raw["message"] for e in evs} == {f"Successfully assigned default/{p.name} to {p.node_name}"
                                             for p in pods}
    assert all(e.raw["type"] == "Normal" and e.raw["source"]["component"] == "default-scheduler" for e in evs)
    # The informer confirmed every assumed pod.
    assert env.sched.cache.assumed == set()
    assert env.sched.cache.pod_count() == 4
    assert env.sched.cache.check_invariants() == []
    assert env.sched.scheduled == 4
    assert len(env.sched.queue) == 0
    reg = env.sched.metrics.registry
    assert reg.get_sample_value("scheduler_schedule_attempts_total",
                                {"result": "scheduled", "profile": "default-scheduler"}) == 4


def test_unschedulable_pod_gets_condition_and_event():
    env = fit_env()
    env.create(make_node("n1", cpu="1"), make_node("n2", cpu="1", unschedulable=True),
               make_node("n3", cpu="1", unschedulable=True))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    p = env.pod("big")
    assert p.node_name == ""
    msg = ("0/3 nodes are available: 1 Insufficient slots or cpu, 2 node(s) were unschedulable.")
    c = cond(p)
    assert c == {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                 "lastProbeTime": None, "lastTransitionTime": c["lastTransitionTime"]}
    (ev,) = env.events("FailedScheduling", "big")
    assert ev.raw["message"] == msg and ev.raw["type"] == "Warning" and ev.raw["action"] == "Scheduling"
    qpi = env.sched.queue.pods[p.uid]
    assert qpi.where == UNSCHEDULABLE
    assert qpi.unschedulable_plugins == {"FakeFit", "NodeUnschedulable"}
    reg = env.sched.metrics.registry
    assert reg.get_sample_value("scheduler_schedule_attempts_total",
                                {"result": "unschedulable", "profile": "default-scheduler"}) == 1


def test_repeated_failures_aggregate_events_and_keep_transition_time():
    env = fit_env()
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    first = cond(env.pod("big"))
    for _ in range(3):
        env.advance(400)  # leftover flush retries it
    assert env.sched.attempts["default/big"] >= 3
    (ev,) = env.events("FailedScheduling", "big")
    assert ev.raw["count"] == env.sched.attempts["default/big"]
    assert cond(env.pod("big"))["lastTransitionTime"] == first["lastTransitionTime"]


def test_unschedulable_pod_scheduled_when_a_node_appears():
    env = fit_env()
    env.create(make_node("small", cpu="1"))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    assert env.node_of("big") == ""
    env.create(make_node("large", cpu="4"))
    env.run()
    # The node's hint moves the pod to backoffQ; activeQ being empty, it is popped from there at once.
    assert env.node_of("big") == "large"
    assert cond(env.pod("big"))["status"] == "True"


def test_pod_scheduled_when_a_pod_goes_away():
    env = fit_env()
    env.create(make_node("n1", cpu="2"))
    env.create(cpu_pod("a", cpu="2"))
    env.run()
    env.create(cpu_pod("b", cpu="2"))
    env.run()
    assert env.node_of("b") == ""
    env.store.delete("Pod", "default", "a", grace_period_seconds=0)
    env.advance(2)
    assert env.node_of("b") == "n1"


def test_priority_decides_who_gets_the_last_slot():
    env = fit_env()
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("low", priority=1), cpu_pod("high", priority=100), cpu_pod("mid", priority=50))
    env.run()
    assert env.node_of("high") == "n1"
    assert env.node_of("low") == "" and env.node_of("mid") == ""


def test_other_scheduler_names_are_ignored():
    env = fit_env()
    env.create(make_node("n1"))
    env.create(cpu_pod("mine"), cpu_pod("theirs", scheduler_name="other-scheduler"))
    env.run()
    assert env.node_of("mine") == "n1"
    assert env.node_of("theirs") == ""
    assert env.events(name="theirs") == []
    assert all(q.pod.name != "theirs" for q in env.sched.queue.pending_pods())


def test_several_profiles():
    only_a = fake_filter("OnlyA", lambda p, ni: ni.name.startswith("a"), reason="not an a-node")
    only_b = fake_filter("OnlyB", lambda p, ni: ni.name.startswith("b"), reason="not a b-node")
    cfg = config(profile_cfg("OnlyA", name="sched-a"), profile_cfg("OnlyB", name="sched-b"))
    env = Env(cfg, (only_a, only_b))
    env.create(make_node("a1"), make_node("b1"))
    env.create(cpu_pod("pa", scheduler_name="sched-a"), cpu_pod("pb", scheduler_name="sched-b"),
               cpu_pod("pd"))
    env.run()
    assert env.node_of("pa") == "a1" and env.node_of("pb") == "b1"
    assert env.node_of("pd") == ""  # default-scheduler is not one of the profiles
    (ev,) = env.events("Scheduled", "pa")
    assert ev.raw["source"]["component"] == "sched-a"


def test_scheduled_pods_from_elsewhere_fill_the_cache():
    env = fit_env()
    env.create(make_node("n1", cpu="2"))
    env.create(cpu_pod("bound", cpu="2", node_name="n1"))
    env.create(cpu_pod("p"))
    env.run()
    assert env.node_of("p") == ""
    assert env.sched.cache.nodes["n1"].requested["cpu"] == 2000


def test_no_nodes():
    env = fit_env()
    env.create(cpu_pod("p"))
    env.run()
    c = cond(env.pod("p"))
    assert c["reason"] == "Unschedulable"
    assert c["message"] == "no nodes available to schedule pods"
    qpi = env.sched.queue.pods[env.pod("p").uid]
    assert qpi.consecutive_errors_count == 1  # retried after backoff without any event
    env.create(make_node("n1"))
    env.advance(2)
    assert env.node_of("p") == "n1"


def test_pod_deleted_while_unschedulable():
    env = fit_env()
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    assert len(env.sched.queue) == 1
    env.store.delete("Pod", "default", "big", grace_period_seconds=0)
    env.run()
    assert len(env.sched.queue) == 0 and env.sched.queue.unschedulable == {}
    attempts = env.sched.attempts["default/big"]
    env.advance(3600)
    assert env.sched.attempts["default/big"] == attempts


def test_deleting_pods_are_skipped():
    env = fit_env()
    env.create(make_node("n1"))
    env.run()
    pod = cpu_pod("going", deletion_timestamp="2025-01-01T00:00:00Z")
    env.sched.queue.add(pod)
    assert env.sched.schedule_one()
    assert env.sched.scheduled == 0
    (ev,) = env.events("FailedScheduling", "going")
    assert ev.raw["message"] == "skip schedule deleting pod: default/going"
    assert env.sched.queue.in_flight == {}


def test_post_filter_message_and_nomination():
    pf = post_filter_plugin("FakePreemption", code=Code.UNSCHEDULABLE, message="preemption: not helpful")
    env = fit_env("FakePreemption", plugins=(pf,))
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    msg = "0/1 nodes are available: 1 Insufficient slots or cpu. preemption: not helpful"
    assert cond(env.pod("big"))["message"] == msg
    nominating = post_filter_plugin("FakeNominator", code=Code.UNSCHEDULABLE, message="preemption: nominated",
                                    nominate="n1")
    env = fit_env("FakeNominator", plugins=(nominating,))
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2"))
    env.run()
    p = env.pod("big")
    assert p.nominated_node_name == "n1"
    assert env.sched.queue.nominator.nominated_node(p) == "n1"


# --------------------------------------------------------------------------- reserve / permit / bind


def test_reserve_failure_unreserves_in_reverse_and_forgets():
    log = CallLog()
    r1, r2, r3 = (reserve_plugin(n, log) for n in ("R1", "R2", "R3"))
    env = fit_env("R1", "R2", "R3", plugins=(r1, r2, r3))
    env.create(make_node("n1"))
    env.create(cpu_pod("p", labels={"fail-reserve": "R2"}))
    env.run()
    assert env.node_of("p") == ""
    assert log.points("reserve") == ["R1", "R2"]
    assert log.points("unreserve") == ["R3", "R2", "R1"]
    assert env.sched.cache.pod_count() == 0 and env.sched.cache.assumed == set()
    # Upstream wraps the rejection in a FitError over the one chosen node.
    c = cond(env.pod("p"))
    assert c["reason"] == "Unschedulable"
    assert c["message"] == "0/1 nodes are available: 1 reserve failed at R2."
    assert env.sched.queue.pods[env.pod("p").uid].unschedulable_plugins == {"R2"}


def test_reserve_error_is_a_scheduler_error():
    log = CallLog()
    env = fit_env("R1", plugins=(reserve_plugin("R1", log),))
    env.create(make_node("n1"))
    env.create(cpu_pod("p", labels={"error-reserve": "R1"}))
    env.run()
    c = cond(env.pod("p"))
    assert c["reason"] == "SchedulerError" and "reserve error at R1" in c["message"]
    qpi = env.sched.queue.pods[env.pod("p").uid]
    assert qpi.consecutive_errors_count == 1 and qpi.where == BACKOFF


def test_permit_wait_then_allow():
    env = fit_env("WaitingPermit", plugins=(WaitingPermit,))
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("p", labels={"wait": "1"}))
    env.run()
    p = env.pod("p")
    assert p.node_name == ""
    assert env.sched.cache.is_assumed(p)
    assert env.sched.cache.nodes["n1"].requested["cpu"] == 1000  # the room stays reserved
    # Another pod does not get the reserved room.
    env.create(cpu_pod("q"))
    env.run()
    assert env.node_of("q") == ""
    fw = env.sched.profiles["default-scheduler"]
    fw.get_waiting_pod(p.uid).allow("WaitingPermit")
    env.run()
    assert env.node_of("p") == "n1"


def _nominations(env: Env, name: str) -> list[tuple[str, str]]:
    """(nominatedNodeName, nodeName) of each stored version of the pod, in order."""
    w = env.store.watch("Pod", resource_version="1")
    return [(e.object.nominated_node_name, e.object.node_name) for e in w.drain()
            if e.object is not None and e.object.name == name]


def test_nominated_node_is_written_before_a_binding_that_waits():
    """NominatedNodeNameForExpectation (beta, on in 1.36): a pod whose PreBind has work, or
    that waits at Permit, gets the chosen node as nominatedNodeName before it is bound;
    binding then clears it. A pod bound at once gets no such write."""
    log = CallLog()
    env = fit_env("WaitingPermit", "PB", plugins=(WaitingPermit, pre_bind_plugin("PB", log, only_labelled=True)))
    env.create(make_node("n1"))
    env.create(cpu_pod("plain"))
    env.create(cpu_pod("prebind", labels={"prebind": "PB"}))
    env.create(cpu_pod("waits", labels={"wait": "1"}))
    env.run()
    assert _nominations(env, "plain") == [("", ""), ("", "n1")]
    assert _nominations(env, "prebind") == [("", ""), ("n1", ""), ("", "n1")]
    assert _nominations(env, "waits")[-1] == ("n1", "")  # still waiting at Permit
    fw = env.sched.profiles["default-scheduler"]
    fw.get_waiting_pod(env.pod("waits").uid).allow("WaitingPermit")
    env.run()
    assert _nominations(env, "waits")[-2:] == [("n1", ""), ("", "n1")]


def test_a_failed_binding_clears_the_nomination_its_binding_cycle_wrote():
    """Upstream's handleBindingCycleError passes clearNominatedNode: a binding cycle that wrote
    the chosen node as nominatedNodeName (NominatedNodeNameForExpectation) and then fails takes
    it back, even before the scheduler's informer has shown the nomination. Otherwise the node
    stays reserved for the pod (the nominator follows status.nominatedNodeName) while it backs
    off, and equal or lower priority pods are kept off it."""
    log = CallLog()
    env = fit_env("PB", plugins=(pre_bind_plugin("PB", log, only_labelled=True),))
    env.create(make_node("n1", cpu="2"))
    env.create(cpu_pod("p", labels={"prebind": "PB", "fail-prebind": "1"}))
    env.run()
    p = env.pod("p")
    assert p.node_name == "" and cond(p)["reason"] == "SchedulerError"
    assert _nominations(env, "p") == [("", ""), ("n1", ""), ("", "")]
    assert env.sched.queue.nominator.nominated_node(p) == ""
    # The node's room is not held for the pod while it backs off.
    env.create(cpu_pod("q", cpu="2"))
    env.run()
    assert env.node_of("q") == "n1"


def test_a_binding_refused_as_a_conflict_clears_the_nomination_its_binding_cycle_wrote():
    """A binding the conflict resolver refuses (409: another scheduler took the room while
    this pod's PreBind worked) is a failed binding too: upstream clears the nomination its
    binding cycle wrote. Here the pod goes straight back to the queue (no backoff), is found not
    to fit, and PostFilter nominates nothing, which leaves the nomination as it is: it must not
    still name the node that was lost."""
    env_box: list[Env] = []

    class Intruder(PreBindPlugin):
        name = "Intruder"

        def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Any:
            return None

        def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Any:
            # Another scheduler binds a pod that takes the whole node meanwhile.
            store = env_box[0].store
            if store.get("Pod", "default", "intruder").node_name == "":
                store.bind("default", "intruder", node_name)
            return None

    pf = post_filter_plugin("FakePreemption", code=Code.UNSCHEDULABLE, message="preemption: not helpful")
    env = fit_env("Intruder", "FakePreemption", plugins=(Intruder, pf))
    env_box.append(env)
    env.create(make_node("n1", cpu="2"))
    env.create(cpu_pod("intruder", cpu="2", scheduler_name="someone-else"))
    env.create(cpu_pod("p", cpu="2"))
    env.run()
    assert env.node_of("intruder") == "n1"
    p = env.pod("p")
    assert p.node_name == "" and cond(p)["reason"] == "Unschedulable"
    assert any(e.raw["message"].startswith("Binding rejected: ") for e in env.events("FailedScheduling", "p"))
    assert p.nominated_node_name == ""
    assert env.sched.queue.nominator.nominated_node(p) == ""


def test_permit_timeout_rejects_on_the_virtual_clock():
    env = fit_env("WaitingPermit", plugins=(WaitingPermit,))
    env.create(make_node("n1"))
    env.create(cpu_pod("p", labels={"wait": "1", "permit-timeout": "30"}))
    env.run()
    assert env.sched.next_wakeup() == env.clock.now() + 30
    env.advance(29)
    assert env.sched.cache.is_assumed(env.pod("p"))
    env.advance(1)
    p = env.pod("p")
    assert p.node_name == "" and not env.sched.cache.is_assumed(p)
    c = cond(p)
    assert c["reason"] == "Unschedulable"
    assert c["message"] == "0/1 nodes are available: 1 rejected due to timeout after waiting at plugin WaitingPermit."
    qpi = env.sched.queue.pods[p.uid]
    assert qpi.unschedulable_plugins == {"WaitingPermit"}


def test_permit_reject_and_deleted_waiting_pod():
    env = fit_env("WaitingPermit", plugins=(WaitingPermit,))
    env.create(make_node("n1"))
    env.create(cpu_pod("r", labels={"reject-permit": "1"}))
    env.create(cpu_pod("w", labels={"wait": "1"}))
    env.run()
    assert cond(env.pod("r"))["message"] == "0/1 nodes are available: 1 rejected at permit."
    w = env.pod("w")
    assert env.sched.cache.is_assumed(w)
    env.store.delete("Pod", "default", "w", grace_period_seconds=0)
    env.run()
    assert not env.sched.cache.is_assumed(w)
    assert env.sched.cache.pod_count() == 0
    assert env.sched.profiles["default-scheduler"].waiting_pods == {}


def test_binding_cycle_order_and_bind_skip_fall_through():
    log = CallLog()
    skip = bind_plugin("SkipBind", log, skip=True)
    real = bind_plugin("RealBind", log)
    pre = pre_bind_plugin("PreBind1", log)
    post = post_bind_plugin("PostBind1", log)
    cfg = config(profile_cfg("FakeFit", "SkipBind", "RealBind", "PreBind1", "PostBind1",
                             core=("PrioritySort",)))
    env = Env(cfg, (FakeFit, skip, real, pre, post))
    env.create(make_node("n1"))
    env.create(cpu_pod("p"))
    env.run()
    assert env.node_of("p") == "n1"
    assert [(c[0], c[1]) for c in log.calls] == [("PreBind1", "preBind"), ("SkipBind", "bind"),
                                                   ("RealBind", "bind"), ("PostBind1", "postBind")]


def test_bind_error_requeues_with_backoff():
    log = CallLog()
    r1 = reserve_plugin("R1", log)
    err = bind_plugin("ErrBind", log, error=True)
    cfg = config(profile_cfg("FakeFit", "R1", "ErrBind", core=("PrioritySort",)))
    env = Env(cfg, (FakeFit, r1, err))
    env.create(make_node("n1"))
    env.create(cpu_pod("p"))
    env.run()
    p = env.pod("p")
    assert p.node_name == ""
    assert log.points("unreserve") == ["R1"]
    assert env.sched.cache.pod_count() == 0
    c = cond(p)
    assert c["reason"] == "SchedulerError" and "bind error at ErrBind" in c["message"]
    qpi = env.sched.queue.pods[p.uid]
    assert qpi.where == BACKOFF and qpi.consecutive_errors_count == 1
    env.advance(1.5)  # errors are not popped early from backoffQ: the window of T+1 is not over
    assert log.points("bind") == ["ErrBind"]
    env.advance(0.5)
    assert log.points("bind") == ["ErrBind", "ErrBind"]


def test_prebind_failure():
    log = CallLog()
    pre = pre_bind_plugin("PB", log, fail=True)
    env = fit_env("PB", plugins=(pre,))
    env.create(make_node("n1"))
    env.create(cpu_pod("p"))
    env.run()
    assert env.node_of("p") == ""
    assert env.sched.cache.pod_count() == 0
    assert cond(env.pod("p"))["reason"] == "SchedulerError"


class _Competitor(PreBindPlugin):
    """Just before binding, another scheduler instance binds a pod to the same node."""

    name = "Competitor"
    done: set[str] = set()

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        if "race" in pod.labels and pod.name not in self.done:
            self.done.add(pod.name)
            self.handle.client.create(cpu_pod(f"rival-of-{pod.name}", cpu="2", node_name=node_name))
        return None


def test_binding_conflict_retried_without_backoff():
    _Competitor.done = set()
    env = Env(config(profile_cfg("FakeFit", "Competitor", ("LabelScore", 1), core=UPSTREAM_CORE)),
              (FakeFit, _Competitor, label_score()))
    env.create(make_node("best", cpu="2", labels={"score": "90"}), make_node("other", cpu="2", labels={"score": "10"}))
    env.create(cpu_pod("p", cpu="1", labels={"race": "1"}))
    env.run()
    assert env.sched.metrics.registry.get_sample_value("ksched_binding_conflicts_total") == 1
    (ev,) = env.events("FailedScheduling", "p")
    assert ev.raw["message"].startswith("Binding rejected: Operation cannot be fulfilled on pods/binding")
    assert env.node_of("rival-of-p") == "best"
    # Retried at once (no backoff, no clock advance): the other node.
    assert env.node_of("p") == "other"
    qpi_attempts = env.sched.attempts["default/p"]
    assert qpi_attempts == 2
    assert env.sched.cache.check_invariants() == []


def test_explain_records():
    env = Env(config(profile_cfg("FakeFit", "LabelScore", core=UPSTREAM_CORE)), (FakeFit, label_score()),
              explain=True)
    env.create(make_node("a", labels={"score": "5"}), make_node("b", labels={"score": "50"}),
               make_node("c", unschedulable=True))
    env.create(cpu_pod("p"), cpu_pod("huge", cpu="64"))
    env.run()
    ex = env.sched.explanations["default/p"]
    assert ex.selected == "b"
    assert ex.filters["c"]["plugin"] == "NodeUnschedulable"
    assert ex.scores["b"]["LabelScore"]["raw"] == 50
    ex = env.sched.explanations["default/huge"]
    assert ex.selected is None
    assert ex.message.startswith("0/3 nodes are available:")
    assert ex.filters["a"] == {"plugin": "FakeFit", "code": "Unschedulable", "reason": "Insufficient slots or cpu"}


def test_seeded_runs_are_deterministic():
    def run(seed: int) -> list[tuple[str, str]]:
        env = Env(config(profile_cfg("FakeFit", "LabelScore", core=UPSTREAM_CORE)), (FakeFit, label_score()),
                  seed=seed)
        env.create(*(make_node(f"n{i}", cpu="8") for i in range(5)))
        env.create(*(cpu_pod(f"p{i}", cpu="100m") for i in range(20)))
        env.run()
        return sorted((p.name, p.node_name) for p in env.pods())

    assert run(3) == run(3)
    assert run(3) != run(4)


# ------------------------------------------------------------------------------------ other loops


def test_simulation_runs_to_completion():
    sim = Simulation(config(profile_cfg(core=UPSTREAM_CORE)), kubelet=False)
    errors = sim.load([cpu_pod("a"), cpu_pod("b"), make_node("n1", unschedulable=True), make_node("n2"),
                       cpu_pod("c", scheduler_name="nobody")])
    assert errors == []
    res = sim.run(max_seconds=3600)
    assert res.scheduled == 2 and not res.stopped_by_limit
    nodes = {p.name: p.node_name for p in sim.store.list("Pod")[0]}
    assert nodes == {"a": "n2", "b": "n2", "c": ""}


def test_threaded_loop():
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.apiserver.store import Store
    from ksched.scheduler.plugins.registry import Registry

    store = Store(RealClock(), auto_create_namespaces=True)
    client = InProcessClient(store)
    reg = Registry(load_entry_points=False)
    reg.add(FakeFit)
    sched = Scheduler(client, config(profile_cfg("FakeFit", core=UPSTREAM_CORE)), registry=reg, threaded=True,
                      binding_workers=4)
    store.create(make_node("n1", cpu="4"))
    for i in range(6):
        store.create(cpu_pod(f"p{i}"))
    stop, ready = threading.Event(), threading.Event()
    t = threading.Thread(target=sched.run, args=(stop, ready), daemon=True)
    t.start()
    try:
        assert ready.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if sum(1 for p in store.list("Pod")[0] if p.node_name) == 4:
                break
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
    assert sum(1 for p in store.list("Pod")[0] if p.node_name) == 4
    assert sched.cache.check_invariants() == []


def test_permit_rejected_pod_considers_events_seen_while_waiting():
    env = fit_env("WaitingPermit", plugins=(WaitingPermit,))
    env.create(make_node("n1"))
    env.create(cpu_pod("p", labels={"wait": "1", "permit-timeout": "30"}))
    env.run()
    env.create(make_node("n2"))  # while p waits at Permit (in flight)
    env.run()
    env.advance(30)
    qpi = env.sched.queue.pods[env.pod("p").uid]
    # WaitingPermit has no EnqueueExtensions: every event may help, so the pod is retried.
    assert qpi.where != UNSCHEDULABLE
    assert env.sched.attempts["default/p"] == 2


def test_failure_without_post_filter_clears_the_nomination():
    """Upstream passes clearNominatedNode when there is no PostFilter plugin (and on errors,
    Reserve/Permit and binding failures): status.nominatedNodeName and the nominator entry go."""
    env = fit_env()
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2", nominated_node_name="n1"))
    env.run()
    p = env.pod("big")
    assert cond(p)["reason"] == "Unschedulable"
    assert p.nominated_node_name == ""
    assert env.sched.queue.nominator.nominated_node(p) == ""


def test_reserve_failure_clears_the_nomination():
    log = CallLog()
    env = fit_env("R1", plugins=(reserve_plugin("R1", log),))
    env.create(make_node("n1"))
    env.create(cpu_pod("p", labels={"fail-reserve": "R1"}, nominated_node_name="n1"))
    env.run()
    p = env.pod("p")
    assert p.nominated_node_name == "" and env.sched.queue.nominator.nominated_node(p) == ""


def test_post_filter_without_result_keeps_the_nomination():
    pf = post_filter_plugin("FakePreemption", code=Code.UNSCHEDULABLE, message="preemption: not helpful")
    env = fit_env("FakePreemption", plugins=(pf,))
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("big", cpu="2", nominated_node_name="n1"))
    env.run()
    p = env.pod("big")
    assert p.nominated_node_name == "n1"
    assert env.sched.queue.nominator.nominated_node(p) == "n1"


def test_pending_pods_metric():
    env = fit_env()
    env.create(make_node("n1", cpu="1"))
    env.create(cpu_pod("a"), cpu_pod("big", cpu="2"), cpu_pod("gated", scheduling_gates=["x/y"]))
    env.run()
    reg = env.sched.metrics.registry

    def pending(queue: str) -> float | None:
        return reg.get_sample_value("scheduler_pending_pods", {"queue": queue})

    assert (pending("active"), pending("backoff"), pending("unschedulable"), pending("gated")) == (0, 0, 1, 1)
    env.create(cpu_pod("c"))
    env.sched.informers.poll()
    assert pending("active") == 1


def test_attempts_per_pod_are_kept_only_when_asked() -> None:
    """A long-running scheduler does not keep an entry for every pod it ever scheduled; the
    simulation (its reports show attempts) asks for them."""
    from ksched.sim.simulation import Simulation

    plain = Env()
    plain.sched.record_attempts = False
    plain.create(make_node("n1"), make_pod("p"))
    plain.run()
    assert plain.sched.attempts == {} and plain.store.get("Pod", "default", "p").node_name == "n1"
    sim = Simulation(kubelet=False)
    sim.load([make_node("n1").raw, make_pod("q").raw])
    sim.run()
    assert sim.scheduler.attempts == {"default/q": 1}
