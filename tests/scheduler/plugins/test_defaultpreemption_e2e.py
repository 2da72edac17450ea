"""DefaultPreemption end to end: the embedded API store, informers, the scheduling queue and the
scheduling loop on a virtual clock. The preemptor fails, preempts, is nominated, and lands on
the node once its victims are gone; messages, conditions and events are upstream's."""

from __future__ import annotations

from typing import Any

import pytest
from test_defaultpreemption_support import FIT_PLUGINS, FakeFit

from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.scheduler.config import (
    EXTENSION_POINTS,
    PluginRef,
    PluginSet,
    Profile,
    SchedulerConfiguration,
    parse_configuration,
)
from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.cluster import EmbeddedCluster
from ksched.testing import make_node, make_pod


class Cluster:
    def __init__(self, fit: str, async_preemption: bool = True, args: dict[str, Any] | None = None) -> None:
        self.clock = VirtualClock()
        # Pods state their priority (and preemption policy) themselves, as in upstream's
        # integration tests, whose API server runs without the Priority admission plugin.
        cluster = EmbeddedCluster(self.clock, disable_admission_plugins=("Priority",))
        self.store, self.client = cluster.store, cluster.client
        pm = {ep: PluginSet() for ep in EXTENSION_POINTS}
        pm["multiPoint"] = PluginSet([PluginRef(n) for n in ("PrioritySort", fit, "DefaultPreemption",
                                                             "DefaultBinder")])
        base = parse_configuration({}).profiles[0].plugin_config
        cfg = {k: dict(v) for k, v in base.items()}
        if args:
            cfg["DefaultPreemption"].update(args)
        self.sched = Scheduler(self.client, SchedulerConfiguration(profiles=[Profile("default-scheduler", pm, cfg)]),
                               clock=self.clock, registry=Registry({"FakeFit": FakeFit}, load_entry_points=False))
        self.plugin: DefaultPreemption = self.sched.profiles["default-scheduler"].plugins["DefaultPreemption"]  # type: ignore[assignment]
        self.plugin.set_async_preemption(async_preemption)

    def add(self, obj: Any) -> None:
        self.store.create(obj.raw if hasattr(obj, "raw") else obj)

    def run(self, seconds: float = 0.0) -> None:
        self.sched.run_until_idle()
        if seconds:
            self.clock.advance(seconds)
            self.store.finalize_expired()
            self.sched.run_until_idle()

    def pod(self, name: str) -> Pod:
        p = self.store.get("Pod", "default", name)
        assert isinstance(p, Pod)
        return p

    def has_pod(self, name: str) -> bool:
        return self.store.try_get("Pod", "default", name) is not None

    def events(self, reason: str | None = None, name: str | None = None) -> list[str]:
        out = []
        for e in self.store.items("Event"):
            raw = e.raw
            if reason is not None and raw["reason"] != reason:
                continue
            if name is not None and raw["involvedObject"]["name"] != name:
                continue
            out.append(raw["message"])
        return out


def running(name: str, node: str, priority: int, cpu: str, grace: int = 30, labels: dict[str, str] | None = None,
            start: str = "2024-12-31T00:00:00Z") -> dict[str, Any]:
    p = make_pod(name, requests={"cpu": cpu}, priority=priority, node_name=node, labels=labels,
                 termination_grace_period_seconds=grace, start_time=start)
    raw = p.raw
    raw["status"] = {**raw["status"], "phase": "Running",
                     "conditions": [{"type": "Ready", "status": "True"}]}
    return raw


@pytest.mark.parametrize("async_preemption", [True, False])
@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_preemptor_is_nominated_and_lands_after_victims_leave(fit: str, async_preemption: bool) -> None:
    c = Cluster(fit, async_preemption)
    c.add(make_node("node1", cpu="1", memory="1Gi"))
    c.add(running("victim", "node1", 0, "1"))
    c.run()
    c.add(make_pod("hi", requests={"cpu": "1"}, priority=100))
    c.run()

    hi = c.pod("hi")
    assert hi.node_name == "" and hi.nominated_node_name == "node1"
    cond = hi.condition("PodScheduled")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert cond["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    victim = c.pod("victim")
    assert victim.deletion_timestamp is not None
    dt = victim.condition("DisruptionTarget")
    assert dt is not None and dt["status"] == "True" and dt["reason"] == "PreemptionByScheduler"
    assert dt["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert c.events("Preempted", "victim") == [f"Preempted by pod {hi.uid} on node node1"]
    assert c.sched.queue.nominator.nominated_node(hi) == "node1"

    c.run(31)  # the grace period ends, the victim goes away
    assert not c.has_pod("victim")
    assert c.pod("hi").node_name == "node1"
    assert c.events("Scheduled", "hi") == ["Successfully assigned default/hi to node1"]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_no_victims_message(fit: str) -> None:
    c = Cluster(fit)
    c.add(make_node("node1", cpu="1", memory="1Gi"))
    c.add(running("peer", "node1", 100, "1"))
    c.add(make_pod("p", requests={"cpu": "1"}, priority=100))
    c.run()
    p = c.pod("p")
    assert p.node_name == "" and p.nominated_node_name == ""
    assert c.events("FailedScheduling", "p") == [
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption "
        "victims found for incoming pod."]
    assert c.pod("peer").deletion_timestamp is None


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_preemption_policy_never(fit: str) -> None:
    c = Cluster(fit)
    c.add(make_node("node1", cpu="1", memory="1Gi"))
    c.add(running("low", "node1", 0, "1"))
    c.add(make_pod("p", requests={"cpu": "1"}, priority=100, preemption_policy="Never"))
    c.run()
    assert c.events("FailedScheduling", "p") == [
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."]
    assert c.pod("low").deletion_timestamp is None


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_pdb_protected_pod_is_spared(fit: str) -> None:
    """Both nodes could make room; the one whose victim is covered by an exhausted PDB loses."""
    c = Cluster(fit)
    for n in ("node1", "node2"):
        c.add(make_node(n, cpu="1", memory="1Gi"))
    # node1's pod has the lower priority, but preempting it would violate its PDB.
    c.add(running("protected", "node1", 0, "1", labels={"app": "db"}))
    c.add(running("plain", "node2", 10, "1"))
    c.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "db", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    c.run()
    pdb = c.store.get("PodDisruptionBudget", "default", "db")
    assert pdb.raw["status"]["disruptionsAllowed"] == 0
    c.add(make_pod("hi", requests={"cpu": "1"}, priority=100))
    c.run()
    assert c.pod("hi").nominated_node_name == "node2"
    assert c.pod("plain").deletion_timestamp is not None
    assert c.pod("protected").deletion_timestamp is None
    d = c.plugin.last_decision
    assert d is not None
    assert {cand.name: cand.victims.num_pdb_violations for cand in d.candidates} == {"node1": 1, "node2": 0}


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_lowest_priority_victims_and_reprieve(fit: str) -> None:
    """Only as many pods as needed go, the least important first."""
    c = Cluster(fit)
    c.add(make_node("node1", cpu="4", memory="4Gi"))
    c.add(running("a", "node1", 5, "1", start="2024-12-31T00:00:00Z"))
    c.add(running("b", "node1", 5, "1", start="2024-12-31T01:00:00Z"))  # started later: less important
    c.add(running("c", "node1", 1, "1"))
    c.add(running("d", "node1", 500, "1"))
    c.add(make_pod("p", requests={"cpu": "2"}, priority=100))
    c.run()
    gone = sorted(n for n in "abcd" if c.pod(n).deletion_timestamp is not None)
    assert gone == ["b", "c"]
    assert c.pod("p").nominated_node_name == "node1"


@pytest.mark.parametrize("async_preemption", [True, False])
@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_higher_priority_pod_takes_the_room(fit: str, async_preemption: bool) -> None:
    """A mid pod preempts; before its victim has gone, a high pod preempts on the same node; the
    high pod gets the node and the mid pod loses its nomination."""
    c = Cluster(fit, async_preemption)
    c.add(make_node("node1", cpu="2", memory="1Gi"))
    c.add(running("low", "node1", 0, "2"))
    c.run()
    c.add(make_pod("mid", requests={"cpu": "2"}, priority=50))
    c.run()
    assert c.pod("mid").nominated_node_name == "node1"
    c.add(make_pod("high", requests={"cpu": "2"}, priority=100))
    c.run()
    assert c.pod("high").nominated_node_name == "node1"
    c.run(31)
    c.run(15)  # backoff of the mid pod
    assert c.pod("high").node_name == "node1"
    mid = c.pod("mid")
    assert mid.node_name == "" and mid.nominated_node_name == ""
    assert c.events("FailedScheduling", "mid")[-1] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption "
        "victims found for incoming pod.")


def _scenario(fit: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    c = Cluster(fit, args={"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 3})
    for i in range(8):
        c.add(make_node(f"n{i}", cpu="2", memory="4Gi"))
    for i in range(16):
        c.add(running(f"bg{i}", f"n{i % 8}", i % 3, "1", start=f"2024-12-31T00:{i:02d}:00Z"))
    c.run()
    for i in range(6):
        c.add(make_pod(f"hp{i}", requests={"cpu": "2"}, priority=100 + i))
    c.run()
    c.run(31)
    c.run(20)
    pods = sorted((p.name, p.node_name, p.nominated_node_name) for p in c.store.items("Pod")
                  if isinstance(p, Pod))
    return pods, sorted(c.events("Preempted"))


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_deterministic(fit: str) -> None:
    first = _scenario(fit)
    assert first == _scenario(fit)
    pods, preempted = first
    placed = [p for p in pods if p[0].startswith("hp") and p[1]]
    assert len(placed) == 6
    assert len(preempted) == 12  # each high pod needed a whole node: two background pods each


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_extended_resources_and_hugepages_are_freed(fit: str) -> None:
    """GPU and hugepages held by lower-priority pods are freed by preemption; the preemptor binds
    once they are gone (the store's conflict resolver checks the binding)."""
    c = Cluster(fit)
    c.add(make_node("node1", cpu="8", memory="8Gi",
                    allocatable={"nvidia.com/gpu": "1", "hugepages-2Mi": "256Mi"}))
    gpu = running("gpu-low", "node1", 0, "1")
    gpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                                 "limits": {"nvidia.com/gpu": "1"}}
    huge = running("huge-low", "node1", 0, "1")
    huge["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "128Mi", "hugepages-2Mi": "256Mi"},
        "limits": {"memory": "128Mi", "hugepages-2Mi": "256Mi"}}
    c.add(gpu)
    c.add(huge)
    c.add(running("cpu-low", "node1", 0, "1"))
    c.run()
    want = make_pod("want", priority=100, containers=[{
        "name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "1", "memory": "128Mi", "nvidia.com/gpu": "1", "hugepages-2Mi": "128Mi"},
                      "limits": {"memory": "128Mi", "nvidia.com/gpu": "1", "hugepages-2Mi": "128Mi"}}}])
    c.add(want)
    c.run()
    assert c.pod("want").nominated_node_name == "node1"
    terminating = sorted(n for n in ("gpu-low", "huge-low", "cpu-low") if c.pod(n).deletion_timestamp is not None)
    assert terminating == ["gpu-low", "huge-low"]
    reasons = c.pod("want").condition("PodScheduled")["message"]
    assert reasons == "0/1 nodes are available: 1 Insufficient hugepages-2Mi, 1 Insufficient nvidia.com/gpu."
    c.run(31)
    assert c.pod("want").node_name == "node1"
    assert c.pod("cpu-low").deletion_timestamp is None


def test_cleared_nomination_leaves_the_nominator() -> None:
    c = Cluster("FakeFit")
    c.add(make_node("node1", cpu="2", memory="1Gi"))
    c.add(running("low", "node1", 0, "2"))
    c.run()
    c.add(make_pod("mid", requests={"cpu": "2"}, priority=50))
    c.run()
    c.add(make_pod("high", requests={"cpu": "2"}, priority=100))
    c.run()
    c.run(31)
    c.run(15)
    mid = c.pod("mid")
    assert mid.nominated_node_name == ""
    assert c.sched.queue.nominator.nominated_node(mid) == ""
