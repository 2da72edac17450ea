"""The node's own fit check at admission (ksched.kubelet.predicate, upstream's
pkg/kubelet/lifecycle/predicate.go): upstream's reasons and messages, only the first failure,
and the kubelet refusing a pod that a path around the scheduler over-committed."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mknode, mkpod
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.lifecycle import PodAdmitAttributes
from ksched.kubelet.predicate import PredicateAdmitHandler
from ksched.sim.simulation import Simulation


def node(cpu: str = "2", memory: str = "4Gi", pods: str = "110", labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, **extra: str) -> Node:
    raw = mknode("n1")
    raw["metadata"]["labels"] = labels or {}
    raw["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "pods": pods, **extra}
    if taints:
        raw["spec"] = {"taints": taints}
    return Node(raw)


def pod(name: str = "p", requests: dict[str, str] | None = None, ports: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    c: dict[str, Any] = {"name": "c", "image": "img"}
    if requests:
        c["resources"] = {"requests": requests}
    if ports:
        c["ports"] = ports
    spec.setdefault("nodeName", "n1")
    return Pod(mkpod(name, labels, containers=[c], **spec))


def admit(p: Pod, n: Node | None, others: tuple[Pod, ...] = ()) -> tuple[bool, str, str]:
    r = PredicateAdmitHandler(lambda: n).admit(PodAdmitAttributes(p, others))
    return r.admit, r.reason, r.message


AFFINITY_ZONE_B = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
NO_EXEC = [{"key": "k", "value": "v", "effect": "NoExecute"}]
NO_SCHED = [{"key": "k", "value": "v", "effect": "NoSchedule"}]

# (case, pod, node, admitted pods, (admit, reason, message)) -- upstream's reasons and messages.
CASES: list[tuple[str, Pod, Node | None, tuple[Pod, ...], tuple[bool, str, str]]] = [
    ("fits", pod(requests={"cpu": "1"}), node(), (pod("o", {"cpu": "1"}),), (True, "", "")),
    ("no node", pod(), None, (), (False, "InvalidNodeInfo", "Kubelet cannot get node info.")),
    ("cpu", pod(requests={"cpu": "1500m"}), node(), (pod("o", {"cpu": "1"}),),
     (False, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000")),
    ("memory", pod(requests={"memory": "3Gi"}), node(), (pod("o", {"memory": "2Gi"}),),
     (False, "OutOfmemory", "Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, "
                            "capacity: 4294967296")),
    ("cpu is checked before memory", pod(requests={"cpu": "3", "memory": "5Gi"}), node(), (),
     (False, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000")),
    ("ephemeral-storage", pod(requests={"ephemeral-storage": "2Gi"}), node(**{"ephemeral-storage": "1Gi"}), (),
     (False, "OutOfephemeral-storage",
      "Node didn't have enough resource: ephemeral-storage, requested: 2147483648, used: 0, capacity: 1073741824")),
    ("extended resource", pod(requests={"example.com/gpu": "2"}), node(**{"example.com/gpu": "1"}), (),
     (False, "OutOfexample.com/gpu",
      "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1")),
    ("extended resource the node lacks is dropped", pod(requests={"example.com/gpu": "2"}), node(), (),
     (True, "", "")),
    ("pod count", pod(), node(pods="1"), (pod("o"),),
     (False, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")),
    ("zero requests always fit", pod(), node(cpu="0"), (), (True, "", "")),
    ("nodeSelector", pod(nodeSelector={"zone": "b"}), node(labels={"zone": "a"}), (),
     (False, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")),
    ("required node affinity", pod(affinity=AFFINITY_ZONE_B), node(labels={"zone": "a"}), (),
     (False, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")),
    ("node affinity matches", pod(affinity=AFFINITY_ZONE_B), node(labels={"zone": "b"}), (), (True, "", "")),
    ("node name", pod(nodeName="n2"), node(), (),
     (False, "NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name")),
    ("host port", pod(ports=[{"containerPort": 80, "hostPort": 8080}]), node(),
     (pod("o", ports=[{"containerPort": 80, "hostPort": 8080}]),),
     (False, "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")),
    ("host port on another IP", pod(ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]), node(),
     (pod("o", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}]),), (True, "", "")),
    ("NoExecute taint", pod(), node(taints=NO_EXEC), (),
     (False, "TaintToleration",
      "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")),
    ("NoSchedule taint is the scheduler's business", pod(), node(taints=NO_SCHED), (), (True, "", "")),
    ("tolerated NoExecute taint", pod(tolerations=[{"key": "k", "operator": "Exists"}]), node(taints=NO_EXEC), (),
     (True, "", "")),
    ("resources are reported before affinity", pod(requests={"cpu": "3"}, nodeSelector={"zone": "b"}),
     node(labels={"zone": "a"}), (),
     (False, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000")),
    ("os label", pod(labels={"kubernetes.io/os": "windows"}), node(), (),
     (False, "PodOSSelectorNodeLabelDoesNotMatch",
      "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")),
    ("spec.os", pod(os={"name": "windows"}), node(labels={"kubernetes.io/os": "linux"}), (),
     (False, "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")),
]


@pytest.mark.parametrize(("case", "p", "n", "others", "want"), CASES, ids=[c[0] for c in CASES])
def test_admission_reasons(case: str, p: Pod, n: Node | None, others: tuple[Pod, ...],
                           want: tuple[bool, str, str]) -> None:
    assert admit(p, n, others) == want


def test_static_pods_skip_the_taint_check() -> None:
    raw = mkpod("s", nodeName="n1")
    raw["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    assert admit(Pod(raw), node(taints=NO_EXEC))[0]


def test_overhead_counts_in_the_fit() -> None:
    p = pod(requests={"cpu": "1"}, overhead={"cpu": "500m"})
    assert admit(p, node(cpu="1400m"))[1] == "OutOfcpu"


def _sim_with_node(cpu: str) -> Simulation:
    sim = Simulation(seed=1)
    raw = mknode("n1")
    raw["status"]["allocatable"]["cpu"] = cpu
    sim.load([raw])
    return sim


def test_pods_with_node_name_over_committing_a_node_are_refused_by_its_kubelet() -> None:
    """spec.nodeName skips the scheduler (and the conflict resolver, which guards bindings): the
    kubelet admits the first pod and refuses the second with OutOfcpu, Failed, as upstream."""
    sim = _sim_with_node("2")
    pods = [mkpod(n, nodeName="n1", containers=[{"name": "c", "image": "i",
                                                 "resources": {"requests": {"cpu": "1500m"}}}]) for n in ("a", "b")]
    sim.load(pods)
    sim.run()
    a, b = (sim.store.get("Pod", "default", n) for n in ("a", "b"))
    assert isinstance(a, Pod) and isinstance(b, Pod)
    assert a.phase == "Running"
    st = b.raw["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "OutOfcpu")
    assert st["message"] == ("Pod was rejected: Node didn't have enough resource: cpu, requested: 1500, used: 1500, "
                             "capacity: 2000")
    events = [e for e in sim.store.list("Event")[0] if e.raw["involvedObject"]["name"] == "b"]
    assert [(e.raw["type"], e.raw["reason"]) for e in events] == [("Warning", "OutOfcpu")]


def test_a_pod_bound_to_a_missing_node_waits_for_it() -> None:
    """No kubelet runs there: the pod stays Pending until the node appears (or pod GC, after
    its 40 s quarantine, deletes it as an orphan)."""
    sim = Simulation(seed=1)
    sim.load([mkpod("a", nodeName="n1"), mkpod("b", nodeName="n2")])
    sim.run(max_seconds=10)
    a = sim.store.get("Pod", "default", "a")
    assert isinstance(a, Pod) and a.phase == "Pending"
    sim.load([mknode("n1")])
    sim.run()
    a = sim.store.get("Pod", "default", "a")
    assert isinstance(a, Pod) and a.phase == "Running"
    assert not sim.store.list("Pod", "default")[0][1:]  # b: orphaned, collected


def test_the_chain_takes_extra_factories_in_one_line() -> None:
    """A node's chain is built from the factories (the hook the container manager plugs into)."""
    from ksched.kubelet.admission import ADMIT_HANDLER_FACTORIES
    from ksched.kubelet.lifecycle import NodeHandle, PodAdmitResult

    class Refuse:
        def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
            return PodAdmitResult(False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")

    def factory(h: NodeHandle) -> Refuse:
        return Refuse()

    sim = Simulation(seed=1)
    assert sim.kubelet is not None
    sim.kubelet.admit_handler_factories = [factory, *ADMIT_HANDLER_FACTORIES]
    sim.load([mknode("n1"), mkpod("a")])
    sim.run()
    a = sim.store.get("Pod", "default", "a")
    assert isinstance(a, Pod)
    assert (a.phase, a.raw["status"]["reason"], a.raw["status"]["message"]) == (
        "Failed", "TopologyAffinityError", "Pod was rejected: Resources cannot be allocated with Topology locality")
