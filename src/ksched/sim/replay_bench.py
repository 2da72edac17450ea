"""``ksched bench --gpu-replay``: how fast ``ksched replay`` runs the FGD paper's protocol on a
trace (by default the openb trace beside the project), one JSON object per policy.

Each policy runs once per seed (``seed``, ``seed + 1``, ...) in this process; the figures are
the replay's own wall time (loading the CSVs excluded, as the paper's ~10 minutes per run
exclude it), their median, the GPU allocation at the end, and the process's peak RSS.
"""

from __future__ import annotations

import resource
import statistics
from pathlib import Path
from typing import Any

from ksched.sim.replay import ReplayOptions, replay
from ksched.sim.trace import TraceNode, TracePod

__all__ = ["DEFAULT_TRACE_DIR", "run_gpu_replay_bench", "trace_files"]

DEFAULT_TRACE_DIR = "../shared/data/openb"


def trace_files(trace_dir: str | Path, workload: str) -> tuple[Path, Path]:
    """The openb node list and the pod list of ``workload`` (default, cpu050, ...) in ``trace_dir``."""
    d = Path(trace_dir)
    return d / "openb_node_list_gpu_node.csv", d / f"openb_pod_list_{workload}.csv"


def run_gpu_replay_bench(nodes: list[TraceNode], pods: list[TracePod], policy: str, seeds: list[int],
                         tune: float = 1.3, workload: str = "") -> dict[str, Any]:
    """Replay ``pods`` on ``nodes`` with ``policy`` once per seed; the JSON-able figures."""
    runs = [replay(nodes, pods, ReplayOptions(policy=policy, seed=s, tune=tune), workload=workload) for s in seeds]
    seconds = [r.seconds for r in runs]
    alloc = [r.final["gpu_alloc_pct"] for r in runs]
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "benchmark": "gpu-replay", "workload": workload, "policy": policy, "tune": tune, "seeds": seeds,
        "nodes": len(nodes), "pods_per_run": [r.pods for r in runs],
        "seconds": [round(s, 3) for s in seconds], "seconds_median": round(statistics.median(seconds), 3),
        "gpu_alloc_pct": [round(a, 2) for a in alloc], "gpu_alloc_pct_mean": round(statistics.fmean(alloc), 2),
        "peak_rss_mib": round(rss_kb / 1024, 1),
    }
