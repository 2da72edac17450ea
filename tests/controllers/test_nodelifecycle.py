"""The node lifecycle and taint eviction controllers in whole simulations: kubelet heartbeats
(Leases in kube-node-lease, Ready), a node that stops heartbeating goes Unknown after the 50 s
grace period, gets the unreachable taints (NoExecute through its zone's rate limiter), and its
pods are deleted 300 s later (DefaultTolerationSeconds) while a Job's replacements land in the
other zones; restored, the node is Ready and untainted again. Also: all zones down -> no
taint-based evictions; the rate limiter's token bucket; toleration arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mknode, mkpod
from ksched.api.lease import Lease
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.taints import Taint, Toleration
from ksched.controllers.nodelifecycle import _TokenBucket
from ksched.controllers.tainteviction import min_toleration_seconds
from ksched.sim.simulation import Simulation

UNREACHABLE = "node.kubernetes.io/unreachable"


def node(name: str, zone: str) -> dict[str, Any]:
    raw = mknode(name)
    raw["metadata"]["labels"] = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    return raw


def run_until(sim: Simulation, t: float) -> None:
    sim.run(max_seconds=t - sim.clock.now())
    if sim.clock.now() < t:
        sim.clock.advance_to(t)
        sim.run(max_seconds=0)


def getnode(sim: Simulation, name: str) -> Node:
    n = sim.store.get("Node", "", name)
    assert isinstance(n, Node)
    return n


def pods(sim: Simulation) -> dict[str, Pod]:
    return {p.name: p for p in sim.store.list("Pod")[0] if isinstance(p, Pod)}


def ready(n: Node) -> dict[str, Any]:
    return next(c for c in n.conditions if c["type"] == "Ready")


def taints(n: Node) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in n.taints}


def cluster() -> tuple[Simulation, float]:
    sim = Simulation(seed=1)
    t0 = sim.clock.now()
    sim.load([node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")])
    return sim, t0


def test_kubelets_hold_leases_and_post_ready() -> None:
    sim, t0 = cluster()
    run_until(sim, t0 + 60)
    lease = sim.store.get("Lease", "kube-node-lease", "a1")
    assert isinstance(lease, Lease)
    assert (lease.holder_identity, lease.lease_duration_seconds) == ("a1", 40)
    r = ready(getnode(sim, "a1"))
    assert (r["status"], r["reason"], r["message"]) == ("True", "KubeletReady", "kubelet is posting ready status")
    # an idle cluster ends: the heartbeats keep no simulation alive
    res = sim.run()
    assert not res.stopped_by_limit


def test_a_failed_zone_goes_unknown_tainted_and_its_pods_are_evicted_after_300s() -> None:
    sim, t0 = cluster()
    sim.load([mkpod("on-a1", nodeName="a1"), mkpod("on-a2", nodeName="a2"), mkpod("on-b1", nodeName="b1"),
              mkpod("forever", nodeName="a1", tolerations=[{"key": UNREACHABLE, "operator": "Exists",
                                                            "effect": "NoExecute"}])])
    run_until(sim, t0 + 100)
    assert sim.kubelet is not None
    sim.kubelet.fail_node("a1")
    sim.kubelet.fail_node("a2")
    # the last heartbeats were at most 10 s before the failure: Unknown within 50-65 s
    run_until(sim, t0 + 100 + 39)
    assert ready(getnode(sim, "a1"))["status"] == "True"
    run_until(sim, t0 + 100 + 70)
    a1 = getnode(sim, "a1")
    r = ready(a1)
    assert (r["status"], r["reason"], r["message"]) == ("Unknown", "NodeStatusUnknown",
                                                        "Kubelet stopped posting node status.")
    assert {c["type"]: c["status"] for c in a1.conditions} == {
        "Ready": "Unknown", "MemoryPressure": "Unknown", "DiskPressure": "Unknown", "PIDPressure": "Unknown"}
    assert (UNREACHABLE, "NoSchedule") in taints(a1)
    assert pods(sim)["on-a1"].condition("Ready")["status"] == "False"  # type: ignore[index]
    assert ready(getnode(sim, "b1"))["status"] == "True"
    # NoExecute taints through zone a's limiter: one now, the next 10 s later (0.1/s)
    run_until(sim, t0 + 100 + 90)
    a_taints = {n: getnode(sim, n).raw["spec"]["taints"] for n in ("a1", "a2")}
    added = sorted(next(t["timeAdded"] for t in ts if t["key"] == UNREACHABLE and t["effect"] == "NoExecute")
                   for ts in a_taints.values())
    from ksched.api.meta import parse_time
    t_first, t_second = (parse_time(x) for x in added)
    assert t_first is not None and t_second is not None and t_second - t_first == pytest.approx(10, abs=0.2)
    # 300 s (DefaultTolerationSeconds) after the taints: deleted, with the taint manager's condition
    run_until(sim, t_first + 299)
    assert {"on-a1", "on-a2"} <= pods(sim).keys()
    assert pods(sim)["on-a1"].deletion_timestamp is None
    run_until(sim, t_second + 301)
    left = pods(sim)
    for name in ("on-a1", "on-a2"):
        assert name not in left or left[name].deletion_timestamp is not None
    assert "forever" in left and left["forever"].deletion_timestamp is None  # tolerates for ever
    assert left["on-b1"].phase == "Running"
    reasons = [(e.raw["reason"], e.raw["message"]) for e in sim.store.list("Event")[0]
               if e.raw["involvedObject"]["name"] == "on-a1"]
    assert ("TaintManagerEviction", "Marking for deletion Pod default/on-a1") in reasons

    # back: Ready, taints gone
    sim.kubelet.restore_node("a1")
    sim.run()
    a1 = getnode(sim, "a1")
    assert ready(a1)["status"] == "True"
    assert not {k for k, _ in taints(a1)} & {UNREACHABLE, "node.kubernetes.io/not-ready"}
    assert {c["type"]: c["status"] for c in a1.conditions}["MemoryPressure"] == "False"
    assert pods(sim)["forever"].condition("Ready")["status"] == "True"  # type: ignore[index]


def test_a_jobs_pods_in_a_failed_zone_are_replaced_in_the_other_zones() -> None:
    """(Deployments are not on main yet: a Job stands in for the workload controller.)"""
    sim, t0 = cluster()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work", "namespace": "default"},
           "spec": {"parallelism": 4, "completions": 4, "template": {
               "metadata": {"annotations": {"ksched.io/run-seconds": "3600"}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}],
                        "topologySpreadConstraints": [{"maxSkew": 4, "topologyKey": "kubernetes.io/hostname",
                                                       "whenUnsatisfiable": "ScheduleAnyway",
                                                       "labelSelector": {"matchLabels": {"job-name": "work"}}}]}}}}
    sim.load([job])
    run_until(sim, t0 + 30)
    on = {p.name: p.node_name for p in pods(sim).values()}
    in_a = [n for n, node_name in on.items() if node_name in ("a1", "a2")]
    assert in_a, on
    assert sim.kubelet is not None
    sim.kubelet.fail_node("a1")
    sim.kubelet.fail_node("a2")
    run_until(sim, t0 + 30 + 50 + 10 + 20 + 300 + 60)
    live = [p for p in pods(sim).values() if p.deletion_timestamp is None and not p.is_terminal]
    assert len(live) == 4
    assert all(p.node_name in ("b1", "c1") for p in live)
    assert all(p.phase == "Running" for p in live)


def test_when_every_zone_is_down_nothing_is_evicted() -> None:
    sim = Simulation(seed=1)
    t0 = sim.clock.now()
    sim.load([node("a1", "a"), node("b1", "b"), mkpod("p", nodeName="a1")])
    run_until(sim, t0 + 20)
    assert sim.kubelet is not None
    sim.kubelet.fail_node("a1")
    sim.kubelet.fail_node("b1")
    res = sim.run()
    assert not res.stopped_by_limit
    assert ready(getnode(sim, "a1"))["status"] == "Unknown"
    assert all(e != "NoExecute" for _, e in taints(getnode(sim, "a1")))
    assert pods(sim)["p"].deletion_timestamp is None


def test_nodes_without_a_kubelet_are_left_alone() -> None:
    sim = Simulation(seed=1, kubelet=False)
    sim.load([node("a1", "a")])
    res = sim.run()
    assert not res.stopped_by_limit
    assert getnode(sim, "a1").taints == ()


def test_token_bucket_burst_one_then_rate() -> None:
    b = _TokenBucket(0.1, 1.0, 0.0)
    assert b.try_accept(0.0) and not b.try_accept(0.0)
    assert b.next_token(0.0) == pytest.approx(10.0)
    assert not b.try_accept(9.9) and b.try_accept(10.0)
    z = _TokenBucket(0.0, 0.0, 0.0)
    assert z.next_token(100.0) is None and not z.try_accept(1e6)


@pytest.mark.parametrize(("tolerations", "want"), [
    ([], 0.0),
    ([Toleration(UNREACHABLE, "Exists", "", "NoExecute", 300)], 300.0),
    ([Toleration(UNREACHABLE, "Exists", "", "NoExecute", 300), Toleration("", "Exists", "", "", 60)], 60.0),
    ([Toleration(UNREACHABLE, "Exists", "", "NoExecute")], None),
    ([Toleration(UNREACHABLE, "Exists", "", "NoExecute", -5)], 0.0),
    ([Toleration("other", "Exists", "", "NoExecute", 300)], 0.0),
])
def test_min_toleration_seconds(tolerations: list[Toleration], want: float | None) -> None:
    assert min_toleration_seconds([Taint(UNREACHABLE, "", "NoExecute")], tuple(tolerations)) == want
