"""InterPodAffinity queueing hints.

Cases ported from upstream kubernetes v1.36 ``pkg/scheduler/framework/plugins/interpodaffinity``
``plugin_test.go`` (Test_isSchedulableAfterPodChange, including the v1.36 fixes for nominated
pods (#135392), the deleted pod's own anti-affinity (#135325) and the target pod's label update
(#135394); Test_isSchedulableAfterNodeChange), plus a requeue check through the scheduling queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.plugins.interpodaffinity import InterPodAffinity
from ksched.testing import make_node, make_pod

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.QUEUE_SKIP


def sel_in(key: str, *values: str, topo: str) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]},
            "topologyKey": topo}


def sel_exists(key: str, topo: str) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topo}


def P(uid: str = "", node: str = "", labels: dict[str, str] | None = None,
      aff: list[dict[str, Any]] | None = None, anti: list[dict[str, Any]] | None = None,
      nominated: str = "") -> Pod:
    a: dict[str, Any] = {}
    if aff:
        a["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": aff}
    if anti:
        a["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return make_pod(uid or "x", labels=labels, node_name=node, affinity=a or None, uid=uid or None,
                    nominated_node_name=nominated)


AFF = [sel_in("service", "securityscan", "value2", topo="region")]
ANTI = [sel_in("service", "securityscan", "value2", topo="region")]
AFF_AB = [sel_exists("aaa", "hostname"), sel_exists("bbb", "hostname")]
SEC = {"service": "securityscan"}

POD_CASES: list[tuple[str, Pod, Pod | None, Pod | None, QueueingHint]] = [
    ("add a pod which matches the pod affinity",
     P("p", aff=AFF), None, P("other", "fake-node", SEC), QUEUE),
    ("add an un-scheduled pod",
     P("p", aff=AFF), None, P("other", labels=SEC), SKIP),
    ("add a pod with nominated node which matches target pod affinity",
     P("p", aff=AFF), None, P("other", labels=SEC, nominated="fake-node"), QUEUE),
    ("update a pod from un-scheduled to nominated, which matches target pod affinity",
     P("p", aff=AFF), P("other", labels=SEC), P("other", labels=SEC, nominated="fake-node"), QUEUE),
    ("update a pod from nominated to un-scheduled, which matches target pod affinity",
     P("p", aff=AFF), P("other", labels=SEC, nominated="fake-node"), P("other", labels=SEC), SKIP),
    ("add a pod which doesn't match the pod affinity",
     P("p", aff=AFF), None, P("other", "fake-node", {"aaa": "a"}), SKIP),
    ("update a pod from non-match to match pod affinity",
     P("p", aff=AFF), P("other", "fake-node", {"aaa": "a"}), P("other", "fake-node", SEC), QUEUE),
    ("the updating pod matches target pod's affinity both before and after label changes",
     P("p", aff=AFF), P("other", "fake-node", {"service": "value2"}), P("other", "fake-node", SEC), SKIP),
    ("update an un-scheduled pod",
     P("p", aff=AFF), P("other", labels={"aaa": "a"}), P("other", labels=SEC), SKIP),
    ("update a pod from match to non-match the pod affinity",
     P("p", aff=AFF), P("other", "fake-node", SEC), P("other", "fake-node", {"aaa": "a"}), SKIP),
    ("update a pod from match to non-match pod's affinity - multiple terms case",
     P("p", aff=AFF_AB), P("other", "fake-node", {"aaa": "a"}), P("other", "fake-node", SEC), SKIP),
    ("update a pod from non-match to match pod's affinity - multiple terms case",
     P("p", aff=AFF_AB), P("other", "fake-node", {"aaa": "a"}), P("other", "fake-node", {"aaa": "", "bbb": ""}),
     QUEUE),
    ("updated pod is the target pod",
     P("p", labels={"foo": "baz"}), P("p", labels={"foo": "bar"}), P("p", labels={"foo": "baz"}), QUEUE),
    ("modify pod label to change it from satisfying pod anti-affinity to not satisfying anti-affinity",
     P("p", anti=ANTI), P("other", "fake-node", SEC), P("other", "fake-node", {"service": "aaaa"}), QUEUE),
    ("modify pod label to change it from not satisfying pod anti-affinity to satisfying anti-affinity",
     P("p", anti=ANTI), P("other", "fake-node", {"service": "bbb"}), P("other", "fake-node", SEC), SKIP),
    ("delete a pod which doesn't match pod's anti-affinity",
     P("p", anti=ANTI), P("other", "fake-node", {"aaa": "a"}), None, SKIP),
    ("delete a pod which matches pod's anti-affinity",
     P("p", anti=ANTI), P("other", "fake-node", SEC), None, QUEUE),
    ("delete a nominated pod which doesn't match pod's anti-affinity",
     P("p", anti=ANTI), P("other", labels={"aaa": "a"}, nominated="fake-node"), None, SKIP),
    ("delete a nominated pod which matches pod's anti-affinity",
     P("p", anti=ANTI), P("other", labels=SEC, nominated="fake-node"), None, QUEUE),
    ("delete a pod with anti-affinity that matches pending pod",
     P("p", labels=SEC), P("other", "fake-node", anti=ANTI), None, QUEUE),
    ("delete a pod with anti-affinity that doesn't match pending pod",
     P("p", labels={"service": "foo"}), P("other", "fake-node", anti=ANTI), None, SKIP),
    ("delete a pod which doesn't match pending pod's anti-affinity and has anti-affinity that doesn't match pending pod",
     P("p", labels={"service": "foo"}, anti=ANTI), P("other", "fake-node", {"service": "foo"}, anti=ANTI), None, SKIP),
    ("delete an unscheduled pod which matches pod's anti-affinity",
     P("p", anti=ANTI), P("other", labels=SEC), None, SKIP),
]


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), POD_CASES, ids=[c[0] for c in POD_CASES])
def test_is_schedulable_after_pod_change(name: str, target: Pod, old: Pod | None, new: Pod | None,
                                         want: QueueingHint) -> None:
    assert InterPodAffinity({}).is_schedulable_after_pod_change(target, old, new) == want


def N(labels: dict[str, str] | None = None) -> Any:
    n = make_node("node-a", labels=labels)
    # st.MakeNode() carries no hostname label; keep the labels exactly as given.
    n.labels.pop("kubernetes.io/hostname", None)
    return n


AFF_ZONE = [sel_in("service", "securityscan", "value2", topo="zone")]
AFF_REGION = [sel_in("service", "securityscan", "value2", topo="region")]
ANTI_ZONE = [{"labelSelector": {"matchLabels": {"another": "label"}}, "topologyKey": "zone"}]

NODE_CASES: list[tuple[str, Pod, Any, Any, QueueingHint]] = [
    ("add a new node with matched pod affinity topologyKey", P("p", aff=AFF_ZONE), None, N({"zone": "zone1"}), QUEUE),
    ("add a new node without matched topologyKey", P("p", aff=AFF_REGION), None, N({"zone": "zone1"}), SKIP),
    ("update node label but not topologyKey", P("p", aff=AFF_ZONE), N({"aaa": "a"}), N({"aaa": "b"}), SKIP),
    ("update node label that isn't related to the pod affinity", P("p", aff=AFF_ZONE), N({"zone": "zone1"}),
     N({"zone": "zone1", "unrelated-label": "unrelated"}), SKIP),
    ("update node with different affinity topologyKey value", P("p", aff=AFF_ZONE), N({"zone": "zone1"}),
     N({"zone": "zone2"}), QUEUE),
    ("update node to have the affinity topology label", P("p", aff=AFF_ZONE), N({"aaa": "a"}), N({"zone": "zone1"}),
     QUEUE),
    ("add a new node with matched pod anti-affinity topologyKey", P("p", anti=ANTI_ZONE), None, N({"zone": "zone1"}),
     QUEUE),
    ("add a new node without matched pod anti-affinity topologyKey", P("p", anti=ANTI_ZONE), None, N(), QUEUE),
    ("update node label that isn't related to the pod anti-affinity", P("p", anti=ANTI_ZONE), N({"zone": "zone1"}),
     N({"zone": "zone1", "unrelated-label": "unrelated"}), SKIP),
    ("update node with different anti-affinity topologyKey value", P("p", anti=ANTI_ZONE), N({"zone": "zone1"}),
     N({"zone": "zone2"}), QUEUE),
    ("update node to have the anti-affinity topology label", P("p", anti=ANTI_ZONE), N({"aaa": "a"}),
     N({"zone": "zone1"}), SKIP),
    ("update node label not to have anti-affinity topology label", P("p", anti=ANTI_ZONE), N({"zone": "zone1"}),
     N({"aaa": "a"}), QUEUE),
    ("add a node for a pod without required terms", P("p"), None, N({"zone": "zone1"}), SKIP),
]


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_is_schedulable_after_node_change(name: str, target: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    assert InterPodAffinity({}).is_schedulable_after_node_change(target, old, new) == want


def test_registered_events_cover_the_scheduler_events() -> None:
    evs = {e.event.resource: e for e in InterPodAffinity({}).events_to_register()}
    pod_ev = evs[EventResource.POD].event
    node_ev = evs[EventResource.NODE].event
    assert pod_ev.match(ASSIGNED_POD_ADD)
    assert pod_ev.match(ASSIGNED_POD_DELETE)
    assert pod_ev.match(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_LABEL))
    assert pod_ev.match(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL))
    assert not pod_ev.match(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN))
    assert node_ev.match(NODE_ADD)
    assert node_ev.match(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL))
    assert not node_ev.match(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT))
    assert not node_ev.match(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE))
