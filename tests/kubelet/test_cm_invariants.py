"""Invariants of a node's resource managers over random sequences of pods arriving and ending
(hypothesis): exclusive CPU sets never overlap and never include reserved CPUs, the shared pool
and the exclusive sets partition the machine, no device is held twice or handed out while
unhealthy, single-numa-node admissions are NUMA-aligned, and everything is free again when
every pod has ended."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.cm.container_manager import managers_for_node
from ksched.kubelet.lifecycle import PodAdmitAttributes

GPU = "example.com/gpu"
LAYOUT = {"sockets": 2, "coresPerNUMANode": 2, "threadsPerCore": 2,
          "devices": [{"resource": GPU, "numaNode": 0, "ids": ["d0", "d1"]},
                      {"resource": GPU, "numaNode": 1, "ids": ["d2"]},
                      {"resource": GPU, "ids": ["d3"]}]}


def node(policy: str, scope: str) -> Node:
    config = {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "topologyManagerScope": scope}
    return Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "annotations": {
        "ksched.io/topology": json.dumps(LAYOUT), "ksched.io/kubelet-config": json.dumps(config)}},
        "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7"}}})


def pod(i: int, containers: list[tuple[str, int]]) -> Pod:
    ctrs: list[dict[str, Any]] = []
    for j, (cpu, gpus) in enumerate(containers):
        res: dict[str, Any] = {"cpu": cpu, "memory": "1Gi"}
        if gpus:
            res[GPU] = str(gpus)
        ctrs.append({"name": f"c{j}", "image": "i", "resources": {"requests": res, "limits": res}})
    raw = mkpod(f"p{i}", containers=ctrs)
    raw["metadata"]["uid"] = f"u{i}"
    return Pod(raw)


containers = st.lists(st.tuples(st.sampled_from(["1", "2", "3", "4", "500m", "1500m"]), st.integers(0, 2)),
                      min_size=1, max_size=2)
ops = st.lists(st.one_of(st.tuples(st.just("add"), containers), st.tuples(st.just("end"), st.integers(0, 20)),
                         st.tuples(st.just("sick"), st.sets(st.sampled_from(["d0", "d1", "d2", "d3"])))),
               max_size=14)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]),
       st.sampled_from(["container", "pod"]), ops)
def test_managers_keep_their_books(policy: str, scope: str, steps: list[tuple[str, Any]]) -> None:
    m = managers_for_node(node(policy, scope))
    assert m.cpu is not None
    topo = m.cpu.topology
    running: dict[str, Pod] = {}
    unhealthy: frozenset[str] = frozenset()
    for i, (op, arg) in enumerate(steps):
        if op == "add":
            p = pod(i, arg)
            r = m.admit(PodAdmitAttributes(p, tuple(running.values())))
            if r.admit:
                running[p.uid] = p
                got = m.devices.devices_of(p.uid)
                assert not {d for res in got.values() for d in res.get(GPU, [])} & unhealthy
                if policy == "single-numa-node":  # what was pinned sits on one NUMA node per container / pod
                    cpus = m.cpu.assigned(p.uid)
                    per_container = {c.name: {topo.numa_node_of(x) for x in cpus.get(c.name, ())} |
                                     {0 if d in ("d0", "d1") else 1 for d in got.get(c.name, {}).get(GPU, [])
                                      if d != "d3"} for c in p.containers}
                    assert all(len(n) <= 1 for n in per_container.values())
                    if scope == "pod":
                        assert len(set().union(*per_container.values())) <= 1
            else:
                assert r.reason in ("TopologyAffinityError", "UnexpectedAdmissionError")
                assert m.cpu.assigned(p.uid) == {} and m.devices.devices_of(p.uid) == {}
        elif op == "end" and running:
            uid = sorted(running)[arg % len(running)]
            del running[uid]
            m.remove_pod(uid)
        elif op == "sick":
            unhealthy = frozenset(arg)
            m.set_unhealthy(unhealthy)
            assert m.device_capacity() == {GPU: (4, 4 - len(unhealthy))}
        # Books: exclusive sets disjoint, never reserved; pool + exclusive = machine.
        exclusive = [c for u in running for cs in m.cpu.assigned(u).values() for c in cs]
        assert len(exclusive) == len(set(exclusive))
        assert not set(exclusive) & m.cpu.reserved
        assert set(exclusive) | m.cpu.default == set(topo.cpus) and not set(exclusive) & m.cpu.default
        held = [d for u in running for res in m.devices.devices_of(u).values() for d in res.get(GPU, [])]
        assert len(held) == len(set(held)) and set(held) == m.devices.allocated.get(GPU, set())
    for uid in list(running):
        m.remove_pod(uid)
    assert m.cpu.default == set(topo.cpus) and not m.devices.allocated.get(GPU)
