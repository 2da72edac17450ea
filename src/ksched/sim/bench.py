"""``ksched bench``: upstream scheduler_perf workloads, run in-process against the embedded store
with informers and the full binding path, timed over the measured pods only.

Workloads follow ``test/integration/scheduler_perf`` (templates in ``templates/``, counts from
the ``*_test.yaml`` files): node and pod templates, init pods, measured pods. Throughput is
measured pods bound divided by the wall time from the moment they exist in the store until the
last of them is bound (or, for workloads with unschedulable pods, has been attempted).
"""

from __future__ import annotations

import copy
import gc
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.client.inprocess import InProcessClient
from ksched.clock import RealClock
from ksched.scheduler.config import SchedulerConfiguration, parse_configuration
from ksched.scheduler.scheduler import Scheduler

__all__ = ["WORKLOADS", "Workload", "run_workload"]

# ---------------------------------------------------------------- templates (scheduler_perf)


def node_default(i: int, labels: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> dict[str, Any]:
    cap = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    if extra:
        cap.update(extra)
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_default(name: str, namespace: str = "default", cpu: str = "100m", memory: str = "500Mi",
                labels: dict[str, str] | None = None, priority: int | None = None,
                spec: dict[str, Any] | None = None) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": memory}
    sp: dict[str, Any] = {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                          "ports": [{"containerPort": 80}],
                                          "resources": {"requests": dict(res), "limits": dict(res)}}]}
    if priority is not None:
        sp["priority"] = priority
    if spec:
        sp.update(copy.deepcopy(spec))
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": sp}


# ---------------------------------------------------------------- workloads


@dataclass(slots=True)
class Phase:
    """Pods of one template: ``count`` of them, in ``namespace``."""

    count: int
    make: Callable[[str, str], dict[str, Any]]  # (name, namespace) -> pod manifest
    namespace: str = "default"


@dataclass(slots=True)
class Workload:
    name: str
    description: str
    nodes: int
    make_node: Callable[[int], dict[str, Any]]
    init: list[Phase]
    measured: Phase
    upstream_threshold: float | None = None
    small_nodes: int = 500
    small_init: list[int] = field(default_factory=list)
    small_measured: int = 1000
    expect_unschedulable: bool = False
    config: dict[str, Any] | None = None
    objects: Callable[[], list[dict[str, Any]]] | None = None  # extra objects (PVs, classes, ...)


def _basic() -> Workload:
    return Workload(
        "SchedulingBasic", "5000 nodes, 1000 init pods, 10000 measured pods (pod-default)",
        5000, node_default,
        [Phase(1000, lambda n, ns: pod_default(n, ns))],
        Phase(10000, lambda n, ns: pod_default(n, ns)),
        upstream_threshold=680, small_nodes=500, small_init=[500], small_measured=1000)


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "SchedulingBasic": _basic,
}


# ---------------------------------------------------------------- running


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    i = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[i]


def _create_phase(store: Store, phase: Phase, prefix: str) -> None:
    for i in range(phase.count):
        store.create(phase.make(f"{prefix}-{i}", phase.namespace))


def run_workload(w: Workload, size: str = "full", seed: int = 0, nodes: int | None = None,
                 measured: int | None = None, init: int | None = None,
                 config: SchedulerConfiguration | None = None) -> dict[str, Any]:
    """Run one workload in this process; returns the JSON-able result."""
    n_nodes = nodes if nodes is not None else (w.small_nodes if size == "small" else w.nodes)
    init_counts = [p.count for p in w.init]
    if size == "small" and w.small_init:
        init_counts = list(w.small_init)
    if init is not None:
        init_counts = [init] + [0] * (len(init_counts) - 1) if init_counts else [init]
    n_measured = measured if measured is not None else (w.small_measured if size == "small" else w.measured.count)
    if config is None:
        config = parse_configuration(w.config) if w.config else parse_configuration({})
    clock = RealClock()
    store = Store(clock, auto_create_namespaces=True)
    client = InProcessClient(store)
    informers = InformerFactory(client)
    sched = Scheduler(client, config, clock=clock, informers=informers, seed=seed)
    durations: list[float] = []
    sched.metrics_observer = durations.append  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    if w.objects is not None:
        for o in w.objects():
            store.create(o)
    for i in range(n_nodes):
        store.create(w.make_node(i))
    for phase, cnt in zip(w.init, init_counts):
        _create_phase(store, Phase(cnt, phase.make, phase.namespace), f"init-{phase.namespace}")
    sched.run_until_idle()
    setup_s = time.perf_counter() - t0
    init_scheduled = sched.scheduled
    _create_phase(store, Phase(n_measured, w.measured.make, w.measured.namespace), "measured")
    gc.collect()
    gc.freeze()
    before = sched.scheduled
    attempts_before = len(durations)
    start = time.perf_counter()
    sched.run_until_idle()
    elapsed = time.perf_counter() - start
    gc.unfreeze()
    bound = sched.scheduled - before
    lat = durations[attempts_before:]
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problems = sched.cache.check_invariants()
    return {
        "workload": w.name,
        "size": size,
        "nodes": n_nodes,
        "init_pods": sum(init_counts),
        "init_scheduled": init_scheduled,
        "measured_pods": n_measured,
        "measured_scheduled": bound,
        "seconds": round(elapsed, 4),
        "pods_per_second": round(bound / elapsed, 1) if elapsed > 0 else None,
        "attempts": len(lat),
        "p50_attempt_ms": round(_percentile(lat, 0.50) * 1000, 3),
        "p99_attempt_ms": round(_percentile(lat, 0.99) * 1000, 3),
        "peak_rss_mib": round(rss_kb / 1024, 1),
        "setup_seconds": round(setup_s, 2),
        "upstream_threshold": w.upstream_threshold,
        "cache_consistent": not problems,
        "config": {"seed": seed, "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
                   "profiles": [p.scheduler_name for p in config.profiles],
                   "python": sys.version.split()[0]},
    }


def run_in_subprocess(name: str, size: str, seed: int, extra: list[str]) -> dict[str, Any]:
    """Run one workload in a fresh interpreter (so peak RSS is that workload's own)."""
    cmd = [sys.executable, "-m", "ksched.cli.main", "bench", name, "--size", size, "--seed", str(seed),
           "--in-process", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"workload": name, "error": out.stderr.strip()[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])
