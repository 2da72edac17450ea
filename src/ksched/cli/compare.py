"""``ksched compare``: several GPU policies (or scheduler configurations) on the same
workloads and seeds, in parallel processes; writes ``report.html`` (self-contained),
``results.json`` (every run) and ``summary.csv`` (per workload and policy)."""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT

__all__ = ["add_parser", "parse_seeds", "run"]


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``1,2,5`` or a mix."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        if sep and a:
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"seed range {part}: the end is below the start")
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    if not out:
        raise ValueError("no seeds")
    return out


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare GPU policies or scheduler configurations on the same workload; HTML report",
        description="Run several policies (trace replay) or KubeSchedulerConfigurations (the ordinary scheduler "
                    "in a simulation) on the same workloads and seeds, in parallel processes, and write a "
                    "self-contained HTML report with allocation and fragmentation curves and summary tables, "
                    "plus results.json and summary.csv.")
    p.add_argument("--nodes", metavar="NODES", help="node list (CSV or JSONL) of the trace workloads")
    p.add_argument("--pods", action="append", default=[], metavar="PODS",
                   help="a pod trace (repeat for several workloads)")
    p.add_argument("--manifests", action="append", default=[], metavar="DIR",
                   help="a directory (or file) of manifests: a workload for --config runs")
    p.add_argument("--policy", default="FGD,BestFit,GpuPacking,GpuClustering,DotProd,Random",
                   help="comma-separated policies for trace workloads")
    p.add_argument("--config", action="append", default=[], metavar="[LABEL=]FILE",
                   help="a KubeSchedulerConfiguration to compare (repeat); runs the ordinary scheduler")
    p.add_argument("--seeds", default="42", help="seeds, e.g. 42-51 or 1,2,3 (default 42)")
    p.add_argument("--tune", type=float, default=1.3)
    p.add_argument("--protocol", choices=("paper", "timeline"), default="paper")
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--title", default="")


def run(args: argparse.Namespace) -> int:
    from ksched.sim.compare import CompareJob, run_jobs, summarize, workload_name
    from ksched.sim.gpureport import render_html

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as e:
        print(f"error: --seeds: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    jobs: list[CompareJob] = []
    if args.pods and not args.nodes:
        print("error: --pods needs --nodes", file=sys.stderr)
        return EXIT_INVALID_INPUT
    for f in [args.nodes, *args.pods, *args.manifests, *(c.partition("=")[2] or c for c in args.config)]:
        if f and not Path(f).exists():
            print(f"error: {f}: no such file or directory", file=sys.stderr)
            return EXIT_INVALID_INPUT
    configs = []
    for c in args.config:
        label, eq, path = c.partition("=")
        configs.append((label, path) if eq else (Path(c).stem, c))
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    if not configs:
        from ksched.scheduler.plugins.gpushare.frag import TypicalPods
        from ksched.scheduler.plugins.gpushare.policies import make_policy

        for p in policies:
            try:
                make_policy(p, TypicalPods((), ()))
            except ValueError as e:
                print(f"error: --policy: {e}", file=sys.stderr)
                return EXIT_INVALID_INPUT
    for pods in args.pods:
        w = workload_name(pods)
        for s in seeds:
            if configs:
                jobs += [CompareJob(w, label, s, nodes=args.nodes, pods=pods, config=path, tune=args.tune)
                         for label, path in configs]
            else:
                jobs += [CompareJob(w, p, s, nodes=args.nodes, pods=pods, tune=args.tune, protocol=args.protocol)
                         for p in policies]
    for m in args.manifests:
        if not configs:
            print("error: --manifests workloads need --config", file=sys.stderr)
            return EXIT_INVALID_INPUT
        w = Path(m).name
        for s in seeds:
            jobs += [CompareJob(w, label, s, manifests=m, config=path) for label, path in configs]
    if not jobs:
        print("error: nothing to run: give --nodes and --pods, or --manifests with --config", file=sys.stderr)
        return EXIT_INVALID_INPUT

    def progress(i: int, n: int, r: dict[str, Any]) -> None:
        print(f"[{i}/{n}] {r['workload']} {r['label']} seed {r['seed']}: GPU alloc "
              f"{r['final']['gpu_alloc_pct']:.2f} % ({r['seconds']:.1f} s)", file=sys.stderr)

    try:
        results = run_jobs(jobs, args.jobs, progress)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    summary = summarize(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results), encoding="utf-8")
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    command = "ksched compare " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else ""
    (out / "report.html").write_text(render_html(results, summary, args.title, command), encoding="utf-8")
    json.dump({"report": str(out / "report.html"), "runs": len(results), "summary": summary}, sys.stdout)
    sys.stdout.write("\n")
    return 0
