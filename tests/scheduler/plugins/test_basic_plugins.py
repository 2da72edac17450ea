"""NodeName, NodeUnschedulable, SchedulingGates, PrioritySort and DefaultBinder, with the cases of
upstream's node_name_test.go, node_unschedulable_test.go, scheduling_gates_test.go,
priority_sort_test.go and default_binder_test.go (1.36)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.errors import ApiError, Conflict
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from ksched.scheduler.plugins.defaultbinder import DefaultBinder
from ksched.scheduler.plugins.nodename import ERR_REASON, NodeName
from ksched.scheduler.plugins.nodeunschedulable import (
    ERR_REASON_UNKNOWN_CONDITION,
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
)
from ksched.scheduler.plugins.queuesort import PrioritySort
from ksched.scheduler.plugins.schedulinggates import SchedulingGates
from ksched.testing import PluginRunner, make_node, make_pod

# ---------------------------------------------------------------- NodeName


@pytest.mark.parametrize(("pod_node", "node", "want"), [
    pytest.param("", "foo", None, id="no host specified"),
    pytest.param("foo", "foo", None, id="host matches"),
    pytest.param("bar", "foo", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON), id="host doesn't match"),
])
def test_node_name_filter(pod_node: str, node: str, want: Status | None) -> None:
    assert ERR_REASON == "node(s) didn't match the requested node name"
    r = PluginRunner(["NodeName"], [make_node(node), make_node("other")])
    out = r.filter(make_pod("p", node_name=pod_node))  # also checks the vectorized form
    got = out[node]
    if want is None:
        assert got is None
    else:
        assert got == want and got is not None and got.plugin == "NodeName"
    assert (out["other"] is None) == (pod_node == "")


def test_node_name_filter_pod_naming_unknown_node_fits_nowhere() -> None:
    r = PluginRunner(["NodeName"], [make_node("a"), make_node("b")])
    out = r.filter(make_pod("p", node_name="zzz"))
    assert all(s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in out.values())


def test_node_name_events() -> None:
    evs = NodeName().events_to_register()
    assert len(evs) == 1
    assert (evs[0].event.resource, evs[0].event.action) == (EventResource.NODE, ActionType.ADD)
    # No hint: every node addition requeues (the same as Queue), as upstream.
    assert evs[0].hint is None


# ---------------------------------------------------------------- NodeUnschedulable

UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@pytest.mark.parametrize(("tolerations", "unschedulable", "want"), [
    pytest.param([], True, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE),
                 id="does not schedule pod to unschedulable node"),
    pytest.param([], False, None, id="schedule pod to normal node"),
    pytest.param([UNSCHEDULABLE_TOLERATION], True, None, id="pod with toleration to unschedulable node"),
    pytest.param([{"operator": "Exists"}], True, None, id="wildcard toleration"),
    pytest.param([{"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute"}], True,
                 Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE),
                 id="toleration with another effect"),
])
def test_node_unschedulable_filter(tolerations: list[dict[str, Any]], unschedulable: bool,
                                   want: Status | None) -> None:
    assert ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"
    r = PluginRunner(["NodeUnschedulable"], [make_node("n", unschedulable=unschedulable), make_node("ok")])
    out = r.filter(make_pod("p", tolerations=tolerations))  # also checks the vectorized form
    assert out["ok"] is None
    if want is None:
        assert out["n"] is None
    else:
        assert out["n"] == want


def test_node_unschedulable_filter_without_node_object() -> None:
    st = NodeUnschedulable().filter(CycleState(), make_pod(), NodeInfo())
    assert st == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNKNOWN_CONDITION)


def test_node_unschedulable_events() -> None:
    evs = NodeUnschedulable().events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        (EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
    ]


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(None, make_node("n", unschedulable=True), QueueingHint.QUEUE_SKIP,
                 id="skip-queue-on-unschedulable-node-added"),
    pytest.param(None, make_node("n"), QueueingHint.QUEUE, id="queue-on-schedulable-node-added"),
    pytest.param(make_node("n", unschedulable=True),
                 make_node("n", unschedulable=True, taints=[{"key": "node.kubernetes.io/not-ready",
                                                              "effect": "NoExecute"}]),
                 QueueingHint.QUEUE_SKIP, id="skip-unrelated-change"),
    pytest.param(make_node("n", unschedulable=True), make_node("n"), QueueingHint.QUEUE,
                 id="queue-on-unschedulable-field-change"),
    pytest.param(make_node("n"), make_node("n", labels={"a": "b"}), QueueingHint.QUEUE_SKIP,
                 id="skip-schedulable-node-stays-schedulable"),
])
def test_node_unschedulable_hint_node_change(old: Any, new: Any, want: QueueingHint) -> None:
    assert NodeUnschedulable._after_node_change(make_pod("p"), old, new) == want


def test_node_unschedulable_hint_wrong_objects_raise() -> None:
    with pytest.raises(TypeError):
        NodeUnschedulable._after_node_change(make_pod(), None, "not-a-node")
    with pytest.raises(TypeError):
        NodeUnschedulable._after_node_change(make_pod(), "not-a-node", make_node("n"))
    with pytest.raises(TypeError):
        NodeUnschedulable._after_toleration_change(make_pod(), None, "not-a-pod")


def test_node_unschedulable_hint_toleration_change() -> None:
    pod = make_pod("p", uid="uid0")
    h = NodeUnschedulable._after_toleration_change
    tolerating = make_pod("p", uid="uid0", tolerations=[UNSCHEDULABLE_TOLERATION])
    assert h(pod, pod, tolerating) == QueueingHint.QUEUE
    unrelated = make_pod("p", uid="uid0", tolerations=[{"key": "foo", "effect": "NoSchedule"}])
    assert h(pod, pod, unrelated) == QueueingHint.QUEUE_SKIP
    other = make_pod("q", uid="uid1", tolerations=[UNSCHEDULABLE_TOLERATION])
    assert h(pod, make_pod("q", uid="uid1"), other) == QueueingHint.QUEUE_SKIP


# ---------------------------------------------------------------- SchedulingGates


def test_scheduling_gates_pre_enqueue() -> None:
    p = SchedulingGates()
    assert p.pre_enqueue(make_pod("p")) is None
    st = p.pre_enqueue(make_pod("p", scheduling_gates=["foo", "bar"]))
    assert st == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo bar]")
    assert st is not None and st.plugin == "SchedulingGates"


def test_scheduling_gates_events_and_hint() -> None:
    p = SchedulingGates()
    evs = p.events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]
    gated = make_pod("p", uid="u1", scheduling_gates=["g"])
    ungated = make_pod("p", uid="u1")
    h = evs[0].hint
    assert h is not None
    assert h(gated, gated, ungated) == QueueingHint.QUEUE
    assert h(gated, make_pod("q", uid="u2", scheduling_gates=["g"]), make_pod("q", uid="u2")) == \
        QueueingHint.QUEUE_SKIP
    with pytest.raises(TypeError):
        h(gated, None, "not-a-pod")


def test_scheduling_gates_gate_the_pod_in_the_framework() -> None:
    r = PluginRunner(["SchedulingGates"], [make_node("n")])
    st = r.fw.run_pre_enqueue(make_pod("p", scheduling_gates=["a"]))
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.plugin == "SchedulingGates"
    assert r.fw.run_pre_enqueue(make_pod("p")) is None


# ---------------------------------------------------------------- PrioritySort


def qpi(priority: int | None, ts: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(make_pod("p", priority=priority)), ts)


@pytest.mark.parametrize(("p1", "p2", "want"), [
    pytest.param(qpi(1, 0.0), qpi(100, 0.0), False, id="p1.priority less than p2.priority"),
    pytest.param(qpi(100, 0.0), qpi(1, 0.0), True, id="p1.priority greater than p2.priority"),
    pytest.param(qpi(100, 1.0), qpi(100, 2.0), True, id="equal priority. p1 is added to schedulingQ earlier"),
    pytest.param(qpi(100, 2.0), qpi(100, 1.0), False, id="equal priority. p2 is added to schedulingQ earlier"),
    pytest.param(qpi(None, 1.0), qpi(0, 2.0), True, id="nil priority counts as 0"),
    pytest.param(qpi(-5, 0.0), qpi(None, 1.0), False, id="negative priority below nil"),
])
def test_priority_sort_less(p1: QueuedPodInfo, p2: QueuedPodInfo, want: bool) -> None:
    ps = PrioritySort()
    assert ps.less(p1, p2) is want
    assert (ps.sort_key(p1) < ps.sort_key(p2)) is want


# ---------------------------------------------------------------- DefaultBinder


class FakeClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.bound: list[tuple[str, str]] = []

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        if self.error is not None:
            raise self.error
        self.bound.append((pod.key, node_name))


def test_default_binder_binds() -> None:
    client = FakeClient()
    r = PluginRunner(["DefaultBinder"], [make_node("foo")], client=client)
    pod = make_pod("foo", "ns")
    assert r.fw.run_bind(CycleState(), pod, "foo") is None
    assert client.bound == [("ns/foo", "foo")]


@pytest.mark.parametrize("err", [Conflict("pods/binding: binding rejected"), ApiError("boom"),
                                 ConnectionError("connection refused")])
def test_default_binder_error_becomes_error_status(err: Exception) -> None:
    client = FakeClient(err)
    pl = DefaultBinder(None, PluginRunner(["DefaultBinder"], [make_node("foo")], client=client).fw)
    st = pl.bind(CycleState(), make_pod("foo", "ns"), "foo")
    assert st is not None and st.code == Code.ERROR
    assert st.message() == str(err)
    assert st.error is err  # kept for the scheduler (e.g. a 409 from the conflict resolver)


def test_default_binder_without_client_is_an_error() -> None:
    st = DefaultBinder().bind(CycleState(), make_pod("p"), "n")
    assert st is not None and st.code == Code.ERROR
