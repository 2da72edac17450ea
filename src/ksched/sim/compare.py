"""Policy comparison: several policies (or scheduler configurations) on the same workloads and
seeds, run in parallel processes, summarized per (workload, policy) with mean and median over
seeds. ``ksched compare`` writes the runs as JSON, the summary as CSV and
:mod:`ksched.sim.gpureport` renders the HTML report.

Two kinds of run:

* a trace policy run: ``ksched replay``'s engine (:func:`ksched.sim.replay.replay`);
* a configuration run: the ordinary scheduler in a :class:`~ksched.sim.simulation.Simulation`
  with a KubeSchedulerConfiguration file, on the trace's objects (pods created in the paper
  protocol's order) or on a directory of manifests. Its curve is the allocation after each
  pod in binding order, against the requests of the pods created so far.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PAPER_MEANS", "CompareJob", "run_jobs", "summarize"]

# The artifact's expected_results (analysis_allo_discrete.csv, column 130, mean over seeds 42-51),
# default trace only: the paper's comparison figures (docs/gpu-sharing.md says where the others
# have none).
PAPER_MEANS: dict[tuple[str, str], float] = {
    ("default", "Random"): 87.47, ("default", "DotProd"): 90.85, ("default", "GpuClustering"): 91.88,
    ("default", "GpuPacking"): 92.00, ("default", "BestFit"): 93.08, ("default", "FGD"): 95.39,
}


@dataclass(slots=True)
class CompareJob:
    """One run: a workload (trace files or a manifest directory), a policy or a configuration
    file, a seed."""

    workload: str
    policy: str  # a policy name, or a label for ``config``
    seed: int
    nodes: str = ""
    pods: str = ""
    manifests: str = ""
    config: str = ""
    tune: float = 1.3
    protocol: str = "paper"
    extra: dict[str, Any] = field(default_factory=dict)


def workload_name(path: str) -> str:
    """``openb_pod_list_gpushare40.csv`` -> ``gpushare40``; other files: their stem."""
    stem = Path(path).stem
    return stem.removeprefix("openb_pod_list_")


def run_job(job: CompareJob) -> dict[str, Any]:
    """One run as a result dict (the replay JSON, plus workload/config fields)."""
    if job.config:
        d = _run_config(job)
    else:
        from ksched.sim.replay import ReplayOptions, replay
        from ksched.sim.trace import load_nodes, load_pods

        r = replay(load_nodes(job.nodes), load_pods(job.pods),
                   ReplayOptions(policy=job.policy, seed=job.seed, tune=job.tune, protocol=job.protocol),
                   workload=job.workload)
        d = r.to_dict()
    d["workload"] = job.workload
    d["label"] = job.policy
    return d


def _run_config(job: CompareJob) -> dict[str, Any]:
    from ksched.api.gpu import MILLI, node_gpus, pod_gpu_request
    from ksched.api.resources import pod_requests
    from ksched.scheduler.config import load_configuration
    from ksched.sim.simulation import Simulation

    t0 = time.perf_counter()
    cfg = load_configuration(job.config)
    sim = Simulation(cfg, seed=job.seed, record_events=False)
    if job.manifests:
        from ksched.api.loader import load_manifests

        res = load_manifests([job.manifests])
        if res.errors:
            raise ValueError("; ".join(str(e) for e in res.errors[:5]))
        sim.load(res.objects)
    else:
        from ksched.sim.replay import tune_pods
        from ksched.sim.trace import load_nodes, load_pods
        from ksched.sim.trace_objects import node_object, pod_object

        nodes = load_nodes(job.nodes)
        pods = load_pods(job.pods)
        rng = np.random.default_rng(job.seed)
        seq = tune_pods(pods, sum(n.gpus for n in nodes) * MILLI, job.tune, rng)
        sim.load([node_object(n) for n in nodes])
        for p in seq:
            sim.store.create(pod_object(p))
    sim.run()
    all_pods = list(sim.store.items("Pod"))
    all_nodes = list(sim.store.items("Node"))
    gpu_cap = sum(node_gpus(n).count for n in all_nodes) * MILLI
    cpu_cap = sum(n.allocatable.get("cpu", 0) for n in all_nodes)
    mem_cap = sum(n.allocatable.get("memory", 0) for n in all_nodes)

    def gpu_total(p: Any) -> int:
        try:
            g = pod_gpu_request(p)
        except ValueError:
            return 0
        return g.total if g is not None else 0

    bound = [p for p in all_pods if p.node_name]
    arrived = np.cumsum([gpu_total(p) for p in all_pods]) if all_pods else np.zeros(0)
    # The allocation as pods were created: pod i contributes once it is bound.
    used = np.cumsum([gpu_total(p) if p.node_name else 0 for p in all_pods]) if all_pods else np.zeros(0)
    cap = gpu_cap or 1
    from ksched.sim.replay import curve_columns

    arrived_pct = arrived / cap * 100
    curve = curve_columns(arrived_pct, {"gpu_alloc_pct": used / cap * 100},
                          int(np.ceil(arrived_pct.max())) if len(arrived_pct) and gpu_cap else 0)
    cpu_used = sum(pod_requests(p).get("cpu", 0) for p in bound)
    mem_used = sum(pod_requests(p).get("memory", 0) for p in bound)
    final = {
        "gpu_alloc_pct": round(sum(gpu_total(p) for p in bound) / cap * 100, 4) if gpu_cap else 0.0,
        "cpu_alloc_pct": round(cpu_used / max(cpu_cap, 1) * 100, 4),
        "mem_alloc_pct": round(mem_used / max(mem_cap, 1) * 100, 4),
    }
    return {"policy": job.policy, "config": job.config, "seed": job.seed, "tune": job.tune, "protocol": "config",
            "pods": len(all_pods), "scheduled": len(bound), "failed": len(all_pods) - len(bound),
            "total_gpus": gpu_cap // MILLI, "final": final, "curve": curve,
            "seconds": round(time.perf_counter() - t0, 3)}


def run_jobs(jobs: Sequence[CompareJob], processes: int = 0,
             progress: Callable[[int, int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run every job, in ``processes`` worker processes (0: one per core; 1: in this process).
    Results come back in job order."""
    n = processes or os.cpu_count() or 1
    out: list[dict[str, Any]] = []
    if n <= 1 or len(jobs) <= 1:
        for i, j in enumerate(jobs):
            out.append(run_job(j))
            if progress is not None:
                progress(i + 1, len(jobs), out[-1])
        return out
    with ProcessPoolExecutor(min(n, len(jobs))) as ex:
        for i, r in enumerate(ex.map(run_job, jobs, chunksize=1)):
            out.append(r)
            if progress is not None:
                progress(i + 1, len(jobs), r)
    return out


def _stats(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "mean": round(statistics.fmean(xs), 4), "median": round(statistics.median(xs), 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4),
            "stdev": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0}


def summarize(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (workload, policy): final GPU allocation over seeds (mean, median, min, max),
    the paper's mean where the artifact has one, mean CPU/memory allocation, fragmentation,
    scheduled pods and seconds per run."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["workload"], r["label"]), []).append(r)
    rows = []
    for (w, p), rs in groups.items():
        alloc = _stats([r["final"]["gpu_alloc_pct"] for r in rs])
        row: dict[str, Any] = {"workload": w, "policy": p, "seeds": alloc["n"], "gpu_alloc_mean": alloc["mean"],
                               "gpu_alloc_median": alloc["median"], "gpu_alloc_min": alloc["min"],
                               "gpu_alloc_max": alloc["max"], "gpu_alloc_stdev": alloc["stdev"]}
        paper = PAPER_MEANS.get((w, p))
        row["paper_mean"] = paper
        row["diff_pp"] = round(alloc["mean"] - paper, 4) if paper is not None else None
        for k in ("cpu_alloc_pct", "mem_alloc_pct", "frag_pct", "frag_rate_pct"):
            vals = [r["final"][k] for r in rs if k in r["final"]]
            row[k.replace("_pct", "_mean")] = round(statistics.fmean(vals), 4) if vals else None
        row["scheduled_mean"] = round(statistics.fmean(r["scheduled"] for r in rs), 1)
        row["pods_mean"] = round(statistics.fmean(r["pods"] for r in rs), 1)
        row["seconds_mean"] = round(statistics.fmean(r["seconds"] for r in rs), 3)
        rows.append(row)
    return rows


def mean_curve(results: Sequence[dict[str, Any]], key: str = "gpu_alloc_pct") -> tuple[np.ndarray, np.ndarray]:
    """(arrived %, mean of ``key`` over the runs) on the columns every run has."""
    per: dict[float, list[float]] = {}
    for r in results:
        for c in r["curve"]:
            if key in c:
                per.setdefault(c["arrived_pct"], []).append(c[key])
    n = len(results)
    xs = sorted(k for k, v in per.items() if len(v) == n)
    return np.asarray(xs), np.asarray([statistics.fmean(per[x]) for x in xs])
