"""The device plugin manager and the simulated plugins (ksched.kubelet.cm.devicemanager):
registration, capacity and allocatable from ListAndWatch (unhealthy devices leave
allocatable), allocation of concrete IDs (NUMA-aligned first, freed when the pod ends,
upstream's error), and the NUMA hints."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api_objects import mkpod
from ksched.api.pod import Pod
from ksched.kubelet.cm.devicemanager.manager import DeviceAllocationError, DeviceManager, RegistrationError
from ksched.kubelet.cm.devicemanager.plugin import Device, SimulatedDevicePlugin
from ksched.kubelet.cm.topology import DeviceGroup
from ksched.kubelet.cm.topologymanager import bitmask
from ksched.kubelet.cm.topologymanager.policy import TopologyHint

GPU = "nvidia.com/gpu"
GROUPS = [DeviceGroup(GPU, 0, ("gpu0", "gpu1")), DeviceGroup(GPU, 1, ("gpu2", "gpu3"))]


class Affinity:
    def __init__(self, mask: int | None = None) -> None:
        self.mask = mask

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return TopologyHint(self.mask, True)


def gpu_pod(name: str, n: int, containers: int = 1) -> Pod:
    ctrs: list[dict[str, Any]] = [{"name": f"c{i}", "image": "i", "resources": {"limits": {GPU: str(n)}}}
                                  for i in range(containers)]
    raw = mkpod(name, containers=ctrs)
    raw["metadata"]["uid"] = f"uid-{name}"
    return Pod(raw)


def manager(groups: list[DeviceGroup] = GROUPS, unhealthy: frozenset[str] = frozenset(),
            mask: int | None = None) -> tuple[DeviceManager, SimulatedDevicePlugin]:
    m = DeviceManager([0, 1], Affinity(mask))
    plugin = SimulatedDevicePlugin(GPU, groups, unhealthy)
    m.register(plugin)
    return m, plugin


def test_capacity_counts_every_device_and_allocatable_the_healthy_ones() -> None:
    m, plugin = manager(unhealthy=frozenset({"gpu1"}))
    assert m.get_capacity() == {GPU: (4, 3)}
    assert plugin.set_unhealthy(frozenset({"gpu1", "gpu2"}))
    m.update_devices(GPU, plugin.list_and_watch())
    assert m.get_capacity() == {GPU: (4, 2)}
    assert not plugin.set_unhealthy(frozenset({"gpu1", "gpu2", "other"}))  # not one of its devices
    plugin.set_unhealthy(frozenset())
    m.update_devices(GPU, plugin.list_and_watch())
    assert m.get_capacity() == {GPU: (4, 4)}


def test_registration_errors_are_upstreams() -> None:
    m = DeviceManager([0])
    bad = SimulatedDevicePlugin(GPU, GROUPS)
    bad.version = "v1alpha"
    with pytest.raises(RegistrationError, match=re.escape("requested API version 'v1alpha' is not supported by "
                                                          "kubelet. Supported version is 'v1beta1'")):
        m.register(bad)
    bad = SimulatedDevicePlugin("cpu", [])
    with pytest.raises(RegistrationError, match="the ResourceName 'cpu' is invalid"):
        m.register(bad)


def test_allocation_gives_ids_per_container_and_frees_them_when_the_pod_ends() -> None:
    m, _ = manager()
    a = gpu_pod("a", 1, containers=2)
    for c in a.containers:
        m.allocate(a, c)
    assert m.devices_of(a.uid) == {"c0": {GPU: ["gpu0"]}, "c1": {GPU: ["gpu1"]}}
    b = gpu_pod("b", 2)
    m.allocate(b, b.containers[0])
    assert m.devices_of(b.uid) == {"c0": {GPU: ["gpu2", "gpu3"]}}
    c = gpu_pod("c", 1)
    with pytest.raises(DeviceAllocationError, match=r"^requested number of devices unavailable for nvidia.com/gpu. "
                                                     r"Requested: 1, Available: 0$"):
        m.allocate(c, c.containers[0])
    m.remove_pod(a.uid)
    m.allocate(c, c.containers[0])
    assert m.devices_of(c.uid) == {"c0": {GPU: ["gpu0"]}}
    m.update_allocated_devices([c.uid])  # b is no longer active: its devices are freed lazily
    assert m.devices_of(b.uid) == {} and m.allocated[GPU] == {"gpu0"}


def test_unhealthy_devices_are_not_allocated_but_stay_with_their_pod() -> None:
    m, plugin = manager()
    a = gpu_pod("a", 1)
    m.allocate(a, a.containers[0])
    plugin.set_unhealthy(frozenset({"gpu0", "gpu1"}))
    m.update_devices(GPU, plugin.list_and_watch())
    assert m.devices_of(a.uid) == {"c0": {GPU: ["gpu0"]}}
    b = gpu_pod("b", 1)
    m.allocate(b, b.containers[0])
    assert m.devices_of(b.uid) == {"c0": {GPU: ["gpu2"]}}


def test_allocation_follows_the_numa_affinity() -> None:
    m, _ = manager(mask=bitmask.mask_of([1]))
    a = gpu_pod("a", 1)
    m.allocate(a, a.containers[0])
    assert m.devices_of(a.uid) == {"c0": {GPU: ["gpu2"]}}
    b = gpu_pod("b", 3)  # the one left on node 1, then the others
    m.allocate(b, b.containers[0])
    assert m.devices_of(b.uid) == {"c0": {GPU: ["gpu0", "gpu1", "gpu3"]}}


def H(nodes: tuple[int, ...], pref: bool) -> TopologyHint:
    return TopologyHint(bitmask.mask_of(nodes), pref)


def test_hints() -> None:
    m, plugin = manager()
    assert m.get_topology_hints(gpu_pod("a", 1), gpu_pod("a", 1).containers[0]) == {
        GPU: [H((0,), True), H((1,), True), H((0, 1), False)]}
    assert m.get_topology_hints(gpu_pod("a", 3), gpu_pod("a", 3).containers[0]) == {GPU: [H((0, 1), True)]}
    plugin.set_unhealthy(frozenset({"gpu0"}))
    m.update_devices(GPU, plugin.list_and_watch())
    # Two devices fit one node on an idle machine, but only node 1 has two healthy ones.
    assert m.get_topology_hints(gpu_pod("a", 2), gpu_pod("a", 2).containers[0]) == {
        GPU: [H((1,), True), H((0, 1), False)]}
    assert m.get_topology_hints(gpu_pod("a", 4), gpu_pod("a", 4).containers[0]) == {GPU: []}
    plain = Pod(mkpod("p"))
    assert m.get_topology_hints(plain, plain.containers[0]) is None
    no_topo, _ = manager([DeviceGroup(GPU, None, ("x", "y"))])
    assert no_topo.get_topology_hints(gpu_pod("a", 1), gpu_pod("a", 1).containers[0]) == {GPU: None}


def dev(i: str, numa: int | None = None) -> Device:
    return Device(i, "Healthy", numa)


def hints_of(expected: list[tuple[tuple[int, ...], bool]] | None) -> list[TopologyHint] | None:
    return None if expected is None else [H(m, p) for m, p in expected]


# upstream's devicemanager TestGetTopologyHints:
# (name, request, devices per resource, already allocated {container: {resource: ids}}, expected hints)
HINT_CASES: list[tuple[str, dict[str, int], dict[str, list[Device]], dict[str, dict[str, list[str]]],
                       dict[str, list[tuple[tuple[int, ...], bool]] | None]]] = [
    ("Single Request, no alignment", {"testdevice": 1}, {"testdevice": [dev("Dev1"), dev("Dev2")]}, {},
     {"testdevice": None}),
    ("Single Request, only one with alignment", {"testdevice": 1}, {"testdevice": [dev("Dev1"), dev("Dev2", 1)]}, {},
     {"testdevice": [((1,), True), ((0, 1), False)]}),
    ("Single Request, one device per socket", {"testdevice": 1},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 1)]}, {},
     {"testdevice": [((0,), True), ((1,), True), ((0, 1), False)]}),
    ("Request for 2, one device per socket", {"testdevice": 2}, {"testdevice": [dev("Dev1", 0), dev("Dev2", 1)]}, {},
     {"testdevice": [((0, 1), True)]}),
    ("Request for 2, 2 devices per socket", {"testdevice": 2},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 1), dev("Dev3", 0), dev("Dev4", 1)]}, {},
     {"testdevice": [((0,), True), ((1,), True), ((0, 1), False)]}),
    ("Request for 2, optimal on 1 NUMA node, forced cross-NUMA", {"testdevice": 2},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 1), dev("Dev3", 0), dev("Dev4", 1)]},
     {"fakeOtherContainer": {"testdevice": ["Dev1", "Dev2"]}}, {"testdevice": [((0, 1), False)]}),
    ("2 device types, mixed configuration", {"testdevice1": 2, "testdevice2": 1},
     {"testdevice1": [dev("Dev1", 0), dev("Dev2", 1), dev("Dev3", 0), dev("Dev4", 1)],
      "testdevice2": [dev("Dev1", 0)]}, {},
     {"testdevice1": [((0,), True), ((1,), True), ((0, 1), False)], "testdevice2": [((0,), True), ((0, 1), False)]}),
    ("Single device type, more requested than available", {"testdevice": 6},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 0), dev("Dev3", 1), dev("Dev4", 1)]}, {}, {"testdevice": []}),
    ("Single device type, all already allocated to container", {"testdevice": 2},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 0)]}, {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}},
     {"testdevice": [((0,), True), ((0, 1), False)]}),
    ("Single device type, less already allocated to container than requested", {"testdevice": 4},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 0), dev("Dev3", 1), dev("Dev4", 1)]},
     {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}, {"testdevice": []}),
    ("Single device type, more already allocated to container than requested", {"testdevice": 2},
     {"testdevice": [dev("Dev1", 0), dev("Dev2", 0), dev("Dev3", 1), dev("Dev4", 1)]},
     {"fakeContainer": {"testdevice": ["Dev1", "Dev2", "Dev3", "Dev4"]}}, {"testdevice": []}),
]


def request_pod(request: dict[str, int], container: str = "fakeContainer") -> Pod:
    limits = {r: str(n) for r, n in request.items()}
    raw = mkpod("fakePod", containers=[{"name": container, "image": "i", "resources": {"limits": limits}}])
    raw["metadata"]["uid"] = "fakePod"
    return Pod(raw)


@pytest.mark.parametrize(("desc", "request_", "devices", "allocated", "expected"), HINT_CASES,
                         ids=[c[0] for c in HINT_CASES])
def test_get_topology_hints(desc: str, request_: dict[str, int], devices: dict[str, list[Device]],
                            allocated: dict[str, dict[str, list[str]]],
                            expected: dict[str, list[tuple[tuple[int, ...], bool]] | None]) -> None:
    m = DeviceManager([0, 1])
    for r, devs in devices.items():
        m.update_devices(r, devs)
    for container, res in allocated.items():
        for r, ids in res.items():
            m.pod_devices.setdefault("fakePod", {}).setdefault(container, {})[r] = frozenset(ids)
            m.allocated[r] = set(ids)
    p = request_pod(request_)
    assert m.get_topology_hints(p, p.containers[0]) == {r: hints_of(h) for r, h in expected.items()}


# upstream's TestTopologyAlignedAllocation: (name, request, devices, NUMA nodes of the hint, devices per NUMA node)
ALIGNED: list[tuple[str, int, list[Device], tuple[int, ...], dict[int, int]]] = [
    ("Single Request, no alignment", 1, [dev("Dev1"), dev("Dev2")], (0, 1), {}),
    ("Request for 1, partial alignment", 1, [dev("Dev1"), dev("Dev2", 1)], (1,), {1: 1}),
    ("Single Request, socket 0", 1, [dev("Dev1", 0), dev("Dev2", 1)], (0,), {0: 1}),
    ("Single Request, socket 1", 1, [dev("Dev1", 0), dev("Dev2", 1)], (1,), {1: 1}),
    ("Request for 2, socket 0", 2, [dev("Dev1", 0), dev("Dev2", 1), dev("Dev3", 0), dev("Dev4", 1)], (0,), {0: 2}),
    ("Request for 2, socket 1", 2, [dev("Dev1", 0), dev("Dev2", 1), dev("Dev3", 0), dev("Dev4", 1)], (1,), {1: 2}),
    ("Request for 4, unsatisfiable, prefer socket 0", 4,
     [dev(f"Dev{i}", (i - 1) % 2) for i in range(1, 7)], (0,), {0: 3, 1: 1}),
    ("Request for 4, unsatisfiable, prefer socket 1", 4,
     [dev(f"Dev{i}", (i - 1) % 2) for i in range(1, 7)], (1,), {0: 1, 1: 3}),
    ("Request for 4, multisocket", 4, [dev(f"Dev{i}", (i - 1) % 4) for i in range(1, 9)], (1, 3), {1: 2, 3: 2}),
]


@pytest.mark.parametrize(("desc", "n", "devices", "hint", "expected"), ALIGNED, ids=[c[0] for c in ALIGNED])
def test_topology_aligned_allocation(desc: str, n: int, devices: list[Device], hint: tuple[int, ...],
                                     expected: dict[int, int]) -> None:
    m = DeviceManager([0, 1, 2, 3], Affinity(bitmask.mask_of(hint)))
    m.update_devices("resource", devices)
    p = request_pod({"resource": n})
    m.allocate(p, p.containers[0])
    got = m.devices_of(p.uid)["fakeContainer"]["resource"]
    numa = {d.id: d.numa_node for d in devices}
    alignment: dict[int, int] = {}
    for d in got:
        if numa[d] is not None:
            alignment[numa[d]] = alignment.get(numa[d], 0) + 1  # type: ignore[index]
    assert len(got) == n and alignment == expected
