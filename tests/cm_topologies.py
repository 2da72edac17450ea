"""Upstream's test machines (``pkg/kubelet/cm/cpumanager/policy_test.go``)."""

from __future__ import annotations

from ksched.kubelet.cm.topology import CPUInfo, CPUTopology


def _topo(rows: dict[int, tuple[int, int, int]]) -> CPUTopology:
    """cpu -> (core, socket, numa), in upstream's field order."""
    return CPUTopology({c: CPUInfo(numa, socket, core) for c, (core, socket, numa) in rows.items()})


TOPO_SINGLE_SOCKET_HT = _topo({c: (c % 4, 0, 0) for c in range(8)})
TOPO_DUAL_SOCKET_HT = _topo({c: (c % 6, c % 2, c % 2) for c in range(12)})
TOPO_DUAL_SOCKET_NO_HT = _topo({c: (c, c // 4, c // 4) for c in range(8)})
# 80 CPUs: 2 sockets, 4 NUMA nodes, 40 cores, 2 threads; CPU 40+i is the sibling of CPU i.
TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT = _topo({c: (c % 40, (c % 40) // 20, (c % 40) // 10) for c in range(80)})


