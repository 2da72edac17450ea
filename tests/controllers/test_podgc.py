"""The pod garbage collector (pkg/controller/podgc): pods of a deleted node go after the 40 s
quarantine on the 20 s grid, marked Failed with DisruptionTarget (DeletionByPodGC, "PodGC: node
no longer exists") and force-deleted; terminated pods beyond the threshold go evicted first,
then oldest; terminating pods never scheduled, and terminating pods on out-of-service NotReady
nodes, are force-deleted. Nothing to collect, no timer."""

from __future__ import annotations

from typing import Any

from api_objects import mknode, mkpod
from embedded import advance, settle
from ksched.api.watch import DELETED
from ksched.clock import VirtualClock
from ksched.controllers.podgc import PodGCController
from ksched.sim.cluster import EmbeddedCluster


def cluster() -> EmbeddedCluster:
    return EmbeddedCluster(VirtualClock(0.0), controllers=["pod-garbage-collector"])


def running(c: EmbeddedCluster, name: str, node: str = "n1", **kw: Any) -> None:
    c.store.create(mkpod(name, **kw))
    c.store.bind("default", name, node)
    c.store.patch("Pod", "default", name, {"status": {"phase": "Running"}}, subresource="status")


def gc(c: EmbeddedCluster) -> PodGCController:
    ctrl = c.controllers.controller("pod-garbage-collector")
    assert isinstance(ctrl, PodGCController)
    return ctrl


def test_pods_of_a_deleted_node_go_after_the_quarantine() -> None:
    c = cluster()
    c.store.create(mknode("n1"))
    c.store.create(mknode("n2"))
    running(c, "a")
    running(c, "b")
    running(c, "other", node="n2")
    settle(c)
    assert c.next_wakeup() is None  # nothing to collect: no timer
    w = c.store.watch("Pod")
    w.drain()
    advance(c, 5)
    c.store.delete("Node", "", "n1")
    # Found missing at the 20 s pass; quarantined 40 s; deleted at the 60 s pass.
    advance(c, 54.9)
    assert sorted(p.name for p in c.store.items("Pod")) == ["a", "b", "other"]
    advance(c, 0.1)
    assert [p.name for p in c.store.items("Pod")] == ["other"]
    last = {}
    for ev in w.drain():
        if ev.object is not None and ev.type != DELETED:
            last[ev.object.name] = ev.object.raw["status"]
    for name in ("a", "b"):
        assert last[name]["phase"] == "Failed"
        cond = next(x for x in last[name]["conditions"] if x["type"] == "DisruptionTarget")
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "DeletionByPodGC",
                                                                     "PodGC: node no longer exists")
    settle(c)
    assert c.next_wakeup() is None


def test_a_node_back_before_the_quarantine_ends_keeps_its_pods() -> None:
    c = cluster()
    c.store.create(mknode("n1"))
    running(c, "a")
    c.store.delete("Node", "", "n1")
    advance(c, 30)
    c.store.create(mknode("n1"))
    advance(c, 100)
    assert [p.name for p in c.store.items("Pod")] == ["a"]


def test_terminated_pods_beyond_the_threshold_evicted_first_then_oldest() -> None:
    c = cluster()
    gc(c).threshold = 2
    c.store.create(mknode("n1"))
    for i, name in enumerate(["p0", "p1", "p2", "p3", "evicted"]):
        advance(c, 1)
        running(c, name)
        status: dict[str, Any] = {"phase": "Succeeded" if name != "evicted" else "Failed"}
        if name == "evicted":
            status["reason"] = "Evicted"
        c.store.patch("Pod", "default", name, {"status": status}, subresource="status")
        assert i >= 0
    advance(c, 20)
    assert sorted(p.name for p in c.store.items("Pod")) == ["p2", "p3"]


def test_terminating_pods_that_were_never_scheduled_are_force_deleted() -> None:
    c = cluster()
    raw = mkpod("held")
    raw["metadata"]["finalizers"] = ["example.com/hold"]
    c.store.create(raw)
    c.store.delete("Pod", "default", "held")
    advance(c, 20)
    p = c.store.get("Pod", "default", "held")
    assert p.phase == "Failed"  # type: ignore[attr-defined]
    assert p.deletion_grace_period_seconds == 0  # the finalizer still holds it


def test_terminating_pods_on_an_out_of_service_node() -> None:
    c = cluster()
    node = mknode("n1")
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    c.store.create(node)
    running(c, "a")
    c.store.delete("Pod", "default", "a")  # graceful: 30 s, and no kubelet here
    advance(c, 19)
    assert c.store.try_get("Pod", "default", "a") is not None
    n = c.store.get("Node", "", "n1")
    c.store.update({**n.raw, "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                                                 "effect": "NoExecute"}]}})
    advance(c, 1)
    assert c.store.try_get("Pod", "default", "a") is None
