"""The resource managers inside the simulated kubelet (ksched.kubelet.fake with
ksched.kubelet.cm.node_managers): device capacity and allocatable on the node's status, pods
refused as the kubelet's rejectPod does, what admitted pods were given written on them and freed
when they end; and in a whole simulation, a dead GPU drops allocatable and the next GPU pod goes
to another node."""

from __future__ import annotations

import json
from typing import Any

from api_objects import mkpod
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import VirtualClock
from ksched.kubelet.fake import FakeKubelet
from ksched.sim.simulation import Simulation

GPU = "nvidia.com/gpu"
LAYOUT = {"sockets": 2, "coresPerNUMANode": 4, "threadsPerCore": 2,
          "devices": [{"resource": GPU, "numaNode": 0, "ids": ["gpu0"]},
                      {"resource": GPU, "numaNode": 1, "ids": ["gpu1"]}]}
CONFIG = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}


def mknode(name: str, layout: dict[str, Any] = LAYOUT, config: dict[str, Any] | None = None,
           unhealthy: str = "") -> dict[str, Any]:
    ann = {"ksched.io/topology": json.dumps(layout), "ksched.io/kubelet-config": json.dumps(config or CONFIG)}
    if unhealthy:
        ann["ksched.io/unhealthy-devices"] = unhealthy
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": ann},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "allocatable": {"cpu": "15", "memory": "64Gi", "pods": "110"}}}


def gu(name: str, cpu: int, gpus: int = 0, run_seconds: float | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"cpu": str(cpu), "memory": "1Gi"}
    if gpus:
        res[GPU] = str(gpus)
    raw = mkpod(name, containers=[{"name": "app", "image": "i", "resources": {"requests": res, "limits": res}}])
    if run_seconds is not None:
        raw["metadata"]["annotations"] = {"ksched.io/run-seconds": str(run_seconds)}
        raw["spec"]["restartPolicy"] = "Never"
    return raw


class Kubelet:
    """One node and the agent, stepped as Simulation.run steps them."""

    def __init__(self) -> None:
        self.clock = VirtualClock(0.0)
        self.store = Store(self.clock)
        self.store.create(mknode("n1"))
        self.informers = InformerFactory(InProcessClient(self.store))
        self.kubelet = FakeKubelet(InProcessClient(self.store), self.informers, self.clock)
        self.settle()

    def settle(self) -> None:
        while True:
            self.informers.poll()
            if not self.kubelet.step():
                self.informers.poll()
                return

    def advance_to(self, t: float) -> None:
        self.settle()
        while (w := self.kubelet.next_wakeup()) is not None and w <= t:
            self.clock.advance_to(w)
            self.settle()
        self.clock.advance_to(t)
        self.settle()

    def run(self, raw: dict[str, Any]) -> Pod:
        self.store.create(raw)
        self.store.bind("default", raw["metadata"]["name"], "n1")
        self.settle()
        return self.pod(raw["metadata"]["name"])

    def pod(self, name: str) -> Pod:
        p = self.store.get("Pod", "default", name)
        assert isinstance(p, Pod)
        return p

    def node(self) -> Node:
        n = self.store.get("Node", "", "n1")
        assert isinstance(n, Node)
        return n


def test_device_plugins_report_capacity_and_allocatable_on_the_node() -> None:
    k = Kubelet()
    assert (k.node().capacity[GPU], k.node().allocatable[GPU]) == (2, 2)
    k.store.patch("Node", "", "n1", {"metadata": {"annotations": {"ksched.io/unhealthy-devices": "gpu1"}}})
    k.settle()
    assert (k.node().capacity[GPU], k.node().allocatable[GPU]) == (2, 1)
    assert k.node().allocatable["cpu"] == 15000  # the rest of the status is left alone
    k.store.patch("Node", "", "n1", {"metadata": {"annotations": {"ksched.io/unhealthy-devices": ""}}})
    k.settle()
    assert k.node().allocatable[GPU] == 2


def test_admitted_pods_record_their_cpus_and_devices_and_free_them_when_they_end() -> None:
    k = Kubelet()
    a = k.run(gu("a", 5, gpus=1, run_seconds=10))
    assert a.phase == "Running"
    assert json.loads(a.annotations["ksched.io/devices"]) == {"app": {GPU: ["gpu0"]}}
    # NUMA node 0 (CPU 0 reserved): two whole cores, then the sibling of the reserved CPU.
    assert json.loads(a.annotations["ksched.io/cpuset"]) == {"app": "1-2,8-10"}
    b = k.run(gu("b", 5, gpus=1))
    assert json.loads(b.annotations["ksched.io/cpuset"]) == {"app": "4-6,12-13"}
    # 5 CPUs are free, but no NUMA node has 4 of them.
    c = k.run(gu("c", 4))
    assert c.phase == "Failed" and c.raw["status"]["reason"] == "TopologyAffinityError"
    assert c.raw["status"]["message"] == "Pod was rejected: Resources cannot be allocated with Topology locality"
    k.advance_to(10)
    assert k.pod("a").phase == "Succeeded"
    d = k.run(gu("d", 2, gpus=1))
    assert d.phase == "Running" and json.loads(d.annotations["ksched.io/devices"]) == {"app": {GPU: ["gpu0"]}}
    e = k.run(gu("e", 2))
    assert e.phase == "Running" and "ksched.io/devices" not in e.annotations


def test_a_node_with_unusable_settings_refuses_pods_naming_the_field() -> None:
    k = Kubelet()
    k.store.patch("Node", "", "n1", {"metadata": {"annotations": {
        "ksched.io/kubelet-config": json.dumps({"topologyManagerPolicy": "strict"})}}})
    k.settle()
    p = k.run(gu("p", 1))
    assert p.phase == "Failed" and p.raw["status"]["reason"] == "UnexpectedAdmissionError"
    assert p.raw["status"]["message"] == ("Pod was rejected: node n1: annotation ksched.io/kubelet-config: "
                                          "topologyManagerPolicy: 'strict' is not one of none, best-effort, "
                                          "restricted, single-numa-node")


def one_gpu_node(name: str) -> dict[str, Any]:
    return mknode(name, {"coresPerNUMANode": 4, "devices": [{"resource": GPU, "numaNode": 0, "ids": [f"{name}-gpu"]}]},
                  {"cpuManagerPolicy": "none"})


def test_a_dead_gpu_drops_allocatable_and_the_next_gpu_pod_goes_elsewhere() -> None:
    for seed in range(3):
        sim = Simulation(seed=seed)
        sim.load([one_gpu_node("g1"), one_gpu_node("g2"), gu("first", 1, gpus=1)])
        sim.run(max_seconds=60)
        first = sim.store.get("Pod", "default", "first")
        assert isinstance(first, Pod) and first.phase == "Running"
        used, other = first.node_name, ({"g1", "g2"} - {first.node_name}).pop()
        # The free GPU dies: its node keeps the device in capacity but not in allocatable.
        sim.client.patch("Node", "", other, {"metadata": {"annotations": {
            "ksched.io/unhealthy-devices": f"{other}-gpu"}}})
        # The GPU in use dies too: its pod keeps running with it.
        sim.client.patch("Node", "", used, {"metadata": {"annotations": {"ksched.io/unhealthy-devices": f"{used}-gpu"}}})
        sim.run(max_seconds=60)
        nodes = {n: sim.store.get("Node", "", n) for n in ("g1", "g2")}
        assert all((n.capacity[GPU], n.allocatable[GPU]) == (1, 0) for n in nodes.values())  # type: ignore[union-attr]
        first = sim.store.get("Pod", "default", "first")
        assert first.phase == "Running" and json.loads(first.annotations["ksched.io/devices"]) == {  # type: ignore[union-attr]
            "app": {GPU: [f"{used}-gpu"]}}
        # The free GPU recovers; the next GPU pod can only go there.
        sim.client.patch("Node", "", other, {"metadata": {"annotations": {"ksched.io/unhealthy-devices": ""}}})
        sim.client.create(gu("next", 1, gpus=1))
        sim.run(max_seconds=60)
        nxt = sim.store.get("Pod", "default", "next")
        assert isinstance(nxt, Pod) and nxt.node_name == other and nxt.phase == "Running"
        # A dead GPU and no other: the pod waits, unschedulable.
        sim.client.create(gu("third", 1, gpus=1))
        sim.run(max_seconds=60)
        third = sim.store.get("Pod", "default", "third")
        assert isinstance(third, Pod) and not third.node_name


def test_simulate_example_reports_cpusets_devices_and_kubelet_rejections() -> None:
    """examples/numa/cluster.yaml through ``ksched simulate --format json``."""
    import contextlib
    import io
    from pathlib import Path

    from ksched.cli.main import main

    example = Path(__file__).resolve().parents[2] / "examples" / "numa" / "cluster.yaml"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", str(example), "--format", "json", "--quiet"]) == 0
    report = json.loads(out.getvalue())
    pods = {p["name"]: p for p in report["pods"]}
    assert pods["train"]["phase"] == "Running"
    assert pods["train"]["cpuset"] == {"trainer": "1-2,8-10"}  # NUMA node 0 with gpu0; CPU 0 reserved
    assert pods["train"]["devices"] == {"trainer": {GPU: ["gpu0"]}}
    assert (pods["wide"]["phase"], pods["wide"]["reason"], pods["wide"]["message"]) == (
        "Failed", "TopologyAffinityError", "Pod was rejected: Resources cannot be allocated with Topology locality")
    assert pods["web"]["phase"] == "Running" and "cpuset" not in pods["web"]
    assert report["nodes"][0]["allocatable"][GPU] == "2"
