"""The DaemonSet controller (ksched.controllers.daemon) in a simulated cluster, against upstream's
pkg/controller/daemon: one pod per eligible node, pinned by a required node affinity on
metadata.name and bound by the scheduler, with upstream's automatic tolerations; eligibility by
nodeSelector, node affinity and taints (NoSchedule keeps a running pod, NoExecute removes it);
nodes added, relabelled and removed; failed pods deleted with backoff; the rolling update with
maxUnavailable and with maxSurge; revisions and status."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import events_of, mkds, mknode, pods_of
from ksched.api.apps import ControllerRevision, DaemonSet
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.controllers.daemon.controller import node_should_run_daemon_pod
from ksched.controllers.daemon.util import target_node_name
from ksched.sim.simulation import Simulation

TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    raw = mknode(name)
    if labels:
        raw["metadata"]["labels"] = labels
    if taints:
        raw["spec"] = {"taints": taints}
    return raw


def sim_with(*nodes: dict[str, Any], startup: float = 0.0) -> Simulation:
    sim = Simulation(seed=0)
    assert sim.kubelet is not None
    sim.kubelet.startup_delay = startup
    for n in nodes:
        sim.store.create(n)
    return sim


def placement(sim: Simulation, name: str = "agent", live: bool = True) -> dict[str, str]:
    return {p.node_name or f"<unbound {p.name}>": p.name for p in pods_of(sim.store, name, "DaemonSet", live=live)}


def ds(sim: Simulation, name: str = "agent") -> DaemonSet:
    d = sim.store.get("DaemonSet", "default", name)
    assert isinstance(d, DaemonSet)
    return d


def patch_node(sim: Simulation, name: str, change: Any) -> None:
    raw = sim.store.get("Node", "", name).deepcopy_raw()
    change(raw)
    sim.store.update(raw)


def test_one_pod_per_node_pinned_by_node_affinity() -> None:
    sim = sim_with(node("n1"), node("n2"), node("n3"))
    sim.store.create(mkds("agent"))
    sim.run()
    assert sorted(placement(sim)) == ["n1", "n2", "n3"]
    d = ds(sim)
    (rev,) = [r for r in sim.store.items("ControllerRevision") if isinstance(r, ControllerRevision)]
    for n, pod_name in placement(sim).items():
        p = sim.store.get("Pod", "default", pod_name)
        assert isinstance(p, Pod) and p.phase == "Running"
        spec = p.raw["spec"]
        assert spec["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}]}}}
        assert target_node_name(p) == n
        assert spec["tolerations"] == TOLERATIONS  # (admission's 300 s defaults are not added: tolerated already)
        assert p.labels == {"app": "agent", "pod-template-generation": "1",
                            "controller-revision-hash": rev.labels["controller-revision-hash"]}
    assert rev.name == f"agent-{rev.labels['controller-revision-hash']}" and rev.revision == 1
    assert d.raw["status"] == {"currentNumberScheduled": 3, "numberMisscheduled": 0, "desiredNumberScheduled": 3,
                               "numberReady": 3, "observedGeneration": 1, "updatedNumberScheduled": 3,
                               "numberAvailable": 3}
    assert [r for _, r, _ in events_of(sim.store, "agent", "DaemonSet")] == ["SuccessfulCreate"] * 3


def test_host_network_pods_tolerate_network_unavailable() -> None:
    sim = sim_with(node("n1"))
    raw = mkds("agent")
    raw["spec"]["template"]["spec"]["hostNetwork"] = True
    sim.store.create(raw)
    sim.run()
    (p,) = pods_of(sim.store, "agent")
    assert p.raw["spec"]["tolerations"][-1] == {"key": "node.kubernetes.io/network-unavailable",
                                                "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("labels", "taints", "template", "want"), [
    ({}, [], {}, (True, True)),
    ({"disk": "ssd"}, [], {"nodeSelector": {"disk": "ssd"}}, (True, True)),
    ({}, [], {"nodeSelector": {"disk": "ssd"}}, (False, False)),
    ({}, [{"key": "gpu", "effect": "NoSchedule"}], {}, (False, True)),   # keeps an existing pod
    ({}, [{"key": "gpu", "effect": "NoExecute"}], {}, (False, False)),
    ({}, [{"key": "gpu", "effect": "PreferNoSchedule"}], {}, (True, True)),
    ({}, [{"key": "gpu", "effect": "NoExecute"}],
     {"tolerations": [{"key": "gpu", "operator": "Exists"}]}, (True, True)),
    ({}, [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], {}, (True, True)),
    ({}, [], {"nodeName": "other"}, (False, False)),
    ({"zone": "a"}, [], {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}},
     (False, False)),
])
def test_node_should_run_daemon_pod(labels: dict[str, str], taints: list[dict[str, str]], template: dict[str, Any],
                                    want: tuple[bool, bool]) -> None:
    raw = mkds("agent")
    raw["spec"]["template"]["spec"].update(template)
    assert node_should_run_daemon_pod(Node(node("n1", labels, taints)), DaemonSet(raw)) == want


def test_node_changes_reconcile() -> None:
    sim = sim_with(node("n1", {"role": "edge"}), node("n2"))
    raw = mkds("agent")
    raw["spec"]["template"]["spec"]["nodeSelector"] = {"role": "edge"}
    sim.store.create(raw)
    sim.run()
    assert sorted(placement(sim)) == ["n1"]
    sim.store.create(node("n3", {"role": "edge"}))  # a node joins
    sim.run()
    assert sorted(placement(sim)) == ["n1", "n3"]
    patch_node(sim, "n2", lambda r: r["metadata"].update(labels={"role": "edge"}))  # labelled in
    sim.run()
    assert sorted(placement(sim)) == ["n1", "n2", "n3"]
    patch_node(sim, "n1", lambda r: r["metadata"].update(labels={}))  # labelled out
    sim.run()
    assert sorted(placement(sim)) == ["n2", "n3"]
    # An untolerated NoSchedule taint keeps the pod running; NoExecute removes it.
    patch_node(sim, "n2", lambda r: r.update(spec={"taints": [{"key": "maint", "effect": "NoSchedule"}]}))
    sim.run()
    assert sorted(placement(sim)) == ["n2", "n3"]
    assert ds(sim).raw["status"]["numberMisscheduled"] == 1  # running where it should not start
    patch_node(sim, "n2", lambda r: r.update(spec={"taints": [{"key": "maint", "effect": "NoExecute"}]}))
    sim.run()
    assert sorted(placement(sim)) == ["n3"]


def test_pending_pod_of_a_removed_node_is_deleted() -> None:
    sim = sim_with(node("n1"), node("full"))
    sim.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "default"},
                      "spec": {"nodeName": "full", "containers": [{"name": "c", "image": "i", "resources": {
                          "requests": {"cpu": "8"}}}]}})
    raw = mkds("agent")
    raw["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    sim.store.create(raw)
    sim.run()
    unbound = [p for p in pods_of(sim.store, "agent") if not p.node_name]
    assert [target_node_name(p) for p in unbound] == ["full"]
    sim.store.delete("Pod", "default", "hog", grace_period_seconds=0)
    sim.store.delete("Node", "", "full")
    sim.run()
    assert [target_node_name(p) for p in pods_of(sim.store, "agent")] == ["n1"]


def test_failed_pods_are_deleted_with_backoff() -> None:
    sim = sim_with(node("n1"))
    sim.store.create(mkds("agent"))
    sim.run()
    for _ in range(3):
        (p,) = pods_of(sim.store, "agent", live=True)
        raw = p.deepcopy_raw()
        raw["status"]["phase"] = "Failed"
        sim.store.update_status(raw)
        sim.run()
    warnings = [m for t, r, m in events_of(sim.store, "agent") if r == "FailedDaemonPod"]
    assert len(warnings) == 3 and warnings[0].startswith("Found failed daemon pod default/agent-")
    assert warnings[0].endswith(" on node n1, will try to kill it")
    (p,) = pods_of(sim.store, "agent", live=True)
    assert p.phase == "Running"


def _image(v: str) -> Any:
    def change(raw: dict[str, Any]) -> None:
        raw["spec"]["template"]["spec"]["containers"][0]["image"] = v
    return change


def _update(sim: Simulation, change: Any) -> None:
    raw = ds(sim).deepcopy_raw()
    change(raw)
    sim.store.update(raw)


@pytest.mark.parametrize(("strategy", "max_down", "max_extra"), [
    ({"rollingUpdate": {"maxUnavailable": 1}}, 1, 0),
    ({"rollingUpdate": {"maxUnavailable": "50%"}}, 2, 0),   # 50% of 4, rounded up
    ({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}, 0, 1),
])
def test_rolling_update_bounds(strategy: dict[str, Any], max_down: int, max_extra: int) -> None:
    sim = sim_with(*(node(f"n{i}") for i in range(4)), startup=2.0)
    sim.store.create(mkds("agent", updateStrategy=strategy))
    sim.run()
    worst = {"down": 0, "extra": 0}

    def check() -> None:
        live = pods_of(sim.store, "agent", live=True)
        by_node: dict[str, int] = {}
        ready_nodes = set()
        for p in live:
            n = target_node_name(p) or ""
            by_node[n] = by_node.get(n, 0) + 1
            if p.condition("Ready") and p.condition("Ready")["status"] == "True":  # type: ignore[index]
                ready_nodes.add(n)
        worst["down"] = max(worst["down"], 4 - len(ready_nodes))
        worst["extra"] = max(worst["extra"], sum(c - 1 for c in by_node.values() if c > 1))

    sim.store.after_write.append(check)
    _update(sim, _image("img:2"))
    sim.run()
    assert worst["down"] == max_down and worst["extra"] == max_extra
    d = ds(sim)
    assert d.template_generation == 2 and d.updated_number_scheduled == 4
    assert {p.labels["pod-template-generation"] for p in pods_of(sim.store, "agent", live=True)} == {"2"}
    revs = sorted((r.revision, r.labels["controller-revision-hash"]) for r in sim.store.items("ControllerRevision"))
    assert [n for n, _ in revs] == [1, 2]


def test_on_delete_and_history_limit() -> None:
    sim = sim_with(node("n1"))
    sim.store.create(mkds("agent", updateStrategy={"type": "OnDelete"}, revisionHistoryLimit=1))
    sim.run()
    for v in ("img:2", "img:3"):
        _update(sim, _image(v))
        sim.run()
    (p,) = pods_of(sim.store, "agent", live=True)
    assert p.labels["pod-template-generation"] == "1"  # OnDelete: the old pod stays
    # Old revisions beyond the limit go unless a pod runs them: revision 1 (the pod's) is kept.
    revs = sorted(r.revision for r in sim.store.items("ControllerRevision"))
    assert revs == [1, 3]
