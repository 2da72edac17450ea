"""The FGD paper's reproduction matrix: 17 openb workloads x policies x seeds 42..51 at tune 1.3,
through ``ksched.sim.compare`` (the engine of ``ksched replay``/``ksched compare``), one JSON line
per run appended to OUT (a run already in OUT is skipped, so the matrix can be resumed); then
``--table`` prints the markdown table of docs/gpu-sharing.md from OUT.

    python scripts/gpu_matrix.py --data ../shared/data/openb --out /tmp/gpu/matrix.jsonl \
        --policies FGD,BestFit,GpuPacking,GpuClustering,DotProd,Random,FGDPack --jobs 2
    python scripts/gpu_matrix.py --out /tmp/gpu/matrix.jsonl --table
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ksched.sim.compare import PAPER_MEANS, CompareJob, run_job

WORKLOADS = ["default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80", "gpushare100", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30", "multigpu40", "multigpu50"]
PAPER = ("FGD", "BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random")


def _run(job: CompareJob) -> dict[str, object]:
    r = run_job(job)
    return {"w": job.workload, "p": job.policy, "s": job.seed, "a": r["final"]["gpu_alloc_pct"], "t": r["seconds"]}


def table(out: Path) -> str:
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in out.read_text().splitlines():
        r = json.loads(line)
        runs[(r["w"], r["p"])].append(r["a"])
    policies = [p for p in (*PAPER, "FGDPack") if any(k[1] == p for k in runs)]
    head = "| workload | " + " | ".join(policies) + " |"
    lines = [head, "|" + " --- |" * (len(policies) + 1)]
    for w in WORKLOADS:
        cells = []
        for p in policies:
            xs = runs.get((w, p), [])
            if not xs:
                cells.append("—")
                continue
            c = f"{statistics.fmean(xs):.2f}"
            if len(xs) < 10:
                c += f" ({len(xs)} seeds)"
            paper = PAPER_MEANS.get((w, p))
            if paper is not None:
                c += f" / {paper:.2f}"
            cells.append(c)
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/openb")
    ap.add_argument("--out", required=True)
    ap.add_argument("--policies", default=",".join(PAPER))
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    if a.table:
        print(table(out))
        return
    lo, _, hi = a.seeds.partition("-")
    done = set()
    if out.exists():
        done = {(r["w"], r["p"], r["s"]) for r in map(json.loads, out.read_text().splitlines())}
    d = Path(a.data)
    jobs = [CompareJob(w, p, s, nodes=str(d / "openb_node_list_gpu_node.csv"), pods=str(d / f"openb_pod_list_{w}.csv"))
            for s in range(int(lo), int(hi or lo) + 1) for w in WORKLOADS for p in a.policies.split(",")
            if (w, p, s) not in done]
    with ProcessPoolExecutor(a.jobs) as ex, out.open("a") as f:
        for r in ex.map(_run, jobs, chunksize=2):
            f.write(json.dumps(r) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
