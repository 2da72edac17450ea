"""The restart benchmark: a scheduler starting against a big, already-running cluster.

Upstream's scheduler pays a slow full sync after a restart (list everything, build the cache,
then start scheduling). This measures ksched doing the same in-process: ``nodes`` nodes and
``pods`` bound pods exist; a fresh Scheduler lists them through its informers, builds its cache,
and schedules one pending pod. Reported: seconds to a ready cache, seconds to the first
decision (the pending pod bound), and peak RSS of the process holding cluster and scheduler.
"""

from __future__ import annotations

import gc
import resource
import sys
import time
from typing import Any

from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import RealClock
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.workloads import node_default, pod_default

__all__ = ["run_restart"]


def run_restart(nodes: int = 5000, pods: int = 50000, seed: int = 0) -> dict[str, Any]:
    store = Store(RealClock(), auto_create_namespaces=True)
    t0 = time.perf_counter()
    for i in range(nodes):
        store.create(node_default(i), owned=True)
    for i in range(pods):
        p = pod_default(f"running-{i}")
        p["spec"]["nodeName"] = f"node-{i % nodes}"
        store.create(p, owned=True)
    store.create(pod_default("pending-0"), owned=True)
    setup_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    client = InProcessClient(store)
    sched = Scheduler(client, parse_configuration({}), clock=store.clock, informers=InformerFactory(client),
                      seed=seed)
    sched.sync()  # list + watch every kind, deliver to handlers: cache and queue are built
    cache_ready = time.perf_counter() - start
    while sched.scheduled == 0 and (sched.step() or not sched.idle()):
        pass
    first_decision = time.perf_counter() - start
    gc.unfreeze()
    bound = store.get("Pod", "default", "pending-0").node_name  # type: ignore[attr-defined]
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "benchmark": "Restart",
        "nodes": nodes,
        "bound_pods": pods,
        "cache_pods": sched.cache.pod_count(),
        "cache_ready_seconds": round(cache_ready, 3),
        "first_decision_seconds": round(first_decision, 3),
        "first_pod_bound_to": bound or None,
        "peak_rss_mib": round(rss_kb / 1024, 1),
        "setup_seconds": round(setup_s, 2),
        "cache_consistent": not sched.cache.check_invariants(),
        "config": {"seed": seed, "python": sys.version.split()[0]},
    }
