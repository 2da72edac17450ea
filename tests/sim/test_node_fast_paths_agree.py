"""The node side's fast paths against its reference paths (the fast-path contract of
docs/architecture.md): a simulation whose kubelets hold their Lease renewals in memory until a
reader looks (``Simulation(lazy_leases=True)``, the default) ends exactly as one that writes a
Lease per renewal -- the same history (placements, evictions by whom, conditions, taints, at the
same times), the same usage samples, the same pods, nodes and Leases (only resourceVersions
differ) -- on the node-side benchmark's day at a tiny size and on random timelines of node
failures and restores at odd times."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.kubelet.nodestatus import NodeHeartbeats
from ksched.sim.nodebench import node_side_day
from ksched.sim.simulation import Simulation
from ksched.sim.timeline import parse_timeline

TIMINGS = ("seconds", "cpu_seconds")


def _state(sim: Simulation) -> dict[str, Any]:
    """Every Pod, Node and Lease as stored, without resourceVersions."""
    out: dict[str, Any] = {}
    for kind in ("Pod", "Node", "Lease"):
        objs = []
        for o in sim.store.items(kind):
            md = {k: v for k, v in o.raw.get("metadata", {}).items() if k != "resourceVersion"}
            objs.append({**o.raw, "metadata": md})
        out[kind] = sorted(objs, key=lambda r: (r["metadata"].get("namespace", ""), r["metadata"]["name"]))
    return out


def _outcome(sim: Simulation) -> dict[str, Any]:
    return {"rows": list(sim.history.rows), "samples": list(sim.history.samples), "state": _state(sim),
            "passes": sim.kubelet.pressure.passes if sim.kubelet is not None else 0}


def test_the_benchmark_day_ends_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[str] = []
    renew = NodeHeartbeats._renew

    def counted(self: NodeHeartbeats, name: str, now: float, create: bool = False) -> None:
        writes.append(name)
        renew(self, name, now, create)

    monkeypatch.setattr(NodeHeartbeats, "_renew", counted)
    ref, r1 = node_side_day(9, 60, seed=3, reference=True)
    ref_writes = len(writes)
    fast, r2 = node_side_day(9, 60, seed=3)
    fast_writes = len(writes) - ref_writes
    assert {k: v for k, v in r1.items() if not k.endswith(TIMINGS)} == {
        k: v for k, v in r2.items() if not k.endswith(TIMINGS)}
    assert r1["evicted_by_taint_manager"] > 0 and r1["evicted_by_kubelet"] > 0  # the day has both
    assert _outcome(fast) == _outcome(ref)
    # and the fast path wrote far fewer Leases (the reference: one per live node and renewal)
    assert fast_writes < ref_writes / 3


def _cluster(lazy: bool, events: list[dict[str, Any]], seed: int) -> Simulation:
    sim = Simulation(seed=seed, record_events=False, lazy_leases=lazy)
    zones = ("a", "b")
    sim.load([{"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": f"n{i}", "labels": {"topology.kubernetes.io/zone": zones[i % 2]}},
               "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}} for i in range(4)])
    sim.load([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default",
                                                              "annotations": {"ksched.io/usage-memory": "1Gi"}},
               "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                   "requests": {"cpu": "500m", "memory": "1Gi"}}}]}} for i in range(8)])
    sim.run(max_seconds=0)
    sim.use_timeline(parse_timeline({"kind": "Timeline", "events": events}, "test"))
    sim.history.sample_every = 600.0
    sim.run(max_seconds=4 * 3600)
    return sim


_events = st.lists(st.tuples(st.integers(1, 3 * 3600), st.sampled_from(["failNode", "restoreNode", "failZone",
                                                                         "restoreZone"]),
                             st.integers(0, 3)), min_size=1, max_size=6)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events, st.integers(0, 3))
def test_random_failures_end_the_same(raw: list[tuple[int, str, int]], seed: int) -> None:
    events = [{"at": at, op: (f"n{i}" if op.endswith("Node") else "ab"[i % 2])} for at, op, i in sorted(raw)]
    fast = _cluster(True, events, seed)
    ref = _cluster(False, events, seed)
    assert _outcome(fast) == _outcome(ref)
