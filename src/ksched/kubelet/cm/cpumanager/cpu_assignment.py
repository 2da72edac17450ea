"""Choosing which CPUs to hand out (``pkg/kubelet/cm/cpumanager/cpu_assignment.go``,
``takeByTopologyNUMAPacked`` with the default options: CPUSortingStrategyPacked, no uncore
cache alignment).

Best fit, from the largest unit down, until the request is met:

1. whole NUMA nodes and whole sockets (whichever level is higher in the hierarchy first: NUMA
   nodes when there are at least as many sockets as NUMA nodes), if the request needs at least
   a unit's worth;
2. whole cores, if it needs at least a core's worth;
3. single CPUs, filling partly used cores first.

Candidates at every level are sorted by how many free CPUs they hold, fewest first, then by id;
lower levels follow the order of the levels above them. Failure when fewer CPUs are free than
asked: "not enough cpus available to satisfy request: requested=%d, available=%d".

Divergences: the options ``distribute-cpus-across-numa``, ``distribute-cpus-across-cores``,
``align-by-socket`` and ``prefer-align-cpus-by-uncorecache`` are not implemented.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ksched.kubelet.cm.admission import AllocationError
from ksched.kubelet.cm.topology import CPUInfo, CPUTopology

__all__ = ["CPUAllocationError", "take_by_topology_numa_packed"]


class CPUAllocationError(AllocationError):
    """Not enough CPUs: the message is upstream's."""


class _Accumulator:
    def __init__(self, topo: CPUTopology, available: Iterable[int], n: int) -> None:
        self.topo = topo
        self.details: dict[int, CPUInfo] = {c: topo.details[c] for c in available if c in topo.details}
        self.needed = n
        self.result: set[int] = set()
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes

    # ---- what is free, per unit
    def _free(self, pick: Callable[[CPUInfo], int], ids: Iterable[int]) -> dict[int, set[int]]:
        s = set(ids)
        out: dict[int, set[int]] = {i: set() for i in s}
        for c, info in self.details.items():
            k = pick(info)
            if k in s:
                out[k].add(c)
        return out

    def _sorted(self, pick: Callable[[CPUInfo], int], ids: Iterable[int]) -> list[int]:
        free = self._free(pick, ids)
        return sorted(free, key=lambda i: (len(free[i]), i))

    def _numas(self) -> list[int]:
        if self.numa_first:
            return self._sorted(lambda i: i.numa_node, {i.numa_node for i in self.details.values()})
        out: list[int] = []
        for s in self._sockets():
            out += self._sorted(lambda i: i.numa_node, {i.numa_node for i in self.details.values() if i.socket == s})
        return out

    def _sockets(self) -> list[int]:
        if not self.numa_first:
            return self._sorted(lambda i: i.socket, {i.socket for i in self.details.values()})
        out: list[int] = []
        for n in self._numas():
            out += self._sorted(lambda i: i.socket, {i.socket for i in self.details.values() if i.numa_node == n})
        return out

    def _cores(self) -> list[int]:
        out: list[int] = []
        if self.numa_first:
            for s in self._sockets():
                out += self._sorted(lambda i: i.core, {i.core for i in self.details.values() if i.socket == s})
        else:
            for n in self._numas():
                out += self._sorted(lambda i: i.core, {i.core for i in self.details.values() if i.numa_node == n})
        return out

    def _cpus_of(self, pick: Callable[[CPUInfo], int], unit: int, details: dict[int, CPUInfo]) -> set[int]:
        return {c for c, i in details.items() if pick(i) == unit}

    # ---- taking
    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details)

    def take(self, cpus: set[int]) -> None:
        self.result |= cpus
        for c in cpus:
            self.details.pop(c, None)
        self.needed -= len(cpus)

    def _take_full(self, pick: Callable[[CPUInfo], int], order: list[int], size_of: Callable[[int], int]) -> None:
        for unit in order:
            free = self._cpus_of(pick, unit, self.details)
            whole = self._cpus_of(pick, unit, self.topo.details)
            if len(free) != size_of(unit):
                continue  # not a free unit (as of the start of this step: order was computed then)
            if not self.needs(len(whole)):
                continue
            self.take(whole)

    def take_full_numa_nodes(self) -> None:
        order = self._numas()
        free_at_start = {n for n in order if len(self._cpus_of(lambda i: i.numa_node, n, self.details))
                         == len(self.topo.cpus_in_numa_nodes(n))}
        self._take_full(lambda i: i.numa_node, [n for n in order if n in free_at_start],
                        lambda n: len(self.topo.cpus_in_numa_nodes(n)))

    def take_full_sockets(self) -> None:
        per = self.topo.cpus_per_socket()
        order = self._sockets()
        free_at_start = [s for s in order if len(self._cpus_of(lambda i: i.socket, s, self.details)) == per]
        self._take_full(lambda i: i.socket, free_at_start, lambda s: per)

    def take_full_cores(self) -> None:
        per = self.topo.cpus_per_core()
        order = self._cores()
        free_at_start = [c for c in order if len(self._cpus_of(lambda i: i.core, c, self.details)) == per]
        self._take_full(lambda i: i.core, free_at_start, lambda c: per)

    def take_remaining_cpus(self) -> None:
        order: list[int] = []
        for core in self._cores():
            order += sorted(self._cpus_of(lambda i: i.core, core, self.details))
        for c in order:
            self.take({c})
            if self.satisfied():
                return


def take_by_topology_numa_packed(topo: CPUTopology, available: Iterable[int], n: int) -> frozenset[int]:
    """``n`` CPUs out of ``available``, packed (see the module docstring). CPUAllocationError
    when there are not enough."""
    available = frozenset(available)
    acc = _Accumulator(topo, available, n)
    if acc.satisfied():
        return frozenset()
    if acc.failed():
        raise CPUAllocationError(
            f"not enough cpus available to satisfy request: requested={n}, available={len(available)}")
    if acc.numa_first:
        steps = [acc.take_full_numa_nodes, acc.take_full_sockets]
    else:
        steps = [acc.take_full_sockets, acc.take_full_numa_nodes]
    for step in (*steps, acc.take_full_cores, acc.take_remaining_cpus):
        step()
        if acc.satisfied():
            return frozenset(acc.result)
    raise CPUAllocationError("failed to allocate cpus")
