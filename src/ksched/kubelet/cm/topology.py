"""A node's hardware layout: CPUs grouped into cores, NUMA nodes and sockets
(``pkg/kubelet/cm/cpumanager/topology/topology.go``), and the devices attached to each NUMA
node, as a simulated node declares them.

A node declares its layout in the annotation ``ksched.io/topology`` (JSON, or YAML)::

    ksched.io/topology: |
      {"sockets": 2, "numaNodesPerSocket": 1, "coresPerNUMANode": 4, "threadsPerCore": 2,
       "devices": [{"resource": "nvidia.com/gpu", "numaNode": 0, "ids": ["gpu0", "gpu1"]},
                   {"resource": "nvidia.com/gpu", "numaNode": 1, "ids": ["gpu2", "gpu3"]}]}

* ``sockets`` (default 1), ``numaNodesPerSocket`` (default 1), ``coresPerNUMANode``
  (required), ``threadsPerCore`` (default 1): whole numbers from 1.
* CPUs are numbered as Linux numbers them on common x86 servers: the first thread of every
  core first (core by core, NUMA node by NUMA node, socket by socket), then the second thread
  of every core in the same order, and so on. With the layout above, NUMA node 0 holds CPUs
  0-3 and their siblings 8-11. A core's id is the id of its first CPU (upstream's unique core
  id); NUMA node ``n`` of socket ``s`` has id ``s * numaNodesPerSocket + n``.
* ``devices``: groups of devices a device plugin advertises, each with the extended resource
  name, the NUMA node the devices are attached to (``null`` or absent: no NUMA affinity, as a
  plugin reporting no topology) and the device IDs (unique on the node).

Divergences: NUMA nodes nest inside sockets (no layout where one NUMA node spans several
sockets); uncore caches are not modelled; every device group has at most one NUMA node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import yaml

from ksched.api.resources import is_extended_resource

__all__ = [
    "TOPOLOGY_ANNOTATION",
    "CPUInfo",
    "CPUTopology",
    "DeviceGroup",
    "NodeLayout",
    "TopologyError",
    "parse_layout",
]

TOPOLOGY_ANNOTATION = "ksched.io/topology"


class TopologyError(ValueError):
    """A node's declared layout or kubelet settings cannot be used; the message names the
    annotation and field."""


@dataclass(frozen=True, slots=True)
class CPUInfo:
    numa_node: int
    socket: int
    core: int


@dataclass(frozen=True)
class CPUTopology:
    """The CPUs of a machine and where each sits. ``details`` maps a CPU id to its NUMA node,
    socket and core."""

    details: dict[int, CPUInfo]

    @cached_property
    def cpus(self) -> frozenset[int]:
        return frozenset(self.details)

    @cached_property
    def num_cpus(self) -> int:
        return len(self.details)

    @cached_property
    def num_cores(self) -> int:
        return len({i.core for i in self.details.values()})

    @cached_property
    def num_sockets(self) -> int:
        return len({i.socket for i in self.details.values()})

    @cached_property
    def numa_nodes(self) -> tuple[int, ...]:
        return tuple(sorted({i.numa_node for i in self.details.values()}))

    @property
    def num_numa_nodes(self) -> int:
        return len(self.numa_nodes)

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @cached_property
    def units(self) -> dict[str, dict[int, frozenset[int]]]:
        """level ("numa", "socket", "core") -> unit id -> its CPUs."""
        out: dict[str, dict[int, set[int]]] = {"numa": {}, "socket": {}, "core": {}}
        for c, i in self.details.items():
            out["numa"].setdefault(i.numa_node, set()).add(c)
            out["socket"].setdefault(i.socket, set()).add(c)
            out["core"].setdefault(i.core, set()).add(c)
        return {level: {u: frozenset(cs) for u, cs in d.items()} for level, d in out.items()}

    def cpus_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        numa = self.units["numa"]
        return frozenset().union(*(numa.get(n, frozenset()) for n in ids))

    def numa_node_of(self, cpu: int) -> int:
        return self.details[cpu].numa_node


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    resource: str
    numa_node: int | None
    ids: tuple[str, ...]


@dataclass(frozen=True)
class NodeLayout:
    """What ``ksched.io/topology`` declares: the CPU topology and the device groups."""

    topology: CPUTopology
    devices: tuple[DeviceGroup, ...] = field(default=())

    def device_resources(self) -> list[str]:
        return sorted({g.resource for g in self.devices})


def build_topology(sockets: int, numa_per_socket: int, cores_per_numa: int, threads: int) -> CPUTopology:
    """The CPU numbering described in the module docstring."""
    total_cores = sockets * numa_per_socket * cores_per_numa
    details: dict[int, CPUInfo] = {}
    for t in range(threads):
        for core_index in range(total_cores):
            numa = core_index // cores_per_numa
            details[t * total_cores + core_index] = CPUInfo(numa, numa // numa_per_socket, core_index)
    return CPUTopology(details)


def _whole(d: dict[str, Any], key: str, default: int | None, node: str) -> int:
    v = d.get(key, default)
    if v is None:
        raise TopologyError(f"node {node}: annotation {TOPOLOGY_ANNOTATION}: {key} is required")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TopologyError(f"node {node}: annotation {TOPOLOGY_ANNOTATION}: {key}: must be a whole number "
                            f"from 1, got {v!r}")
    return v


MAX_CPUS = 4096


def parse_layout(text: str, node: str = "") -> NodeLayout:
    """Parse a ``ksched.io/topology`` value; TopologyError names the node and the field."""
    where = f"node {node}: annotation {TOPOLOGY_ANNOTATION}"
    try:
        d = json.loads(text)
    except ValueError:
        try:
            d = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise TopologyError(f"{where}: not JSON or YAML: {e}") from None
    if not isinstance(d, dict):
        raise TopologyError(f"{where}: must be an object with sockets, numaNodesPerSocket, coresPerNUMANode, "
                            "threadsPerCore, devices")
    known = {"sockets", "numaNodesPerSocket", "coresPerNUMANode", "threadsPerCore", "devices"}
    for k in d:
        if k not in known:
            raise TopologyError(f"{where}: unknown field {k!r} (known: {', '.join(sorted(known))})")
    sockets = _whole(d, "sockets", 1, node)
    nps = _whole(d, "numaNodesPerSocket", 1, node)
    cpn = _whole(d, "coresPerNUMANode", None, node)
    tpc = _whole(d, "threadsPerCore", 1, node)
    if sockets * nps * cpn * tpc > MAX_CPUS:
        raise TopologyError(f"{where}: {sockets * nps * cpn * tpc} CPUs is more than {MAX_CPUS}")
    topo = build_topology(sockets, nps, cpn, tpc)
    groups: list[DeviceGroup] = []
    seen: dict[str, int] = {}
    raw_devices = d.get("devices") or []
    if not isinstance(raw_devices, list):
        raise TopologyError(f"{where}: devices: must be a list")
    for i, g in enumerate(raw_devices):
        path = f"{where}: devices[{i}]"
        if not isinstance(g, dict):
            raise TopologyError(f"{path}: must be an object with resource, numaNode, ids")
        resource = g.get("resource")
        if not isinstance(resource, str) or not is_extended_resource(resource):
            raise TopologyError(f"{path}.resource: {resource!r} is not an extended resource name "
                                "(such as nvidia.com/gpu)")
        numa = g.get("numaNode")
        if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int) or numa not in topo.numa_nodes):
            raise TopologyError(f"{path}.numaNode: {numa!r} is not one of the node's NUMA nodes "
                                f"{list(topo.numa_nodes)}")
        ids = g.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, str) and x for x in ids):
            raise TopologyError(f"{path}.ids: must be a non-empty list of device IDs")
        for x in ids:
            if x in seen:
                raise TopologyError(f"{path}.ids: device {x!r} is already declared in devices[{seen[x]}]")
            seen[x] = i
        groups.append(DeviceGroup(resource, numa, tuple(ids)))
    return NodeLayout(topo, tuple(groups))
