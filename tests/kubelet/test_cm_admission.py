"""A node's resource managers at admission (ksched.kubelet.cm.container_manager and
.topologymanager.scope): the layout and kubelet settings a node declares, the topology
manager's policies and scopes rejecting with TopologyAffinityError, allocation failures as
UnexpectedAdmissionError, and what the kubelet records on the pod."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api_objects import mkpod
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.cm.container_manager import ManagerConfig, managers_for_node
from ksched.kubelet.cm.cpuset import parse
from ksched.kubelet.cm.topology import TopologyError, parse_layout
from ksched.kubelet.lifecycle import PodAdmitAttributes, PodAdmitResult

GPU = "nvidia.com/gpu"
# 2 NUMA nodes x 4 cores x 2 threads: node 0 = CPUs 0-3,8-11; node 1 = 4-7,12-15; a GPU on each.
LAYOUT = {"sockets": 2, "coresPerNUMANode": 4, "threadsPerCore": 2,
          "devices": [{"resource": GPU, "numaNode": 0, "ids": ["gpu0"]},
                      {"resource": GPU, "numaNode": 1, "ids": ["gpu1"]}]}


def node(config: dict[str, Any] | None = None, layout: dict[str, Any] | None = LAYOUT, name: str = "n1",
         cpu: tuple[str, str] = ("16", "15")) -> Node:
    ann: dict[str, str] = {}
    if layout is not None:
        ann["ksched.io/topology"] = json.dumps(layout)
    if config is not None:
        ann["ksched.io/kubelet-config"] = json.dumps(config)
    return Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": ann},
                 "status": {"capacity": {"cpu": cpu[0], "memory": "64Gi", "pods": "110"},
                            "allocatable": {"cpu": cpu[1], "memory": "64Gi", "pods": "110"}}})


def gu(name: str, *cpus: int, gpus: int = 0) -> Pod:
    ctrs = []
    for i, n in enumerate(cpus):
        res: dict[str, Any] = {"cpu": str(n), "memory": "1Gi"}
        if gpus:
            res[GPU] = str(gpus)
        ctrs.append({"name": f"c{i}", "image": "i", "resources": {"requests": res, "limits": res}})
    raw = mkpod(name, containers=ctrs)
    raw["metadata"]["uid"] = f"uid-{name}"
    return Pod(raw)


ADMITTED: dict[int, list[Pod]] = {}


def admit(m: Any, pod: Pod) -> PodAdmitResult:
    """Admission beside the pods this node admitted before (as the kubelet passes them)."""
    running = ADMITTED.setdefault(id(m), [])
    r: PodAdmitResult = m.admit(PodAdmitAttributes(pod, tuple(running)))
    if r.admit:
        running.append(pod)
    return r


def static(policy: str, scope: str = "container") -> dict[str, str]:
    return {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "topologyManagerScope": scope}


TOPOLOGY_ERROR = PodAdmitResult(False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")

# (policy, pod cpus per container, gpus per container, admitted)
POLICY_CASES = [
    ("none", (10,), 1, True),
    ("restricted", (16,), 0, False),  # more CPUs than the node has: no hint at all
    ("best-effort", (10,), 1, True),
    # The CPUs prefer both NUMA nodes, the GPU one: no preferred hint agrees, restricted refuses.
    ("restricted", (10,), 1, False),
    ("single-numa-node", (10,), 1, False),
    ("single-numa-node", (4,), 1, True),
    ("restricted", (4,), 1, True),
]


@pytest.mark.parametrize(("policy", "cpus", "gpus", "admitted"), POLICY_CASES)
def test_policies(policy: str, cpus: tuple[int, ...], gpus: int, admitted: bool) -> None:
    m = managers_for_node(node(static(policy)))
    r = admit(m, gu("p", *cpus, gpus=gpus))
    assert r == (PodAdmitResult() if admitted else TOPOLOGY_ERROR)
    if not admitted:
        assert m.cpu is not None and m.cpu.assigned("uid-p") == {} and m.devices.devices_of("uid-p") == {}


def test_single_numa_node_aligns_cpus_with_the_gpu() -> None:
    m = managers_for_node(node(static("single-numa-node")))
    assert admit(m, gu("a", 2, gpus=1)).admit
    ann = m.pod_annotations(gu("a", 2, gpus=1))
    cpus, devs = json.loads(ann["ksched.io/cpuset"]), json.loads(ann["ksched.io/devices"])
    # CPU 0 is reserved (16 - 15 = 1 CPU); NUMA node 0 still has a whole free core and gpu0.
    assert devs == {"c0": {GPU: ["gpu0"]}} and parse(cpus["c0"]) == parse("1,9")
    # The next GPU pod can only be aligned on NUMA node 1.
    assert admit(m, gu("b", 3, gpus=1)).admit
    b = m.pod_annotations(gu("b", 3, gpus=1))
    assert json.loads(b["ksched.io/devices"]) == {"c0": {GPU: ["gpu1"]}}
    assert parse(json.loads(b["ksched.io/cpuset"])["c0"]) <= parse("4-7,12-15")
    # No GPU left: the device manager has no hint, so the topology manager refuses first.
    assert admit(m, gu("c", 1, gpus=1)) == TOPOLOGY_ERROR


def test_pod_scope_merges_once_for_the_whole_pod() -> None:
    layout = {"sockets": 2, "coresPerNUMANode": 4}  # no SMT: NUMA node 0 = CPUs 0-3, node 1 = 4-7
    container_scope = managers_for_node(node(static("single-numa-node"), layout, cpu=("8", "7")))
    assert admit(container_scope, gu("p", 2, 3)).admit  # each container fits a NUMA node of its own
    pod_scope = managers_for_node(node(static("single-numa-node", "pod"), layout, cpu=("8", "7")))
    assert admit(pod_scope, gu("p", 2, 3)) == TOPOLOGY_ERROR  # 5 CPUs at once fit no NUMA node
    assert admit(pod_scope, gu("q", 2, 2)).admit
    assert pod_scope.cpu is not None
    assert set().union(*pod_scope.cpu.assigned("uid-q").values()) <= parse("4-7")  # CPU 0 reserved: node 1


def test_allocation_failure_is_unexpected_admission_error() -> None:
    m = managers_for_node(node({"cpuManagerPolicy": "static"}))
    assert admit(m, gu("big", 16)) == PodAdmitResult(
        False, "UnexpectedAdmissionError",
        "Allocate failed due to not enough cpus available to satisfy request: requested=16, available=15, "
        "which is unexpected")
    m = managers_for_node(node({"cpuManagerPolicy": "none"}))
    assert admit(m, gu("a", 1, gpus=2)).admit
    assert admit(m, gu("b", 1, gpus=1)) == PodAdmitResult(
        False, "UnexpectedAdmissionError",
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, "
        "Available: 0, which is unexpected")


def test_pods_no_longer_active_free_their_resources_at_the_next_admission() -> None:
    m = managers_for_node(node(static("none")))
    a = gu("a", 8, gpus=2)
    assert m.admit(PodAdmitAttributes(a)).admit
    b = gu("b", 8, gpus=2)
    assert not m.admit(PodAdmitAttributes(b, other_pods=(a,))).admit  # a still holds the GPUs and 8 CPUs
    assert m.admit(PodAdmitAttributes(b, other_pods=())).admit  # a ended: its CPUs and GPUs are free
    assert m.devices.devices_of("uid-a") == {} and m.cpu is not None and m.cpu.assigned("uid-a") == {}


def test_reserved_cpus_from_kubelet_config() -> None:
    assert ManagerConfig.from_kubelet_config(
        {"kubeReserved": {"cpu": "500m"}, "systemReserved": {"cpu": "1"}}, "x").reserved_cpu_milli == 1500
    m = managers_for_node(node({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"},
                                "systemReserved": {"cpu": "1"}}))
    assert m.cpu is not None and m.cpu.reserved == parse("0,8")  # ceil(1.5) = 2 CPUs: a whole core
    m = managers_for_node(node({"cpuManagerPolicy": "static", "reservedSystemCPUs": "7,15"}))
    assert m.cpu is not None and m.cpu.reserved == parse("7,15")
    only_allocatable = node({"cpuManagerPolicy": "static"})
    del only_allocatable.raw["status"]["capacity"]
    m = managers_for_node(Node(only_allocatable.raw))  # 16 CPUs in the layout, 15 allocatable
    assert m.cpu is not None and m.cpu.reserved == parse("0")


BAD_LAYOUTS = [
    ("[1, 2]", "must be an object"),
    ('{"sockets": 2}', "coresPerNUMANode is required"),
    ('{"coresPerNUMANode": 0}', "coresPerNUMANode: must be a whole number from 1, got 0"),
    ('{"coresPerNUMANode": 2, "cores": 4}', "unknown field 'cores'"),
    ('{"coresPerNUMANode": 2, "devices": [{"resource": "gpu", "ids": ["a"]}]}',
     "devices[0].resource: 'gpu' is not an extended resource name"),
    ('{"coresPerNUMANode": 2, "devices": [{"resource": "x.io/d", "numaNode": 3, "ids": ["a"]}]}',
     "devices[0].numaNode: 3 is not one of the node's NUMA nodes [0]"),
    ('{"coresPerNUMANode": 2, "devices": [{"resource": "x.io/d", "ids": ["a"]}, {"resource": "y.io/d", "ids": ["a"]}]}',
     "devices[1].ids: device 'a' is already declared in devices[0]"),
    ("{: nope", "not JSON or YAML"),
]


@pytest.mark.parametrize(("text", "message"), BAD_LAYOUTS, ids=[b[1] for b in BAD_LAYOUTS])
def test_bad_layouts_name_node_annotation_and_field(text: str, message: str) -> None:
    with pytest.raises(TopologyError) as e:
        parse_layout(text, "n7")
    assert str(e.value).startswith("node n7: annotation ksched.io/topology: ") and message in str(e.value)


BAD_CONFIGS = [
    ({"cpuManagerPolicy": "dynamic"}, "cpuManagerPolicy: 'dynamic' is not one of none, static"),
    ({"topologyManagerPolicy": "strict"}, "topologyManagerPolicy: 'strict' is not one of none, best-effort"),
    ({"topologyManagerScope": "node"}, "topologyManagerScope: 'node' is not one of container, pod"),
    ({"reservedSystemCPUs": "3-1"}, "reservedSystemCPUs: invalid cpuset"),
    ({"cpuManagerPolicy": "static"}, None),
]


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS, ids=[str(b[1]) for b in BAD_CONFIGS])
def test_bad_kubelet_configs(config: dict[str, Any], message: str | None) -> None:
    if message is None:  # static without a layout
        with pytest.raises(TopologyError, match="cpuManagerPolicy static needs the node's CPU layout"):
            managers_for_node(node(config, layout=None))
        with pytest.raises(TopologyError, match=r"requires systemreserved\.cpu"):
            managers_for_node(node(config, cpu=("16", "16")))
        return
    with pytest.raises(TopologyError) as e:
        managers_for_node(node(config))
    assert str(e.value).startswith("node n1: annotation ksched.io/kubelet-config: ") and message in str(e.value)
