"""The scenario runner of ``ksched serve --scenario`` (ksched.sim.scenario) driven on a virtual
clock through the node agent serve runs: actions when their time comes, in the agent's thread,
reported as they run; a refused action reported with its place in the file while the rest run;
the node agent's hint to the node lifecycle controller while a failed node still shows Ready,
taken up by the controller in its own thread."""

from __future__ import annotations

import io

from api_objects import mknode, mkpod
from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.controllers.nodelifecycle import NodeLifecycleController
from ksched.kubelet.agent import NodeAgent
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.scenario import LiveScenario
from ksched.sim.timeline import parse_timeline


def test_actions_run_in_the_agents_steps_when_their_time_comes() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    cluster.store.create(mknode("n1"))
    cluster.store.create(mkpod("p", nodeName="n1"))
    hints: list[bool] = []
    agent = NodeAgent(cluster.client, clock, cluster.store, on_unnoticed=lambda: hints.append(True))
    out, err = io.StringIO(), io.StringIO()
    doc = {"kind": "Timeline", "events": [
        {"at": "2s", "setUsage": {"pod": "default/p", "memory": "1Gi"}},
        {"at": "2s", "patch": {"kind": "Node", "name": "nope", "patch": {"metadata": {"labels": {"a": "b"}}}}},
        {"at": "5s", "failNode": "n1"}]}
    scenario = LiveScenario(parse_timeline(doc, "s.yaml"), clock, cluster.client, cluster.store, out=out, err=err)
    scenario.attach(agent)
    agent.step()
    assert out.getvalue() == "" and cluster.store.get("Pod", "default", "p").phase == "Running"
    clock.advance(2)
    agent.step()
    pod = cluster.store.get("Pod", "default", "p")
    assert isinstance(pod, Pod) and pod.annotations["ksched.io/usage-memory"] == "1Gi"
    assert out.getvalue().splitlines() == ["scenario: +2s setUsage pod default/p: memory=1Gi",
                                           'scenario: +2s patch failed: nodes "nope" not found']
    assert err.getvalue() == 'scenario: s.yaml: events[1]: patch: nodes "nope" not found\n'
    assert not scenario.finished.is_set() and not hints
    clock.advance(3)
    agent.step()
    assert agent.kubelet.is_down("n1")
    assert out.getvalue().splitlines()[-2:] == ["scenario: +5s failNode n1", "scenario: done (3 actions, 1 failed)"]
    assert scenario.finished.is_set()
    # n1 still shows Ready: the agent hints the node lifecycle controller after each step
    assert hints == [True]
    agent.step()
    assert hints == [True, True]


def test_the_node_lifecycle_controller_takes_up_a_resync_requested_from_another_thread() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    nlc = cluster.controllers.controller("node-lifecycle-controller")
    assert isinstance(nlc, NodeLifecycleController)
    cluster.store.create(mknode("n1"))
    agent = NodeAgent(cluster.client, clock, cluster.store)
    agent.step()  # the kubelet registers n1: its Lease makes the controller watch it
    cluster.controllers.settle()
    while nlc.next_wakeup() is not None:
        clock.advance_to(nlc.next_wakeup())
        cluster.controllers.settle()
    assert nlc.next_wakeup() is None
    nlc.request_resync()
    assert nlc.next_wakeup() is None  # nothing queued from the calling thread
    nlc.process()
    due = nlc.next_wakeup()
    assert due is not None and 0 < due - clock.now() <= 5.0


def test_without_kubelets_the_scenario_runs_in_its_own_thread() -> None:
    """serve --no-kubelet: the actions run on the wall clock in the scenario's thread; the kubelet
    ones fail as in simulate --no-kubelet, and say so."""
    from ksched.clock import RealClock

    clock = RealClock()
    cluster = EmbeddedCluster(clock)
    cluster.store.create(mknode("n1"))
    out, err = io.StringIO(), io.StringIO()
    doc = {"kind": "Timeline", "events": [{"at": "0.1s", "cordon": "n1"}, {"at": "0.2s", "failNode": "n1"}]}
    scenario = LiveScenario(parse_timeline(doc, "s.yaml"), clock, cluster.client, cluster.store, out=out, err=err)
    scenario.start(interval=0.01)
    try:
        assert scenario.finished.wait(120)
    finally:
        scenario.stop()
    assert cluster.store.get("Node", "", "n1").unschedulable
    assert err.getvalue() == "scenario: s.yaml: events[1]: failNode: no kubelets are simulated (--no-kubelet)\n"
    assert out.getvalue().splitlines()[-1] == "scenario: done (2 actions, 1 failed)"
