"""``ksched bench --node-side``: the node side at scale on the virtual clock -- N nodes in three
zones, P pods with diurnal memory and CPU usage profiles (steps every 6 h, some pods ramping),
and a timeline over a simulated day: a zone fails at 6 h and comes back at 8 h, one node's
system usage spikes at 12 h (memory pressure, evictions), a node is drained at 18 h. Reports
the wall and CPU time of loading, of scheduling the pods, and of the simulated day, with what
happened (evictions by cause, placements)."""

from __future__ import annotations

import time
from typing import Any

from ksched.api.pod import Pod
from ksched.sim.simulation import Simulation
from ksched.sim.timeline import parse_timeline

__all__ = ["node_side_day", "run_node_side"]

ZONES = ("zone-a", "zone-b", "zone-c")
DAY = 24 * 3600.0


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "topology.kubernetes.io/zone": ZONES[i % 3]}},
            "status": {"capacity": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                       "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}}}


def _pod(i: int) -> dict[str, Any]:
    kind = i % 4
    if kind == 0:  # BestEffort, diurnal steps
        res: dict[str, Any] = {}
        usage = "0s: 500Mi, 6h: 1500Mi, 12h: 2500Mi, 18h: 1000Mi"
    elif kind == 1:  # Burstable, ramping past its request in the afternoon
        res = {"requests": {"cpu": "500m", "memory": "1Gi"}}
        usage = "ramp(0s: 512Mi, 12h: 2Gi, 24h: 512Mi)"
    else:  # Burstable / Guaranteed within their requests
        res = {"requests": {"cpu": "1", "memory": "2Gi"}}
        if kind == 3:
            res["limits"] = dict(res["requests"])
        usage = "0s: 1Gi, 8h: 1800Mi, 20h: 1Gi"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "default",
                         "annotations": {"ksched.io/usage-memory": usage, "ksched.io/usage-cpu": "250m"}},
            "spec": {"containers": [{"name": "c", "image": "img", "resources": res}]}}


def run_node_side(n_nodes: int, n_pods: int, seed: int = 0, seconds: float = DAY) -> dict[str, Any]:
    return node_side_day(n_nodes, n_pods, seed, seconds)[1]


def node_side_day(n_nodes: int, n_pods: int, seed: int = 0, seconds: float = DAY,
                  reference: bool = False) -> tuple[Simulation, dict[str, Any]]:
    """The benchmark's run and the simulation it ran; ``reference``: the node side's reference
    paths instead of its fast paths (``lazy_leases=False``, ``admitted_index=False``), for tests that
    hold them equal."""
    sim = Simulation(seed=seed, record_events=False, lazy_leases=not reference, admitted_index=not reference)
    w0, c0 = time.perf_counter(), time.process_time()
    sim.load([_node(i) for i in range(n_nodes)])
    sim.load([_pod(i) for i in range(n_pods)])
    w1, c1 = time.perf_counter(), time.process_time()
    sim.run(max_seconds=0)  # schedule what is there
    w2, c2 = time.perf_counter(), time.process_time()
    timeline = {"kind": "Timeline", "events": [
        {"at": 6 * 3600, "failZone": "zone-a"},
        {"at": 8 * 3600, "restoreZone": "zone-a"},
        {"at": 12 * 3600, "setUsage": {"node": "node-1", "memory": "60Gi"}},
        {"at": 13 * 3600, "setUsage": {"node": "node-1", "memory": "1Gi"}},
        {"at": 18 * 3600, "drain": "node-2"},
    ]}
    sim.use_timeline(parse_timeline(timeline, "node-side benchmark"))
    sim.history.sample_every = 3600.0
    result = sim.run(max_seconds=seconds)
    w3, c3 = time.perf_counter(), time.process_time()
    rows = sim.history.rows
    pods = [p for p in sim.store.items("Pod") if isinstance(p, Pod)]
    return sim, {
        "benchmark": "NodeSideDay", "nodes": n_nodes, "pods": n_pods, "seed": seed,
        "simulated_seconds": round(result.virtual_seconds, 1),
        "load_seconds": round(w1 - w0, 2), "schedule_seconds": round(w2 - w1, 2), "day_seconds": round(w3 - w2, 2),
        "total_seconds": round(w3 - w0, 2),
        # CPU seconds of this process: the steadier figure on a shared machine
        "load_cpu_seconds": round(c1 - c0, 2), "schedule_cpu_seconds": round(c2 - c1, 2),
        "day_cpu_seconds": round(c3 - c2, 2), "total_cpu_seconds": round(c3 - c0, 2),
        "evicted_by_kubelet": sum(1 for r in rows if r[2] == "evicted" and r[1] == "kubelet"),
        "evicted_by_taint_manager": sum(1 for r in rows if r[2] == "evicted" and r[1] == "taint-eviction-controller"),
        "placed_during_day": sum(1 for r in rows if r[2] == "placed"),
        "pods_running_at_end": sum(1 for p in pods if p.phase == "Running"),
        "eviction_passes": sim.kubelet.pressure.passes if sim.kubelet is not None else 0,
    }
