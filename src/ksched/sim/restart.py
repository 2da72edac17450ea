"""The restart benchmark: a scheduler starting against a big, already-running cluster.

Upstream's scheduler pays a slow full sync after a restart (list everything, build the cache,
then start scheduling). Two forms:

* ``run_restart`` (in-process): ``nodes`` nodes and ``pods`` bound pods exist in a store; a
  fresh Scheduler lists them through its informers, builds its cache, and schedules one pending
  pod. Reported: seconds to a ready cache, seconds to the first decision (the pending pod
  bound), and peak RSS of the process holding cluster and scheduler.
* ``run_restart_remote`` (over HTTP, what an operator sees): the same cluster served by the
  embedded API server in this process, and ``ksched run`` started as a new process against it.
  Reported: seconds from that process's start to its first request (interpreter, imports,
  client configuration), to its informers all watching (every list done), and to the first
  decision (the pending pod's binding committed in the store), with the scheduler process's CPU
  seconds and peak RSS at that point, and its CPU seconds at the first two marks.

  The API server is warmed first (``ApiServer.warm_up``: its field-validation schemas built),
  as a running cluster's is: the first write of a kind otherwise builds them while every other
  request waits, and the scheduler's first Lease held its lists for about half a second.

  The scheduler process reads ksched's modules from compiled bytecode, as an installed package
  does (pip and container images compile it): the bytecode is written beforehand (``compileall``,
  which rewrites only what changed) and the child may use it even where
  ``PYTHONDONTWRITEBYTECODE`` is set, as on the project's machine. Compiling the ~150 modules
  ``ksched run`` imports from source costs about 0.2 CPU seconds of start-up that no deployed
  scheduler pays; ``bytecode=False`` leaves the environment as it is.
"""

from __future__ import annotations

import gc
import resource
import sys
import threading
import time
from typing import Any

from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import RealClock
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.workloads import node_default, pod_default

__all__ = ["run_restart", "run_restart_remote"]


def _cluster(store: Store, nodes: int, pods: int) -> None:
    for i in range(nodes):
        store.create(node_default(i), owned=True)
    for i in range(pods):
        p = pod_default(f"running-{i}")
        p["spec"]["nodeName"] = f"node-{i % nodes}"
        store.create(p, owned=True)
    store.create(pod_default("pending-0"), owned=True)


def run_restart(nodes: int = 5000, pods: int = 50000, seed: int = 0) -> dict[str, Any]:
    store = Store(RealClock(), auto_create_namespaces=True)
    t0 = time.perf_counter()
    _cluster(store, nodes, pods)
    setup_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    cpu_start = time.process_time()
    client = InProcessClient(store)
    sched = Scheduler(client, parse_configuration({}), clock=store.clock, informers=InformerFactory(client),
                      seed=seed)
    sched.sync()  # list + watch every kind, deliver to handlers: cache and queue are built
    cache_ready = time.perf_counter() - start
    cache_ready_cpu = time.process_time() - cpu_start
    while sched.scheduled == 0 and (sched.step() or not sched.idle()):
        pass
    first_decision = time.perf_counter() - start
    first_decision_cpu = time.process_time() - cpu_start
    gc.unfreeze()
    bound = store.get("Pod", "default", "pending-0").node_name  # type: ignore[attr-defined]
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "benchmark": "Restart",
        "transport": "in-process",
        "nodes": nodes,
        "bound_pods": pods,
        "cache_pods": sched.cache.pod_count(),
        "cache_ready_seconds": round(cache_ready, 3),
        "first_decision_seconds": round(first_decision, 3),
        # CPU seconds of this process for the same two marks (steadier on a busy machine).
        "cache_ready_cpu_seconds": round(cache_ready_cpu, 3),
        "first_decision_cpu_seconds": round(first_decision_cpu, 3),
        "first_pod_bound_to": bound or None,
        "peak_rss_mib": round(rss_kb / 1024, 1),
        "setup_seconds": round(setup_s, 2),
        "cache_consistent": not sched.cache.check_invariants(),
        "config": {"seed": seed, "python": sys.version.split()[0]},
    }


def _compiled_env(compile_bytecode: bool) -> dict[str, str]:
    """The scheduler process's environment: with ``compile_bytecode``, ksched's bytecode
    written now and readable (and writable) by the child."""
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ)
    if not compile_bytecode:
        return env
    import ksched

    pkg = str(Path(ksched.__file__).resolve().parent)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", pkg], check=False, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return env


def run_restart_remote(nodes: int = 5000, pods: int = 10000, *, verbose: int = 0,
                       timeout: float = 120.0, bytecode: bool = True) -> dict[str, Any]:
    """``ksched run`` started against the embedded API server serving ``nodes`` nodes, ``pods``
    bound pods and one pending pod; timed from the process's start to the pending pod bound
    (ksched's modules read from compiled bytecode unless ``bytecode`` is False)."""
    import tempfile

    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.dispatch.processes import ProcessGroup
    from ksched.sim.bench import _cpu_seconds, peak_rss_mib

    store = Store(RealClock(), auto_create_namespaces=True)
    t0 = time.perf_counter()
    _cluster(store, nodes, pods)
    setup_s = time.perf_counter() - t0
    marks: dict[str, float] = {}
    watches: list[tuple[float, float]] = []  # (time, the scheduler's CPU seconds then)
    child: list[int] = []  # the scheduler process's pid, once started
    cpu_marks: dict[str, float] = {}

    def child_cpu() -> float:
        return _cpu_seconds(child[0]) if child else 0.0
    bound = threading.Event()
    target: dict[str, str] = {}
    orig_list, orig_watch = store.list, store.watch

    def timed_list(*a: Any, **kw: Any) -> Any:
        if "first_request" not in marks:
            marks["first_request"] = time.perf_counter()
            cpu_marks["first_request"] = child_cpu()
        return orig_list(*a, **kw)

    def timed_watch(*a: Any, **kw: Any) -> Any:
        watches.append((time.perf_counter(), child_cpu()))
        return orig_watch(*a, **kw)

    def hook(etype: str, kind: str, obj: Any, rv: int) -> None:
        if kind == "Pod" and obj.name == "pending-0" and obj.node_name and not bound.is_set():
            marks["bound"] = time.perf_counter()
            target["node"] = obj.node_name
            bound.set()

    store.list = timed_list  # type: ignore[method-assign]
    store.watch = timed_watch  # type: ignore[method-assign]
    store.on_commit.append(hook)
    server = ApiServer(store, "127.0.0.1", 0)
    server.warm_up()  # (see the module's docstring)
    server.start()
    tmp = tempfile.TemporaryDirectory(prefix="ksched-restart-")
    group = ProcessGroup(str(write_kubeconfig(f"{tmp.name}/kubeconfig", server.url)), verbose=verbose,
                         env=_compiled_env(bytecode))
    gc.collect()
    gc.freeze()
    error = ""
    rss = cpu = None
    try:
        start = time.perf_counter()
        proc = group.start_scheduler()
        child.append(proc.pid)
        if not bound.wait(timeout):
            error = f"the pending pod was not bound in {timeout}s"
        else:
            rss = peak_rss_mib(proc.pid)
            cpu = _cpu_seconds(proc.pid)
    finally:
        codes = group.stop()
        server.stop()
        tmp.cleanup()
        gc.unfreeze()

    def since(t: float | None) -> float | None:
        return round(t - start, 3) if t is not None else None

    # Informers watch right after their list: the last watch opened before the decision marks
    # every list done (a re-watch later would come after it).
    last_watch = max((w for w in watches if w[0] <= marks.get("bound", float("inf"))), default=None)
    out: dict[str, Any] = {
        "benchmark": "Restart",
        "transport": "http",
        "nodes": nodes,
        "bound_pods": pods,
        "first_request_seconds": since(marks.get("first_request")),
        "informers_watching_seconds": since(last_watch[0] if last_watch is not None else None),
        "first_decision_seconds": since(marks.get("bound")),
        "first_pod_bound_to": target.get("node"),
        "scheduler_cpu_seconds": cpu,
        # The scheduler's CPU seconds (/proc, 10 ms ticks) at its first request and once every
        # informer watched: start-up, lists, and (up to scheduler_cpu_seconds) the first cycle.
        "scheduler_cpu_seconds_at": {"first_request": cpu_marks.get("first_request"),
                                     "informers_watching": last_watch[1] if last_watch is not None else None},
        "scheduler_peak_rss_mib": rss,
        "setup_seconds": round(setup_s, 2),
        "exit_codes": codes,
        "config": {"python": sys.version.split()[0], "bytecode": bytecode},
    }
    if error:
        out["error"] = error
    return out
