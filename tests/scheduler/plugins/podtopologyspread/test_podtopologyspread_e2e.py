"""PodTopologySpread through the whole scheduler: embedded API server, informers, cache and
snapshot, scheduling queue with the plugin's queueing hints, binding.

The profile holds only PrioritySort, PodTopologySpread and DefaultBinder, so every placement and
every rejection below is this plugin's doing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.scheduler import Scheduler
from ksched.testing import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"


class Cluster:
    def __init__(self, nodes: dict[str, dict[str, str]], args: dict[str, Any] | None = None) -> None:
        self.clock = VirtualClock()
        self.store = Store(self.clock, auto_create_namespaces=True)
        self.zone: dict[str, str] = {}
        for name, labels in nodes.items():
            self.add_node(name, labels)
        prof: dict[str, Any] = {"plugins": {"multiPoint": {
            "enabled": [{"name": "PrioritySort"}, {"name": "PodTopologySpread"}, {"name": "DefaultBinder"}],
            "disabled": [{"name": "*"}]}}}
        if args:
            prof["pluginConfig"] = [{"name": "PodTopologySpread", "args": args}]
        self.sched = Scheduler(InProcessClient(self.store), parse_configuration({"profiles": [prof]}),
                               clock=self.clock, seed=11)
        self.sched.sync()

    def add_node(self, name: str, labels: dict[str, str]) -> None:
        self.zone[name] = labels.get(ZONE, "")
        self.store.create(make_node(name, labels=labels).raw)

    def create(self, name: str, labels: dict[str, str] | None = None, constraints: list[dict[str, Any]] | None = None,
               node: str = "", **kw: Any) -> None:
        self.store.create(make_pod(name, labels=labels, topology_spread_constraints=constraints, node_name=node,
                                   **kw).raw)

    def delete(self, name: str) -> None:
        self.store.delete("Pod", "default", name, grace_period_seconds=0)

    def run(self) -> None:
        self.sched.run_until_idle()

    def get(self, name: str) -> Pod:
        p = self.store.get("Pod", "default", name)
        assert isinstance(p, Pod)
        return p

    def node_of(self, name: str) -> str:
        return self.get(name).node_name

    def message(self, name: str) -> str:
        c = self.get(name).condition("PodScheduled")
        assert c is not None
        return str(c.get("message", ""))


def zone_spread(when: str, skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": skew, "topologyKey": ZONE, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": "web"}}, **extra}]


def three_zones() -> dict[str, dict[str, str]]:
    return {f"n{i}": {ZONE: f"z{i % 3}"} for i in range(6)}


def test_hard_spreading_balances_zones() -> None:
    c = Cluster(three_zones())
    for i in range(9):
        c.create(f"w{i}", {"app": "web"}, zone_spread("DoNotSchedule"))
        c.run()  # one at a time: each placement changes the counts the next one sees
    per_zone = Counter(c.zone[c.node_of(f"w{i}")] for i in range(9))
    assert per_zone == {"z0": 3, "z1": 3, "z2": 3}


def test_soft_spreading_prefers_the_emptiest_zone() -> None:
    c = Cluster(three_zones())
    c.create("old0", {"app": "web"}, node="n0")
    c.create("old1", {"app": "web"}, node="n3")
    c.run()
    for i in range(4):
        c.create(f"w{i}", {"app": "web"}, zone_spread("ScheduleAnyway"))
        c.run()
    per_zone = Counter(c.zone[c.node_of(p)] for p in ["old0", "old1"] + [f"w{i}" for i in range(4)])
    assert per_zone == {"z0": 2, "z1": 2, "z2": 2}


def test_unschedulable_until_a_node_in_a_new_zone_appears() -> None:
    c = Cluster({"a": {ZONE: "z1"}})
    c.create("old", {"app": "web"}, node="a")
    c.create("p", {"app": "web"}, zone_spread("DoNotSchedule", minDomains=2))
    c.run()
    assert c.node_of("p") == ""
    assert c.message("p") == "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints."
    c.add_node("b", {"rack": "r1"})  # no zone label: the hint skips it, and so would Filter
    c.run()
    assert c.node_of("p") == ""
    c.add_node("c", {ZONE: "z2"})
    c.clock.advance(30)
    c.run()
    assert c.node_of("p") == "c"


def test_unschedulable_until_a_matching_pod_goes() -> None:
    c = Cluster({"a": {ZONE: "z1"}, "b": {ZONE: "z2"}})
    for name, node in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        c.create(name, {"app": "web"}, node=node)
    c.create("p", {"app": "web"}, zone_spread("DoNotSchedule", minDomains=3))
    c.run()
    assert c.node_of("p") == ""
    assert c.message("p") == "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    c.delete("b1")
    c.clock.advance(30)
    c.run()
    assert c.node_of("p") == "b"


def test_missing_label_is_unresolvable() -> None:
    c = Cluster({"a": {"rack": "r1"}})
    c.create("p", {"app": "web"}, zone_spread("DoNotSchedule"))
    c.run()
    assert c.message("p") == ("0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints "
                              "(missing required label).")


def test_system_default_spreads_pods_of_one_service() -> None:
    c = Cluster({f"n{i}": {ZONE: f"z{i % 2}"} for i in range(4)})
    # The default selector comes from the Service selecting the pods (the scheduler's Service
    # informer), as upstream's DefaultSelector.
    c.store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    for i in range(8):
        c.create(f"r{i}", {"app": "web"}, owner_kind="ReplicaSet", owner_name="web-rs")
        c.run()
    per_node = Counter(c.node_of(f"r{i}") for i in range(8))
    assert sorted(per_node.values()) == [2, 2, 2, 2]


def test_default_spreading_follows_a_service_created_after_the_scheduler_started() -> None:
    c = Cluster({"n0": {ZONE: "z0"}, "n1": {ZONE: "z0"}})
    for i in range(3):
        c.create(f"old{i}", {"app": "web"}, node="n0")
    c.run()
    c.store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    for i in range(3):
        c.create(f"new{i}", {"app": "web"})
        c.run()
    # The hostname default constraint sees the three on n0: every new one goes to n1.
    assert [c.node_of(f"new{i}") for i in range(3)] == ["n1", "n1", "n1"]
    # A pod the Service does not select is not spread with them (no default selector at all).
    c.store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "other"},
                    "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}})
    plugin = c.sched.profiles["default-scheduler"].plugins["PodTopologySpread"]
    assert plugin.get_constraints(make_pod("x", labels={"app": "db"}), "ScheduleAnyway") == ()


def test_default_constraints_are_shared_by_a_template_and_follow_the_listers() -> None:
    # The default selector reads the pod's namespace, labels and controller: replicas of one
    # template share their default constraints, which are worked out again after any change
    # the listers see (a Service, a ReplicaSet).
    c = Cluster({"n0": {ZONE: "z0"}})
    plugin = c.sched.profiles["default-scheduler"].plugins["PodTopologySpread"]
    c.store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    c.run()
    a = plugin.get_constraints(make_pod("a", labels={"app": "web"}, owner_kind="ReplicaSet"), "ScheduleAnyway")
    b = plugin.get_constraints(make_pod("b", labels={"app": "web"}, owner_kind="ReplicaSet"), "ScheduleAnyway")
    assert a and b is a
    assert [x.topology_key for x in a] == ["kubernetes.io/hostname", ZONE]
    assert all(x.selector.matches(make_pod("x", labels={"app": "web"})) for x in a)
    # Another namespace, other labels: not that Service's pods.
    assert plugin.get_constraints(make_pod("c", "other", labels={"app": "web"}), "ScheduleAnyway") == ()
    assert plugin.get_constraints(make_pod("d", labels={"app": "db"}), "ScheduleAnyway") == ()
    # A Service for app=db appears: the next db pod is spread by it, and the web pods' selector
    # is unchanged (worked out again, equal).
    c.store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "default"},
                    "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}})
    c.run()
    d = plugin.get_constraints(make_pod("e", labels={"app": "db"}), "ScheduleAnyway")
    assert d and all(x.selector.matches(make_pod("x", labels={"app": "db"})) for x in d)
    assert not any(x.selector.matches(make_pod("x", labels={"app": "web"})) for x in d)
    again = plugin.get_constraints(make_pod("f", labels={"app": "web"}, owner_kind="ReplicaSet"), "ScheduleAnyway")
    assert again is not a and [x.selector.matches(make_pod("x", labels={"app": "web"})) for x in again] == [True, True]
    # The same labels under another controller: a key of its own (its lister may add a selector).
    other = plugin.get_constraints(make_pod("g", labels={"app": "web"}, owner_kind="ReplicaSet", owner_name="rs2"),
                                   "ScheduleAnyway")
    assert other is not again
    # DoNotSchedule: the system defaults have none.
    assert plugin.get_constraints(make_pod("h", labels={"app": "web"}), "DoNotSchedule") == ()
