"""The CPU manager's static policy (ksched.kubelet.cm.cpumanager.policy_static): which
containers get exclusive CPUs, which CPUs (upstream's TestStaticPolicyAdd cases), reserved
CPUs, init container CPUs reused, release, and the NUMA hints it gives the topology manager."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mkpod
from cm_topologies import TOPO_DUAL_SOCKET_HT, TOPO_SINGLE_SOCKET_HT
from ksched.api.pod import Pod
from ksched.kubelet.cm.cpumanager.cpu_assignment import CPUAllocationError
from ksched.kubelet.cm.cpumanager.policy_static import StaticPolicy, guaranteed_cpus, pod_guaranteed_cpus
from ksched.kubelet.cm.cpuset import parse
from ksched.kubelet.cm.topology import CPUInfo, CPUTopology, TopologyError, build_topology
from ksched.kubelet.cm.topologymanager import bitmask
from ksched.kubelet.cm.topologymanager.policy import TopologyHint


class Affinity:
    def __init__(self, hints: dict[str, TopologyHint] | None = None) -> None:
        self.hints = hints or {}

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return self.hints.get(container, TopologyHint())


def ctr(name: str, cpu_req: str, cpu_lim: str, mem: str = "1G") -> dict[str, Any]:
    return {"name": name, "image": "i", "resources": {"requests": {"cpu": cpu_req, "memory": mem},
                                                       "limits": {"cpu": cpu_lim, "memory": mem}}}


def pod(name: str, *containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> Pod:
    raw = mkpod(name, containers=list(containers), initContainers=list(init))
    raw["metadata"]["uid"] = f"uid-{name}"
    return Pod(raw)


# (description, topology, reserved count, assignments {name: cpus}, default pool, cpu request/limit, expected)
ADD = [
    ("GuPodSingleCore, SingleSocketHT, ExpectError", TOPO_SINGLE_SOCKET_HT, 1, {}, "0-7", ("8000m", "8000m"),
     "not enough cpus available to satisfy request: requested=8, available=7"),
    ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", TOPO_SINGLE_SOCKET_HT, 1, {}, "0-7", ("1000m", "1000m"),
     "4"),
    ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", TOPO_SINGLE_SOCKET_HT, 1, {"c100": "2,3,6,7"},
     "0,1,4,5", ("2000m", "2000m"), "1,5"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", TOPO_DUAL_SOCKET_HT, 1, {"c100": "2"},
     "0,1,3-11", ("6000m", "6000m"), "1,3,5,7,9,11"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", TOPO_DUAL_SOCKET_HT, 1, {"c100": "1,5"},
     "0,2-4,6-11", ("6000m", "6000m"), "2,3,4,8,9,10"),
    ("NonGuPod, SingleSocketHT, NoAlloc", TOPO_SINGLE_SOCKET_HT, 1, {"c100": "1-6"}, "0,7", ("1000m", "2000m"), ""),
    ("GuPodNonIntegerCore, SingleSocketHT, NoAlloc", TOPO_SINGLE_SOCKET_HT, 1, {"c100": "1-6"}, "0,7",
     ("977m", "977m"), ""),
    ("GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", TOPO_SINGLE_SOCKET_HT, 1, {"c100": "1-6"}, "0,7",
     ("2000m", "2000m"), "not enough cpus available to satisfy request: requested=2, available=1"),
]


@pytest.mark.parametrize(("desc", "topo", "reserved", "assigned", "default", "cpu", "expected"), ADD,
                         ids=[c[0] for c in ADD])
def test_static_policy_add(desc: str, topo: Any, reserved: int, assigned: dict[str, str], default: str,
                           cpu: tuple[str, str], expected: str) -> None:
    policy = StaticPolicy(topo, reserved, Affinity())
    assert policy.reserved == frozenset({0})
    for name, cpus in assigned.items():
        policy.assignments.setdefault("other", {})[name] = parse(cpus)
    policy.default = set(parse(default))
    p = pod("p", ctr("c", *cpu))
    if expected.startswith("not enough"):
        with pytest.raises(CPUAllocationError) as e:
            policy.allocate(p, p.containers[0])
        assert str(e.value) == expected
        assert policy.default == set(parse(default))
        return
    policy.allocate(p, p.containers[0])
    if not expected:
        assert policy.assigned(p.uid) == {} and policy.default == set(parse(default))
        return
    assert policy.assigned(p.uid) == {"c": parse(expected)}
    assert policy.default == set(parse(default)) - parse(expected)


def test_reserved_cpus_are_never_handed_out_and_pods_release_their_cpus() -> None:
    topo = build_topology(1, 1, 4, 2)  # CPUs 0-3, siblings 4-7
    policy = StaticPolicy(topo, 2, Affinity())
    assert policy.reserved == parse("0,4")  # a whole core, the lowest
    a, b = pod("a", ctr("c", "4", "4")), pod("b", ctr("c", "2", "2"))
    policy.allocate(a, a.containers[0])
    policy.allocate(b, b.containers[0])
    assert policy.assigned(a.uid)["c"] | policy.assigned(b.uid)["c"] == parse("1-3,5-7")
    c = pod("c", ctr("c", "1", "1"))
    with pytest.raises(CPUAllocationError):
        policy.allocate(c, c.containers[0])
    policy.remove_pod(a.uid)
    assert policy.default == set(parse("0,4")) | set(policy.reserved) | set(
        parse("1-3,5-7") - policy.assigned(b.uid)["c"])
    policy.allocate(c, c.containers[0])
    assert len(policy.assigned(c.uid)["c"]) == 1 and not policy.assigned(c.uid)["c"] & policy.reserved


def test_explicit_reserved_system_cpus_and_zero_reserved_is_upstreams_error() -> None:
    topo = build_topology(1, 1, 4, 2)
    assert StaticPolicy(topo, 0, Affinity(), reserved_cpus=parse("3,7")).reserved == parse("3,7")
    with pytest.raises(TopologyError, match=r"\[cpumanager\] the static policy requires systemreserved.cpu \+ "
                                            "kubereserved.cpu to be greater than zero"):
        StaticPolicy(topo, 0, Affinity())
    with pytest.raises(TopologyError, match="not in the node's topology"):
        StaticPolicy(topo, 0, Affinity(), reserved_cpus=parse("9"))


def test_numa_affinity_takes_aligned_cpus_first() -> None:
    policy = StaticPolicy(TOPO_DUAL_SOCKET_HT, 1, Affinity({"c": TopologyHint(bitmask.mask_of([1]), True)}))
    p = pod("p", ctr("c", "2", "2"))
    policy.allocate(p, p.containers[0])
    assert policy.assigned(p.uid)["c"] == parse("1,7")  # a whole core of NUMA node 1


def test_init_container_cpus_are_reused_by_app_containers() -> None:
    topo = build_topology(1, 1, 4, 2)
    policy = StaticPolicy(topo, 1, Affinity())
    p = pod("p", ctr("app", "2", "2"), init=(ctr("init", "2", "2"),))
    policy.allocate(p, p.init_containers[0])
    policy.allocate(p, p.containers[0])
    assigned = policy.assigned(p.uid)
    assert assigned["app"] == assigned["init"]
    assert len(policy.available()) == topo.num_cpus - 1 - 2
    policy.remove_pod(p.uid)
    assert policy.default == set(topo.cpus)


def test_which_containers_are_exclusive() -> None:
    gu = pod("g", ctr("a", "2", "2"), ctr("b", "1500m", "1500m"))
    assert [guaranteed_cpus(gu, c) for c in gu.containers] == [2, 0]
    bu = pod("b", ctr("a", "2", "3"))
    assert guaranteed_cpus(bu, bu.containers[0]) == 0
    side = {**ctr("side", "1", "1"), "restartPolicy": "Always"}
    p = pod("p", ctr("a", "2", "2"), init=(ctr("i", "4", "4"), side))
    assert pod_guaranteed_cpus(p) == 4  # max(init peak 4, app 2 + sidecar 1)


# upstream's returnMachineInfo: NUMA node 0 = cores (0,6), (1,7), (2,8); node 1 = (3,9), (4,10), (5,11).
HINT_MACHINE = CPUTopology({c: CPUInfo(numa, numa, core) for numa, cores in
                            ((0, ((0, 6), (1, 7), (2, 8))), (1, ((3, 9), (4, 10), (5, 11))))
                            for core, pair in enumerate(cores) for c in pair})
N0, N1, N01 = (0,), (1,), (0, 1)

# upstream's returnTestCases (TestGetTopologyHints): (name, request, assignments, default pool, hints)
HINTS: list[tuple[str, int, str, str, list[tuple[tuple[int, ...], bool]] | None]] = [
    ("Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 2, "", "2-11",
     [(N0, True), (N1, True), (N01, False)]),
    ("Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 5, "", "2-11", [(N1, True), (N01, False)]),
    ("Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 7, "", "2-11", [(N01, True)]),
    ("Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 11, "", "2-11", []),
    ("Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1", 2, "", "0,3", [(N01, False)]),
    ("Request more CPUs than available", 5, "", "0-3", []),
    ("Regenerate Single-Node NUMA Hints if already allocated 1/2", 2, "0,6", "", [(N0, True), (N01, False)]),
    ("Regenerate Single-Node NUMA Hints if already allocated 2/2", 2, "3,9", "", [(N1, True), (N01, False)]),
    ("Regenerate Cross-NUMA Hints if already allocated", 11, "0-10", "", [(N01, True)]),
    ("Requested less than already allocated", 2, "0,6,3,9", "", []),
    ("Requested more than already allocated", 11, "0,6,3,9", "", []),
]


@pytest.mark.parametrize(("desc", "n", "assigned", "default", "expected"), HINTS, ids=[h[0] for h in HINTS])
def test_cpu_topology_hints(desc: str, n: int, assigned: str, default: str,
                            expected: list[tuple[tuple[int, ...], bool]]) -> None:
    policy = StaticPolicy(HINT_MACHINE, 0, Affinity(), reserved_cpus=())
    policy.default = set(parse(default))
    p = pod("fake", ctr("c", str(n), str(n)))
    if assigned:
        policy.assignments[p.uid] = {"c": parse(assigned)}
    want = [TopologyHint(bitmask.mask_of(m), pref) for m, pref in expected]
    assert policy.get_topology_hints(p, p.containers[0]) == {"cpu": want}
    if assigned:
        policy.assignments[p.uid] = {"c": parse(assigned)}
    assert policy.get_pod_topology_hints(p) == {"cpu": want}


def opts(*cpus: int | tuple[int, str]) -> tuple[dict[str, Any], ...]:
    out = []
    for i, o in enumerate(cpus):
        n, restart = (o, "") if isinstance(o, int) else o
        c = ctr(f"c{i}-{n}", str(n), str(n))
        if restart:
            c["restartPolicy"] = restart
        out.append(c)
    return tuple(out)


A = "Always"
# upstream's TestPodGuaranteedCPUs: (name, init containers, app containers, CPUs)
POD_CPUS = [
    ("TestCase01: if requestedCPU == 0, Pod is not Guaranteed Qos", opts(0), opts(0), 0),
    ("TestCase02: if requestedCPU == 0, Pod is not Guaranteed Qos", opts(0), opts(2), 0),
    ("TestCase03: if requestedCPU == 0, Pod is not Guaranteed Qos", opts(2), opts(0), 0),
    ("TestCase04: Guaranteed Pod requests 2 CPUs", opts(2), opts(2), 2),
    ("TestCase05: Guaranteed Pod requests 5 CPUs", opts(5), opts(5), 5),
    ("TestCase06: The number of CPUs requested By app is bigger than the number of CPUs requested by init",
     opts(2), opts(5), 5),
    ("TestCase07: The number of CPUs requested By init is bigger than the number of CPUs requested by app",
     opts(5), opts(2), 5),
    ("TestCase08: Sum of CPUs requested by multiple containers", opts(2, 4), opts(2, 4), 6),
    ("TestCase09: restartable init container + regular container", opts((1, A)), opts(1), 2),
    ("TestCase10: multiple restartable init containers", opts(5, (1, A), (2, A), (3, A)), opts(1), 7),
    ("TestCase11: multiple restartable and regular init containers", opts(5, (1, A), (2, A), 5, (3, A)),
     opts(1), 8),
    ("TestCase12: restartable init, regular init and regular container", opts((10, A), 200), opts(100), 210),
]


@pytest.mark.parametrize(("desc", "init", "app", "expected"), POD_CPUS, ids=[c[0] for c in POD_CPUS])
def test_pod_guaranteed_cpus(desc: str, init: tuple[dict[str, Any], ...], app: tuple[dict[str, Any], ...],
                             expected: int) -> None:
    assert pod_guaranteed_cpus(pod("p", *app, init=init)) == expected


def test_hints_of_containers_without_exclusive_cpus_and_of_allocated_ones() -> None:
    policy = StaticPolicy(TOPO_DUAL_SOCKET_HT, 1, Affinity())
    bu = pod("b", ctr("a", "2", "3"))
    assert policy.get_topology_hints(bu, bu.containers[0]) is None
    gu = pod("g", ctr("a", "2", "2"))
    policy.allocate(gu, gu.containers[0])
    # Regenerated from the CPUs it holds (on NUMA node 0): masks holding them.
    assert policy.get_topology_hints(gu, gu.containers[0]) == {"cpu": [
        TopologyHint(bitmask.mask_of([0]), True), TopologyHint(bitmask.mask_of([0, 1]), False)]}


# upstream's TestStaticPolicyAddWithResvList: (name, reserved, assignments, default pool, request, expected)
ADD_WITH_RESV_LIST = [
    ("GuPodSingleCore, SingleSocketHT, ExpectError", "0", {}, "0-7", "8000m",
     "not enough cpus available to satisfy request: requested=8, available=7"),
    ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", "0,1", {}, "0-7", "1000m", "4"),
    ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", "0,1", {"fakeContainer100": "2,3,6,7"}, "0,1,4,5",
     "2000m", "4,5"),
]


@pytest.mark.parametrize(("desc", "reserved", "assigned", "default", "cpu", "expected"), ADD_WITH_RESV_LIST,
                         ids=[c[0] for c in ADD_WITH_RESV_LIST])
def test_static_policy_add_with_reserved_list(desc: str, reserved: str, assigned: dict[str, str], default: str,
                                              cpu: str, expected: str) -> None:
    policy = StaticPolicy(TOPO_SINGLE_SOCKET_HT, 0, Affinity(), reserved_cpus=parse(reserved))
    for name, cpus in assigned.items():
        policy.assignments.setdefault("other", {})[name] = parse(cpus)
    policy.default = set(parse(default))
    p = pod("p", ctr("c", cpu, cpu))
    if expected.startswith("not enough"):
        with pytest.raises(CPUAllocationError, match=f"^{expected}$"):
            policy.allocate(p, p.containers[0])
        assert policy.assigned(p.uid) == {}
        return
    policy.allocate(p, p.containers[0])
    got = policy.assigned(p.uid)["c"]
    assert got == parse(expected) and not got & policy.default
