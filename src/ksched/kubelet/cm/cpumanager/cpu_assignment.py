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


_LEVEL = {"numa": lambda i: i.numa_node, "socket": lambda i: i.socket, "core": lambda i: i.core}


class _Accumulator:
    def __init__(self, topo: CPUTopology, available: Iterable[int], n: int) -> None:
        self.topo = topo
        self.units = topo.units
        self.free: set[int] = set(available) & topo.cpus
        self.needed = n
        self.result: set[int] = set()
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes

    # ---- what is free, per unit
    def _present(self, level: str, within: frozenset[int] | None = None) -> set[int]:
        """Units of ``level`` with a free CPU (inside ``within`` when given)."""
        pick: Callable[[CPUInfo], int] = _LEVEL[level]
        details = self.topo.details
        cpus = self.free if within is None else self.free & within
        return {pick(details[c]) for c in cpus}

    def _sorted(self, level: str, ids: Iterable[int]) -> list[int]:
        members = self.units[level]
        free = self.free
        return sorted(ids, key=lambda u: (len(members[u] & free), u))

    def _numas(self) -> list[int]:
        if self.numa_first:
            return self._sorted("numa", self._present("numa"))
        out: list[int] = []
        for s in self._sockets():
            out += self._sorted("numa", self._present("numa", self.units["socket"][s]))
        return out

    def _sockets(self) -> list[int]:
        if not self.numa_first:
            return self._sorted("socket", self._present("socket"))
        out: list[int] = []
        for n in self._numas():
            out += self._sorted("socket", self._present("socket", self.units["numa"][n]))
        return out

    def _cores(self) -> list[int]:
        out: list[int] = []
        if self.numa_first:
            for s in self._sockets():
                out += self._sorted("core", self._present("core", self.units["socket"][s]))
        else:
            for n in self._numas():
                out += self._sorted("core", self._present("core", self.units["numa"][n]))
        return out

    # ---- taking
    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.free)

    def take(self, cpus: Iterable[int]) -> None:
        cpus = set(cpus)
        self.result |= cpus
        self.free -= cpus
        self.needed -= len(cpus)

    def _take_full(self, level: str, order: list[int], size: int | None) -> None:
        """Take every unit of ``order`` that was wholly free when the step began (units of one
        level are disjoint, so none stops being free meanwhile) while a whole one is needed.
        ``size``: a free unit's size (upstream compares with CPUsPerSocket / CPUsPerCore), or
        None for the unit's own size (NUMA nodes)."""
        members = self.units[level]
        whole = [u for u in order if len(members[u] & self.free) == (len(members[u]) if size is None else size)]
        for u in whole:
            if self.needs(len(members[u])):
                self.take(members[u])

    def take_full_numa_nodes(self) -> None:
        self._take_full("numa", self._numas(), None)

    def take_full_sockets(self) -> None:
        self._take_full("socket", self._sockets(), self.topo.cpus_per_socket())

    def take_full_cores(self) -> None:
        self._take_full("core", self._cores(), self.topo.cpus_per_core())

    def take_remaining_cpus(self) -> None:
        order: list[int] = []
        for core in self._cores():
            order += sorted(self.units["core"][core] & self.free)
        for c in order:
            self.take((c,))
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
