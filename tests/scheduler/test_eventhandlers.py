"""Informer event handlers end to end: store changes reach the cache and move pods in the queue
(upstream eventhandlers.go)."""

from __future__ import annotations

from typing import Any

from core_helpers import Env, FakeFit, config, profile_cfg
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.eventhandlers import node_update_events
from ksched.scheduler.framework.events import ActionType
from ksched.scheduler.queue.scheduling_queue import UNSCHEDULABLE
from ksched.testing import make_node, make_pod

UPSTREAM_CORE = ("PrioritySort", "SchedulingGates", "NodeUnschedulable", "NodeName", "DefaultBinder")


def updated(obj: Any, **spec: Any) -> dict[str, Any]:
    raw = dict(obj.raw)
    s = dict(raw.get("spec") or {})
    s.update(spec)
    raw["spec"] = s
    return raw


def test_gated_pod_waits_for_its_gates_to_be_removed():
    env = Env()
    env.create(make_node("n1"))
    env.create(make_pod("g", scheduling_gates=["example.com/a", "example.com/b"]))
    env.run()
    p = env.pod("g")
    assert p.node_name == ""
    assert env.events(name="g") == []  # gated pods are not attempted: no events, no condition update
    qpi = env.sched.queue.pods[p.uid]
    assert qpi.gated and qpi.where == UNSCHEDULABLE and qpi.attempts == 0
    env.advance(3600)
    assert env.node_of("g") == ""
    env.store.update(updated(p, schedulingGates=[{"name": "example.com/b"}]))
    env.run()
    assert env.node_of("g") == ""
    env.store.update(updated(env.pod("g"), schedulingGates=[]))
    env.run()
    assert env.node_of("g") == "n1"
    assert env.sched.queue.pods.get(p.uid) is None


def test_node_becoming_schedulable_wakes_its_pods():
    env = Env()
    node = make_node("n1", unschedulable=True)
    env.create(node)
    env.create(make_pod("p"))
    env.run()
    assert env.node_of("p") == ""
    assert env.sched.queue.pods[env.pod("p").uid].unschedulable_plugins == {"NodeUnschedulable"}
    # A label change does not help (the plugin is not registered for it).
    env.store.update({**node.raw, "metadata": {**node.raw["metadata"], "labels": {"x": "y"}}})
    env.run()
    assert env.sched.queue.pods[env.pod("p").uid].where == UNSCHEDULABLE
    cur = env.store.get("Node", "", "n1")
    env.store.update(updated(cur, unschedulable=False))
    env.run()
    assert env.node_of("p") == "n1"


def test_toleration_added_to_a_pending_pod():
    env = Env()
    env.create(make_node("n1", unschedulable=True))
    env.create(make_pod("p"))
    env.run()
    p = env.pod("p")
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    env.store.update(updated(p, tolerations=tol))
    env.run()
    assert env.node_of("p") == "n1"


def test_node_deleted_with_pods_and_added_back():
    env = Env(config(profile_cfg("FakeFit", core=UPSTREAM_CORE)), (FakeFit,))
    env.create(make_node("n1", cpu="1"))
    env.create(make_pod("a", requests={"cpu": "1"}))
    env.run()
    assert env.node_of("a") == "n1"
    env.store.delete("Node", "", "n1")
    env.run()
    cache = env.sched.cache
    assert cache.node_count() == 0 and cache.nodes["n1"].node is None and cache.nodes["n1"].num_pods == 1
    env.create(make_pod("b", requests={"cpu": "1"}))
    env.run()
    assert env.node_of("b") == ""
    assert env.pod("b").condition("PodScheduled")["message"] == "no nodes available to schedule pods"
    env.create(make_node("n1", cpu="2"))
    env.advance(2)
    assert env.node_of("b") == "n1"
    assert cache.nodes["n1"].requested["cpu"] == 2000
    env.store.delete("Pod", "default", "a", grace_period_seconds=0)
    env.store.delete("Pod", "default", "b", grace_period_seconds=0)
    env.run()
    assert cache.nodes["n1"].num_pods == 0
    assert cache.check_invariants() == []


def test_assigned_pod_updates_reach_the_cache():
    env = Env(config(profile_cfg("FakeFit", core=UPSTREAM_CORE)), (FakeFit,))
    env.create(make_node("n1", cpu="2"))
    env.create(make_pod("a", requests={"cpu": "1"}, labels={"v": "1"}))
    env.run()
    a = env.pod("a")
    env.store.update({**a.raw, "metadata": {**a.raw["metadata"], "labels": {"v": "2"}}})
    env.run()
    cached = env.sched.cache.get_pod(a)
    assert cached is not None and cached.labels == {"v": "2"}
    assert env.sched.cache.check_invariants() == []


def test_terminal_pods_leave_the_cache():
    env = Env(config(profile_cfg("FakeFit", core=UPSTREAM_CORE)), (FakeFit,))
    env.create(make_node("n1", cpu="1"))
    env.create(make_pod("a", requests={"cpu": "1"}))
    env.run()
    env.create(make_pod("b", requests={"cpu": "1"}))
    env.run()
    assert env.node_of("b") == ""
    a = env.pod("a")
    env.store.update_status({**a.raw, "status": {**a.raw.get("status", {}), "phase": "Succeeded"}})
    env.advance(2)
    assert env.node_of("b") == "n1"


def _node(**kw: Any) -> Node:
    return make_node("n", **kw)


def test_node_update_events():
    base = _node()
    assert node_update_events(base, _node()) == []
    evs = node_update_events(base, _node(unschedulable=True))
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_TAINT]
    evs = node_update_events(base, _node(cpu="8"))
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_ALLOCATABLE]
    evs = node_update_events(base, _node(labels={"a": "b"}))
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_LABEL]
    evs = node_update_events(base, _node(taints=[{"key": "k", "effect": "NoSchedule"}]))
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_TAINT]
    evs = node_update_events(base, _node(annotations={"a": "b"}))
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_ANNOTATION]
    not_ready = _node()
    not_ready.raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    not_ready = Node(not_ready.raw)
    evs = node_update_events(base, not_ready)
    assert [e.action for e in evs] == [ActionType.UPDATE_NODE_CONDITION]


def test_pods_of_other_schedulers_still_count_in_the_cache():
    env = Env(config(profile_cfg("FakeFit", core=UPSTREAM_CORE)), (FakeFit,))
    env.create(make_node("n1", cpu="1"))
    env.create(make_pod("theirs", requests={"cpu": "1"}, scheduler_name="other", node_name="n1"))
    env.create(make_pod("mine", requests={"cpu": "1"}))
    env.run()
    assert env.node_of("mine") == ""
    assert isinstance(env.sched.cache.get_pod(env.pod("theirs")), Pod)


_REQS = st.sampled_from([None, {"cpu": "100m"}, {"cpu": "200m", "memory": "1Gi"}, {"cpu": "50m"}])


def _pod_manifest(labels: dict[str, str], req: dict[str, str] | None, status: dict[str, Any]) -> dict[str, Any]:
    ct: dict[str, Any] = {"name": "c", "image": "i"}
    if req is not None:
        ct["resources"] = {"requests": req}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": labels},
            "spec": {"nodeName": "n1", "containers": [ct]}, "status": status}


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([{}, {"app": "a"}, {"app": "b"}]), st.sampled_from([{}, {"app": "a"}, {"app": "b"}]),
       _REQS, _REQS, st.sampled_from(["status write", "full parse", "same labels object"]),
       st.sampled_from([{}, {"phase": "Running"}]))
def test_assigned_update_action_shortcut_agrees_with_comparing_requests(
        labels_a: dict[str, str], labels_b: dict[str, str], req_a: dict[str, str] | None,
        req_b: dict[str, str] | None, how: str, status: dict[str, Any]) -> None:
    """An assigned pod's update action: the shortcut for a status write (the very parsed spec
    parts, so the same requests) gives what comparing the requests gives, for any pair."""
    from ksched.scheduler.eventhandlers import _assigned_update_action

    old = Pod(_pod_manifest(labels_a, req_a, {}))
    if how == "status write":
        raw = dict(old.raw)
        raw["status"] = status
        new = old.with_status(raw)
    elif how == "same labels object":
        new = Pod(_pod_manifest(labels_b, req_b, status))
        new.labels = old.labels
    else:
        new = Pod(_pod_manifest(labels_b, req_b, status))
    assert _assigned_update_action(old, new) == _assigned_update_action(old, new, shortcut=False)
