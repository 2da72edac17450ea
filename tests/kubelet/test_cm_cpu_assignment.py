"""The CPU manager's packed allocation (ksched.kubelet.cm.cpumanager.cpu_assignment), with
upstream's tables (``cpu_assignment_test.go`` commonTakeByTopologyTestCases and
TestTakeByTopologyNUMAPacked), the layout numbering, and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cm_topologies import (
    TOPO_DUAL_SOCKET_HT,
    TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT,
    TOPO_SINGLE_SOCKET_HT,
)
from ksched.kubelet.cm.cpumanager.cpu_assignment import CPUAllocationError, take_by_topology_numa_packed
from ksched.kubelet.cm.cpuset import format_cpuset, parse
from ksched.kubelet.cm.topology import build_topology

S, D, M = TOPO_SINGLE_SOCKET_HT, TOPO_DUAL_SOCKET_HT, TOPO_DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT

# (description, topology, available, request, expected)
CASES = [
    ("take zero cpus from single socket with HT", S, "0-7", 0, ""),
    ("take one cpu from single socket with HT", S, "0-7", 1, "0"),
    ("take one cpu from single socket with HT, some cpus are taken", S, "1,3,5-7", 1, "6"),
    ("take two cpus from single socket with HT", S, "0-7", 2, "0,4"),
    ("take all cpus from single socket with HT", S, "0-7", 8, "0-7"),
    ("take two cpus from single socket with HT, only one core totally free", S, "0-3,6", 2, "2,6"),
    ("take a socket of cpus from dual socket with HT", D, "0-11", 6, "0,2,4,6,8,10"),
    ("take a socket of cpus from dual socket with multi-numa-per-socket with HT", M, "0-79", 40, "0-19,40-59"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", M, "0-79", 20, "0-9,40-49"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
     M, "10-39,50-79", 20, "10-19,50-59"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
     M, "0-79", 60, "0-29,40-69"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
     M, "1-39,41-79", 60, "10-39,50-79"),
    ("take one cpu from dual socket with HT - core from Socket 0", D, "1-5,7-11", 1, "2"),
    ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second "
     "NUMA node", D, "0-11", 8, "0,6,2,8,4,10,1,7"),
    ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the "
     "fourth NUMA node", M, "0-79", 64, "0-29,40-69,30,31,70,71"),
]


@pytest.mark.parametrize(("desc", "topo", "available", "n", "expected"), CASES, ids=[c[0] for c in CASES])
def test_take_by_topology_numa_packed(desc: str, topo: object, available: str, n: int, expected: str) -> None:
    assert take_by_topology_numa_packed(topo, parse(available), n) == parse(expected)  # type: ignore[arg-type]


def test_not_enough_cpus_is_upstreams_error() -> None:
    with pytest.raises(CPUAllocationError) as e:
        take_by_topology_numa_packed(S, parse("0,2,4,6"), 5)
    assert str(e.value) == "not enough cpus available to satisfy request: requested=5, available=4"


def test_cpuset_list_format_round_trips() -> None:
    assert format_cpuset(parse("0-2,7,9-10")) == "0-2,7,9-10"
    assert format_cpuset([]) == "" and parse("") == frozenset()
    for bad in ("a", "3-1", "-1"):
        with pytest.raises(ValueError):
            parse(bad)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2), st.integers(1, 2), st.integers(1, 4), st.integers(1, 2), st.data())
def test_allocation_takes_exactly_the_request_from_the_free_cpus(sockets: int, nps: int, cpn: int, tpc: int,
                                                                 data: st.DataObject) -> None:
    topo = build_topology(sockets, nps, cpn, tpc)
    free = data.draw(st.frozensets(st.sampled_from(sorted(topo.cpus))))
    n = data.draw(st.integers(0, topo.num_cpus))
    if n > len(free):
        with pytest.raises(CPUAllocationError):
            take_by_topology_numa_packed(topo, free, n)
        return
    got = take_by_topology_numa_packed(topo, free, n)
    assert len(got) == n and got <= free
    # A request of whole cores on a machine with enough free whole cores gets whole cores.
    per = topo.cpus_per_core()
    free_cores = [c for c in {topo.details[x].core for x in free}
                  if all(x in free for x, i in topo.details.items() if i.core == c)]
    if n % per == 0 and len(free_cores) * per >= n:
        assert all(all(x in got for x, i in topo.details.items() if i.core == topo.details[c].core) for c in got)


def test_layout_numbering_reproduces_upstreams_multi_numa_machine() -> None:
    assert build_topology(2, 2, 10, 2).details == M.details
