"""InterPodAffinity through the whole scheduler: embedded API server, informers, cache and
snapshot, scheduling queue with the plugin's queueing hints, binding.

The profile holds only PrioritySort, InterPodAffinity and DefaultBinder, so every placement and
every rejection below is this plugin's doing.
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.scheduler import Scheduler
from ksched.testing import make_node, make_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


class Cluster:
    def __init__(self, nodes: dict[str, dict[str, str]], namespaces: dict[str, dict[str, str]] | None = None,
                 args: dict[str, Any] | None = None) -> None:
        self.clock = VirtualClock()
        self.store = Store(self.clock, auto_create_namespaces=True)
        for name, labels in (namespaces or {}).items():
            self.store.create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name, "labels": labels}})
        for name, labels in nodes.items():
            self.store.create(make_node(name, labels=labels).raw)
        prof: dict[str, Any] = {"plugins": {"multiPoint": {
            "enabled": [{"name": "PrioritySort"}, {"name": "InterPodAffinity"}, {"name": "DefaultBinder"}],
            "disabled": [{"name": "*"}]}}}
        if args:
            prof["pluginConfig"] = [{"name": "InterPodAffinity", "args": args}]
        self.sched = Scheduler(InProcessClient(self.store), parse_configuration({"profiles": [prof]}),
                               clock=self.clock, seed=7)
        self.sched.sync()

    def create(self, name: str, labels: dict[str, str] | None = None, ns: str = "default",
               affinity: dict[str, Any] | None = None) -> None:
        self.store.create(make_pod(name, ns, labels=labels, affinity=affinity).raw)

    def bound(self, name: str, node: str, labels: dict[str, str] | None = None,
              affinity: dict[str, Any] | None = None) -> None:
        self.store.create(make_pod(name, labels=labels, affinity=affinity, node_name=node).raw)

    def delete(self, name: str, ns: str = "default") -> None:
        self.store.delete("Pod", ns, name, grace_period_seconds=0)

    def run(self) -> None:
        self.sched.run_until_idle()

    def get(self, name: str, ns: str = "default") -> Pod:
        p = self.store.get("Pod", ns, name)
        assert isinstance(p, Pod)
        return p

    def node_of(self, name: str, ns: str = "default") -> str:
        return self.get(name, ns).node_name

    def message(self, name: str, ns: str = "default") -> str:
        c = self.get(name, ns).condition("PodScheduled")
        assert c is not None
        return str(c.get("message", ""))


def required(kind: str, match_labels: dict[str, str], topo: str, **extra: Any) -> dict[str, Any]:
    t = {"labelSelector": {"matchLabels": match_labels}, "topologyKey": topo, **extra}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [t]}}


def preferred(kind: str, weight: int, match_labels: dict[str, str], topo: str) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": match_labels}, "topologyKey": topo}}]}}


def test_anti_affinity_spreads_and_requeues_when_a_matching_pod_goes() -> None:
    c = Cluster({"n0": {}, "n1": {}, "n2": {}})
    anti = required("podAntiAffinity", {"app": "web"}, HOST)
    for i in range(4):
        c.create(f"web{i}", {"app": "web"}, affinity=anti)
    c.run()
    placed = {c.node_of(f"web{i}") for i in range(3)}
    assert placed == {"n0", "n1", "n2"}
    assert c.node_of("web3") == ""
    assert c.message("web3") == "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    # Deleting an unrelated pod does not help (queueing hint: QueueSkip) ...
    c.create("other", {"app": "other"})
    c.run()
    c.delete("other")
    c.run()
    assert c.node_of("web3") == ""
    # ... deleting a pod that matched its anti-affinity does.
    freed = c.node_of("web1")
    c.delete("web1")
    c.run()
    assert c.node_of("web3") == freed


def test_existing_pods_anti_affinity_blocks_and_its_deletion_requeues() -> None:
    """Symmetry: pods already bound (spec.nodeName set) repel a pod with no affinity of its own;
    deleting one of them requeues it (the deleted pod's anti-affinity matched it)."""
    c = Cluster({"a": {ZONE: "z1"}, "b": {ZONE: "z1"}, "c": {ZONE: "z2"}})
    c.bound("guard", "a", {"app": "guard"}, required("podAntiAffinity", {"app": "noisy"}, ZONE))
    c.bound("guard2", "c", {"app": "guard"}, required("podAntiAffinity", {"app": "noisy"}, HOST))
    c.bound("other", "b", {"app": "other"})
    c.create("blocked", {"app": "noisy"})
    c.run()
    assert c.node_of("blocked") == ""
    assert c.message("blocked") == (
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules.")
    c.delete("other")
    c.run()
    assert c.node_of("blocked") == ""
    c.delete("guard2")
    c.run()
    assert c.node_of("blocked") == "c"


def test_affinity_first_pod_anywhere_then_the_group_follows() -> None:
    c = Cluster({"a": {ZONE: "z1"}, "b": {ZONE: "z1"}, "c": {ZONE: "z2"}, "d": {ZONE: "z2"}, "e": {}})
    aff = required("podAffinity", {"app": "cache"}, ZONE)
    c.create("first", {"app": "cache"}, affinity=aff)
    c.run()
    first = c.node_of("first")
    assert first in ("a", "b", "c", "d")  # never the node without the zone label
    zone = {"a": "z1", "b": "z1", "c": "z2", "d": "z2"}[first]
    for i in range(6):
        c.create(f"m{i}", {"app": "cache"}, affinity=aff)
    c.run()
    for i in range(6):
        assert {"a": "z1", "b": "z1", "c": "z2", "d": "z2"}[c.node_of(f"m{i}")] == zone
    # A pod whose affinity matches nothing (and not itself) stays pending, unresolvable.
    c.create("lonely", {"app": "x"}, affinity=required("podAffinity", {"app": "nothing"}, ZONE))
    c.run()
    assert c.node_of("lonely") == ""
    assert c.message("lonely") == "0/5 nodes are available: 5 node(s) didn't match pod affinity rules."
    # A matching pod appears: the hint requeues it.
    c.create("something", {"app": "nothing"})
    c.run()
    assert c.node_of("lonely") != ""


def test_match_label_keys_through_the_api_server() -> None:
    c = Cluster({"n0": {}, "n1": {}})
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST, "matchLabelKeys": ["rev"]}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    c.create("r1a", {"app": "web", "rev": "1"}, affinity=anti)
    c.create("r1b", {"app": "web", "rev": "1"}, affinity=anti)
    c.run()
    assert {c.node_of("r1a"), c.node_of("r1b")} == {"n0", "n1"}
    # Another revision only avoids its own revision: it fits next to rev 1.
    c.create("r2a", {"app": "web", "rev": "2"}, affinity=anti)
    c.create("r2b", {"app": "web", "rev": "2"}, affinity=anti)
    c.run()
    assert {c.node_of("r2a"), c.node_of("r2b")} == {"n0", "n1"}
    c.create("r1c", {"app": "web", "rev": "1"}, affinity=anti)
    c.run()
    assert c.node_of("r1c") == ""


def test_namespace_selector_with_namespace_labels_from_the_api_server() -> None:
    c = Cluster({"n0": {ZONE: "z1"}, "n1": {ZONE: "z2"}},
                namespaces={"team-a": {"team": "a"}, "team-b": {"team": "b"}})
    c.create("db", {"app": "db"}, ns="team-a")
    c.run()
    db_node = c.node_of("db", "team-a")
    term_extra = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    c.create("client", {"app": "client"}, ns="team-b",
             affinity=required("podAffinity", {"app": "db"}, ZONE, **term_extra))
    c.run()
    assert c.node_of("client", "team-b") == db_node
    # The same selector naming team b finds no db pod (and the pod does not match itself).
    c.create("client2", {"app": "client"}, ns="team-b",
             affinity=required("podAffinity", {"app": "db"}, ZONE,
                               namespaceSelector={"matchLabels": {"team": "b"}}))
    c.run()
    assert c.node_of("client2", "team-b") == ""


def test_preferred_affinity_and_hard_pod_affinity_weight_steer_placement() -> None:
    nodes = {f"z1-{i}": {ZONE: "z1"} for i in range(3)} | {f"z2-{i}": {ZONE: "z2"} for i in range(3)}
    c = Cluster(nodes)
    c.create("db", {"app": "db"})
    c.run()
    db_zone = c.node_of("db")[:2]
    for i in range(5):
        c.create(f"web{i}", {"app": "web"}, affinity=preferred("podAffinity", 10, {"app": "db"}, ZONE))
    for i in range(5):
        c.create(f"batch{i}", {"app": "batch"}, affinity=preferred("podAntiAffinity", 10, {"app": "db"}, ZONE))
    c.run()
    assert all(c.node_of(f"web{i}")[:2] == db_zone for i in range(5))
    assert all(c.node_of(f"batch{i}")[:2] != db_zone for i in range(5))
    # Symmetry with hardPodAffinityWeight: a pod with no affinity of its own is drawn to the
    # zone of pods that require it.
    c2 = Cluster(nodes, args={"hardPodAffinityWeight": 5})
    c2.create("needs-api", {"app": "x"}, affinity=required("podAffinity", {"app": "api"}, ZONE))
    c2.create("api-seed", {"app": "api"})
    c2.run()
    target = c2.node_of("needs-api")[:2]
    assert c2.node_of("api-seed")[:2] == target
    for i in range(4):
        c2.create(f"api{i}", {"app": "api"})
    c2.run()
    assert all(c2.node_of(f"api{i}")[:2] == target for i in range(4))


def test_pending_pod_relabelled_out_of_an_anti_affinity_is_requeued() -> None:
    """The target pod's own label update requeues it (existing pods' anti-affinity may stop
    matching it); a node without the topology label is not covered by a zone anti-affinity."""
    c = Cluster({"a": {ZONE: "z1"}, "b": {}})
    c.bound("guard-a", "a", {"app": "guard"}, required("podAntiAffinity", {"app": "noisy"}, ZONE))
    c.bound("guard-b", "b", {"app": "guard"}, required("podAntiAffinity", {"app": "noisy"}, HOST))
    c.create("pending", {"app": "noisy"})
    c.run()
    assert c.node_of("pending") == ""
    raw = copy.deepcopy(c.get("pending").raw)
    raw["metadata"]["labels"] = {"app": "quiet"}
    c.store.update(raw)
    c.run()
    assert c.node_of("pending") in ("a", "b")
