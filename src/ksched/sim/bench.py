"""``ksched bench``: upstream scheduler_perf workloads, run in-process against the embedded store
with informers and the full binding path, timed over the measured pods only.

Workloads follow ``test/integration/scheduler_perf`` (templates in ``templates/``, counts from
the ``*_test.yaml`` files): node and pod templates, init pods, measured pods. Throughput is
measured pods bound divided by the wall time from the moment they exist in the store until the
last of them is bound (or, for workloads with unschedulable pods, has been attempted).

Steady-state workloads (``Workload.steady``, scheduler_perf's ``createPods`` with
``steadyState``): batches of the measured pods are created, scheduled and deleted (grace period
0) for the workload's duration; throughput is the pods bound over that time. ``allocResourceClaims``
(``Workload.alloc_init_claims``): the init ResourceClaims are allocated directly with the
structured allocator (nodes in name order, the first that fits), as upstream's op does.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from ksched.api.errors import ApiError, BindingConflict
from ksched.api.node import Node
from ksched.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import RealClock
from ksched.scheduler.config import SchedulerConfiguration, parse_configuration
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.breakdown import Breakdown, breakdown
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.workloads import WORKLOADS, Phase, Workload, node_default, pod_default

__all__ = ["WORKLOADS", "Phase", "Workload", "median_run", "node_default", "peak_rss_mib", "pod_default",
           "run_workload"]

Manifest = dict[str, Any]



def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    i = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[i]


def _create(store: Store, made: Manifest | list[Manifest]) -> None:
    for o in made if isinstance(made, list) else [made]:
        store.create(o, owned=True)


def _create_phase(store: Store, phase: Phase, prefix: str) -> None:
    for i in range(phase.count):
        _create(store, phase.make(f"{prefix}-{i}", phase.namespace))


def _setup_cluster(store: Store, w: Workload, n_nodes: int) -> None:
    for i in range(n_nodes):
        store.create(w.make_node(i), owned=True)
        if w.node_objects is not None:
            for o in w.node_objects(i):
                store.create(o, owned=True)
    for o in w.objects:
        store.create(o, owned=True)


def run_workload(w: Workload, size: str = "full", seed: int = 0, nodes: int | None = None,
                 measured: int | None = None, init: int | None = None,
                 config: SchedulerConfiguration | None = None, timeout: float = 3600.0,
                 phases: bool = False, batching: bool = True, duration: float | None = None,
                 batches: int | None = None) -> dict[str, Any]:
    """Run one workload in this process; returns the JSON-able result.

    The measured phase ends when every measured pod is bound, or when nothing more can happen
    (pods that cannot fit); a workload's routine keeps creating its pods on the wall clock
    while it runs. ``phases``: also time the main phases of the cycles (``breakdown_us_per_pod``,
    see ``ksched.sim.breakdown``). ``batching``: opportunistic batching (the OpportunisticBatching
    feature, on by default). ``duration``: a steady-state workload's measured time (seconds);
    ``batches``: instead, exactly that many batches (tests)."""
    with contextlib.ExitStack() as stack:
        timing = stack.enter_context(breakdown()) if phases else None
        return _run_workload(w, size, seed, nodes, measured, init, config, timeout, timing, batching, duration,
                             batches)


# scheduler_perf runs an API server and the scheduler, no kube-controller-manager; the CSI
# volume workload's claims are bound by the PV controller; the DRA workloads add the resourceclaim
# controller (scheduler_perf starts it for them).
BENCH_CONTROLLERS = ("persistentvolume-binder",)
# As upstream's scheduler_perf API server: its pod templates state their priority without a
# PriorityClass, and no service accounts are made.
BENCH_DISABLED_ADMISSION = ("ServiceAccount", "Priority")


def _run_workload(w: Workload, size: str, seed: int, nodes: int | None, measured: int | None, init: int | None,
                  config: SchedulerConfiguration | None, timeout: float, timing: Breakdown | None,
                  batching: bool = True, duration: float | None = None,
                  batches: int | None = None) -> dict[str, Any]:
    n_nodes, init_counts, n_measured = _counts(w, size, nodes, measured, init)
    if config is None:
        config = parse_configuration(w.config) if w.config else parse_configuration({})
    clock = RealClock()
    cluster = EmbeddedCluster(clock, controllers=(*BENCH_CONTROLLERS, *w.controllers), auto_create_namespaces=True,
                              disable_admission_plugins=BENCH_DISABLED_ADMISSION)
    store, client = cluster.store, cluster.client
    informers = InformerFactory(client)
    sched = Scheduler(client, config, clock=clock, informers=informers, seed=seed, batching=batching)
    durations: list[float] = []
    sched.metrics_observer = durations.append
    t0 = time.perf_counter()
    _setup_cluster(store, w, n_nodes)
    for j, (phase, cnt) in enumerate(zip(w.init, init_counts)):
        _create_phase(store, Phase(cnt, phase.make, phase.namespace), f"init{j}")
    sched.run_until_idle()
    store.finalize_expired()
    if w.alloc_init_claims:
        allocate_claims(store, "init")
        sched.run_until_idle()
    setup_s = time.perf_counter() - t0
    init_scheduled = sched.scheduled
    steady = w.steady
    if steady is None:
        _create_phase(store, Phase(n_measured, w.measured.make, w.measured.namespace), "measured")
    measured_ns = w.measured.namespace
    gc.collect()
    gc.freeze()
    before = sched.scheduled
    attempts_before = len(durations)
    routine = w.routine
    routine_created = 0
    bound_names: set[str] = set()

    def count_bound(etype: str, kind: str, obj: Any, rv: int) -> None:
        # A commit hook, not a watch: the harness should cost the loop next to nothing.
        if kind == "Pod" and etype == "MODIFIED" and obj.node_name and obj.namespace == measured_ns \
                and obj.name.startswith("measured-"):
            bound_names.add(obj.name)

    store.on_commit.append(count_bound)
    if timing is not None:
        timing.reset()
    start = time.perf_counter()
    cpu_start = time.process_time()
    next_routine = start + routine.interval if routine is not None else float("inf")
    created = 0
    if steady is not None:
        created = _steady_state(store, sched, w.measured, n_measured,
                                steady.duration if duration is None else duration, bound_names, timeout, batches)
    while steady is None:
        progressed = sched.step()
        bound_measured = len(bound_names)
        now = time.perf_counter()
        if routine is not None and now >= next_routine:
            _create(store, routine.make(f"routine-{routine_created}", routine.namespace))
            routine_created += 1
            next_routine += routine.interval
        if store.next_deletion_deadline() is not None:
            store.finalize_expired()
        if bound_measured >= n_measured:
            break
        if not progressed and sched.idle() and store.next_deletion_deadline() is None:
            if routine is None or (now - start > 5 * routine.interval and bound_measured == 0):
                break
            if routine is not None and not sched.queue.has_poppable():
                # Only the routine can change anything now: wait for its next pod.
                time.sleep(max(0.0, min(next_routine - now, 0.05)))
        if now - start > timeout:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    store.on_commit.remove(count_bound)
    bound_measured = len(bound_names)
    gc.unfreeze()
    lat = durations[attempts_before:]
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problems = sched.cache.check_invariants()
    return {
        "workload": w.name,
        "size": size,
        "nodes": n_nodes,
        "init_pods": sum(init_counts),
        "init_scheduled": init_scheduled,
        "measured_pods": n_measured if steady is None else created,
        "measured_scheduled": bound_measured,
        "scheduled_total_during_measure": sched.scheduled - before,
        "routine_pods": routine_created,
        "seconds": round(elapsed, 4),
        # CPU seconds of this process during the measured phase: on a busy machine a steadier
        # figure than the wall clock (pods_per_cpu_second = measured pods bound / measured_cpu_seconds).
        "measured_cpu_seconds": round(cpu, 4),
        "pods_per_cpu_second": round(bound_measured / cpu, 1) if cpu > 0 else None,
        "pods_per_second": round(bound_measured / elapsed, 1) if elapsed > 0 else None,
        "attempts": len(lat),
        "p50_attempt_ms": round(_percentile(lat, 0.50) * 1000, 3),
        "p99_attempt_ms": round(_percentile(lat, 0.99) * 1000, 3),
        "peak_rss_mib": round(rss_kb / 1024, 1),
        "setup_seconds": round(setup_s, 2),
        "upstream_threshold": w.upstream_threshold,
        "target": w.target,
        "target_met": (bound_measured / elapsed >= w.target if elapsed > 0 else False)
        if w.target is not None and size == "full" and nodes is None and measured is None and init is None else None,
        "cache_consistent": not problems,
        "batched_pods": sum(fw.batch.batched_pods for fw in sched.profiles.values()),
        **({"breakdown_us_per_pod": timing.per_pod_us(bound_measured)} if timing is not None else {}),
        "config": {"seed": seed, "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
                   "profiles": [p.scheduler_name for p in config.profiles],
                   "python": sys.version.split()[0]},
    }


def _steady_state(store: Store, sched: Scheduler, phase: Phase, batch: int, duration: float, bound: set[str],
                  timeout: float, batches: int | None = None) -> int:
    """Batches of ``batch`` pods: created, scheduled until bound (or nothing more can happen),
    deleted; until ``duration`` seconds have passed (or ``batches`` batches). Returns the pods
    created."""
    start = time.perf_counter()
    created = 0
    while (created < batch * batches) if batches is not None else (time.perf_counter() - start < duration):
        names = [f"measured-{created + k}" for k in range(batch)]
        for n in names:
            _create(store, phase.make(n, phase.namespace))
        created += batch
        while not all(n in bound for n in names):
            if not sched.step() and sched.idle():
                break
            if time.perf_counter() - start > timeout:
                return created
        for n in names:
            with contextlib.suppress(ApiError):
                store.delete("Pod", phase.namespace, n, grace_period_seconds=0)
        sched.run_until_idle()
    return created


def allocate_claims(store: Store, namespace: str) -> int:
    """allocResourceClaims: allocate the unallocated ResourceClaims of ``namespace`` without
    pods, each on the first node (in name order) where the structured allocator finds devices
    for it; an allocation a node refused is not tried there again for an identical claim (the
    allocated devices only grow). Returns the claims allocated."""
    from ksched.scheduler.plugins.dynamicresources.allocator import AllocatedState, Allocator
    from ksched.scheduler.plugins.dynamicresources.manager import claim_contribution

    classes = {c.name: c for c in store.items("DeviceClass") if isinstance(c, DeviceClass)}
    slices = [s for s in store.items("ResourceSlice") if isinstance(s, ResourceSlice)]
    nodes = sorted((n for n in store.items("Node") if isinstance(n, Node)), key=lambda n: n.name)
    state = AllocatedState()
    pool_cache: dict[str, Any] = {}
    full_for: dict[str, int] = {}  # claim spec (JSON) -> nodes refused so far, from the start
    done = 0
    for c in sorted((c for c in store.items("ResourceClaim") if isinstance(c, ResourceClaim)
                     and c.namespace == namespace and c.allocation is None), key=lambda c: c.name):
        key = json.dumps(c.raw.get("spec"), sort_keys=True)
        alloc = Allocator(state, classes, slices, lambda: "", pool_cache=pool_cache)
        for i in range(full_for.get(key, 0), len(nodes)):
            got = alloc.allocate(nodes[i], [c])
            if not got:
                full_for[key] = i + 1
                continue
            raw = c.deepcopy_raw()
            raw.setdefault("status", {})["allocation"] = got[0]
            store.update_status(raw)
            for did, share, consumed in claim_contribution(None, got[0]):
                state.add_result(*did, share, consumed)
            done += 1
            break
    return done


def _counts(w: Workload, size: str, nodes: int | None, measured: int | None,
            init: int | None) -> tuple[int, list[int], int]:
    n_nodes = nodes if nodes is not None else (w.small_nodes if size == "small" else w.nodes)
    init_counts = [p.count for p in w.init]
    if size == "small" and w.small_init:
        init_counts = list(w.small_init)
    if init is not None:
        init_counts = [init] + [0] * (len(init_counts) - 1) if init_counts else [init]
    n_measured = measured if measured is not None else (w.small_measured if size == "small" else w.measured.count)
    return n_nodes, init_counts, n_measured


class _BindWatch:
    """Counts, from the store's commit hook, the pods bound and the pods dispatched (annotated
    for an instance), and wakes a waiter when a target is reached."""

    def __init__(self, store: Store) -> None:
        import threading

        from ksched.dispatch.instance import INSTANCE_ANNOTATION

        self._annotation = INSTANCE_ANNOTATION
        self.bound: set[str] = set()
        self.dispatched: set[str] = set()
        self.last_dispatch = 0.0
        self.target = -1
        self.done = threading.Event()
        store.on_commit.append(self._hook)

    def _hook(self, etype: str, kind: str, obj: Any, rv: int) -> None:
        if kind != "Pod" or etype != "MODIFIED":
            return
        key = obj.key
        if obj.node_name:
            if key not in self.bound:
                self.bound.add(key)
                if len(self.bound) >= self.target:
                    self.done.set()
        elif key not in self.dispatched and obj.annotations.get(self._annotation):
            self.dispatched.add(key)
            self.last_dispatch = time.perf_counter()

    def wait_for(self, target: int, timeout: float) -> bool:
        self.target = target
        if len(self.bound) >= target:
            return True
        self.done.clear()
        if len(self.bound) >= target:
            return True
        return self.done.wait(timeout)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux /proc; 0.0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def peak_rss_mib(pid: int) -> float | None:
    """A process's peak resident set so far (Linux /proc VmHWM), None where unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpu_snapshot(group: Any) -> dict[str, float]:
    out = {"apiserver": _cpu_seconds(os.getpid())}
    for name, p in group.processes.items():
        out[name] = _cpu_seconds(p.pid)
    return out


def _instance_stats(store: Store) -> dict[str, dict[str, int]]:
    from ksched.dispatch.instance import instance_from_lease

    out: dict[str, dict[str, int]] = {}
    for lease in store.items("Lease"):
        info = instance_from_lease(lease)  # type: ignore[arg-type]
        if info is not None:
            out[info.name] = {k: int(v) for k, v in info.stats.items()}
    return out


def run_workload_http(w: Workload, schedulers: int, size: str = "full", seed: int = 0, nodes: int | None = None,
                      measured: int | None = None, init: int | None = None, *, verbose: int = 0,
                      timeout: float = 900.0, lease_duration: float = 6.0, dispatch: bool = True) -> dict[str, Any]:
    """Run one workload over HTTP: the embedded API server in this process, the dispatcher and
    ``schedulers`` instances (``ksched run --instance NAME --dispatch``) as separate processes;
    with ``dispatch=False``, one plain ``ksched run`` instead (``ksched bench --remote``).

    Throughput is measured pods bound over the wall time from the first measured pod's creation
    to the last one's binding. ``conflicts`` counts bindings refused by the conflict resolver
    during that time; ``retries`` counts scheduling attempts beyond one per measured pod (the
    instances report their counters in their Leases, read before and after)."""
    import tempfile

    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.dispatch.processes import ProcessGroup, instance_names

    if schedulers < 1:
        raise ValueError("schedulers must be at least 1")
    if not dispatch and schedulers != 1:
        raise ValueError("without the dispatcher, one scheduler runs")
    n_nodes, init_counts, n_measured = _counts(w, size, nodes, measured, init)
    if w.config:
        raise ValueError(f"{w.name}: a workload with its own scheduler configuration cannot run over HTTP")
    cluster = EmbeddedCluster(RealClock(), controllers=(*BENCH_CONTROLLERS, *w.controllers), synchronous=False,
                              auto_create_namespaces=True, disable_admission_plugins=BENCH_DISABLED_ADMISSION)
    store = cluster.store
    if dispatch:
        store.enable_pod_conflicts()  # as ksched serve --schedulers N
    cluster.start()
    calls = {"bindings": 0, "conflicts": 0}
    orig_bind = store.bind

    def counting_bind(*a: Any, **kw: Any) -> Any:
        calls["bindings"] += 1
        try:
            return orig_bind(*a, **kw)
        except BindingConflict:
            calls["conflicts"] += 1
            raise

    store.bind = counting_bind  # type: ignore[method-assign]
    watch = _BindWatch(store)
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    tmp = tempfile.TemporaryDirectory(prefix="ksched-bench-")
    group = ProcessGroup(str(write_kubeconfig(f"{tmp.name}/kubeconfig", server.url)), verbose=verbose,
                         lease_duration=lease_duration)
    names = instance_names(schedulers) if dispatch else []
    error = ""
    try:
        t0 = time.perf_counter()
        _setup_cluster(store, w, n_nodes)
        if dispatch:
            for name in names:
                group.start_instance(name)
            group.start_dispatcher()
            deadline = time.monotonic() + 120
            while len(_instance_stats(store)) < schedulers:
                if time.monotonic() > deadline or not all(group.alive().values()):
                    raise RuntimeError(f"instances did not start: {group.alive()}")
                time.sleep(0.05)
        else:
            group.start_scheduler()
            _wait_remote_ready(store, watch, group, timeout=120)
        n_init = 0
        for j, (phase, cnt) in enumerate(zip(w.init, init_counts)):
            _create_phase(store, Phase(cnt, phase.make, phase.namespace), f"init{j}")
            n_init += cnt
        if not watch.wait_for(n_init, timeout):
            raise RuntimeError(f"init pods not bound in {timeout}s ({len(watch.bound)}/{n_init})")
        setup_s = time.perf_counter() - t0
        if dispatch:
            # Let every instance write fresh counters into its Lease (renewed every third of it).
            time.sleep(lease_duration / 3 + 0.5)
        before = _instance_stats(store)
        calls.update(bindings=0, conflicts=0)
        gc.collect()
        gc.freeze()
        cpu0 = _cpu_snapshot(group)
        start = time.perf_counter()
        _create_phase(store, Phase(n_measured, w.measured.make, w.measured.namespace), "measured")
        created = time.perf_counter() - start
        ok = watch.wait_for(n_init + n_measured, timeout)
        elapsed = time.perf_counter() - start
        cpu1 = _cpu_snapshot(group)
        rss = {name: peak_rss_mib(p.pid) for name, p in group.processes.items()}
        rss["apiserver"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        dispatch_s = max(0.0, watch.last_dispatch - start)
        if not ok:
            error = f"measured pods not all bound in {timeout}s"
        measured_calls = dict(calls)
    except RuntimeError as e:
        group.stop()
        server.stop()
        cluster.stop()
        tmp.cleanup()
        return {"workload": w.name, "transport": "http", "schedulers": schedulers, "error": str(e)}
    finally:
        gc.unfreeze()
    codes = group.stop()
    server.stop()
    cluster.stop()
    tmp.cleanup()
    after = _instance_stats(store)
    bound = len(watch.bound) - n_init
    per_instance: dict[str, dict[str, int]] = {}
    for name in names:
        a, b = after.get(name, {}), before.get(name, {})
        per_instance[name] = {k: a.get(k, 0) - b.get(k, 0) for k in ("scheduled", "attempts", "conflicts")}
    attempts = sum(v["attempts"] for v in per_instance.values())
    over = _overcommitted_nodes(store)
    out: dict[str, Any] = {
        "workload": w.name,
        "size": size,
        "transport": "http",
        "schedulers": schedulers,
        "dispatcher": dispatch,
        "nodes": n_nodes,
        "init_pods": sum(init_counts),
        "measured_pods": n_measured,
        "measured_scheduled": bound,
        "seconds": round(elapsed, 4),
        "pods_per_second": round(bound / elapsed, 1) if elapsed > 0 else None,
        "conflicts": measured_calls["conflicts"],
        "retries": max(0, attempts - bound) if dispatch else None,
        "binding_requests": measured_calls["bindings"],
        "create_seconds": round(created, 3),
        "dispatch_seconds": round(dispatch_s, 3),
        "per_instance": per_instance,
        # CPU seconds each process used during the measured phase ("apiserver": this process,
        # which serves the API and creates the pods).
        "cpu_seconds": {k: round(cpu1[k] - cpu0.get(k, 0.0), 2) for k in cpu1},
        # Peak resident set of each process at the end of the measured phase (MiB).
        "peak_rss_mib": rss,
        "overcommitted_nodes": over,
        "setup_seconds": round(setup_s, 2),
        "exit_codes": codes,
        "upstream_threshold": w.upstream_threshold,
        "config": {"seed": seed, "python": sys.version.split()[0], "cpus": os.cpu_count()},
    }
    if error:
        out["error"] = error
    return out


def _wait_remote_ready(store: Store, watch: _BindWatch, group: Any, timeout: float) -> None:
    """A plain ``ksched run`` says nothing when its informers have synced: a warm-up pod bound
    (then deleted) shows it schedules. Needs a node that fits a 1m/1Mi pod."""
    warm = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench-warmup", "namespace": "default"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
    store.create(warm, owned=True)
    deadline = time.monotonic() + timeout
    while "default/bench-warmup" not in watch.bound:
        if time.monotonic() > deadline or not all(group.alive().values()):
            raise RuntimeError(f"the scheduler did not start: {group.alive()}")
        time.sleep(0.05)
    store.delete("Pod", "default", "bench-warmup")
    watch.bound.discard("default/bench-warmup")


def _overcommitted_nodes(store: Store) -> int:
    nodes = {n.name: n for n in store.items("Node")}
    n = 0
    for name, u in store.accounting.usage.items():
        node = nodes.get(name)
        if node is None:
            continue
        alloc = node.allocatable  # type: ignore[attr-defined]
        if u.pods > alloc.get("pods", 0) or any(v > alloc.get(k, 0) for k, v in u.requested.items()):
            n += 1
    return n


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median pods/s (the lower middle one for an even count), with every
    run's pods/s; the first failed run if any failed."""
    failed = [r for r in runs if "error" in r or r.get("pods_per_second") is None]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r["pods_per_second"])
    out = dict(ordered[(len(ordered) - 1) // 2])
    out["runs_pods_per_second"] = [r["pods_per_second"] for r in runs]
    return out


def run_in_subprocess(name: str, size: str, seed: int, extra: list[str]) -> dict[str, Any]:
    """Run one workload in a fresh interpreter (so peak RSS is that workload's own)."""
    cmd = [sys.executable, "-m", "ksched.cli.main", "bench", name, "--size", size, "--seed", str(seed),
           "--in-process", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"workload": name, "error": out.stderr.strip()[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])
