"""``ksched replay``: replay a GPU cluster trace (openb CSVs or the generic CSV/JSONL format of
``ksched.sim.trace``) with one GPU-sharing policy, under the FGD paper's protocol or on a
timeline with departures; JSON (or a table) on stdout, optionally the allocation curve plot."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "replay", help="replay a GPU trace with one GPU-sharing policy (FGD paper protocol)",
        description="Replay a GPU cluster trace (openb CSVs, or CSV/JSONL rows of arrival, departure, requests, "
                    "GPU share and models) with one policy: FGD, BestFit, DotProd, GpuPacking, GpuClustering, "
                    "Random, or FGDPack (ours). Protocol 'paper': pods shuffled with the seed, inflated by "
                    "sampling with replacement to TUNE x the cluster's GPU capacity, never leaving; 'timeline': "
                    "arrivals and departures at the trace's times on a virtual clock.")
    p.add_argument("--nodes", required=True, metavar="NODES", help="node list (CSV or JSONL)")
    p.add_argument("--pods", required=True, metavar="PODS", help="pod list (CSV or JSONL)")
    p.add_argument("--policy", default="FGD", help="scoring policy (default FGD)")
    p.add_argument("--tune", type=float, default=1.3,
                   help="paper protocol: inflate requests to this multiple of GPU capacity (default 1.3; 0: as is)")
    p.add_argument("--seed", type=int, default=42, help="seed of the shuffle, the sampling and tie-breaks")
    p.add_argument("--protocol", choices=("paper", "timeline"), default="paper")
    p.add_argument("--no-shuffle", action="store_true", help="paper protocol: keep the trace order")
    p.add_argument("--format", choices=("json", "table"), default="json")
    p.add_argument("--plot", metavar="FILE", help="write the allocation curve (unallocated GPU %% against arrived "
                                                  "workload) to FILE (.png, .svg or .pdf)")
    p.add_argument("--placements", action="store_true", help="JSON: include every pod's node and GPUs")


def run(args: argparse.Namespace) -> int:
    from ksched.sim.replay import ReplayOptions, replay
    from ksched.sim.trace import TraceError, load_nodes, load_pods

    try:
        nodes = load_nodes(args.nodes)
        pods = load_pods(args.pods)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    from ksched.sim.compare import workload_name

    try:
        r = replay(nodes, pods, ReplayOptions(policy=args.policy, seed=args.seed, tune=args.tune,
                                              protocol=args.protocol, shuffle=not args.no_shuffle),
                   record_placements=args.placements, workload=workload_name(args.pods))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    d = r.to_dict(placements=args.placements)
    if args.plot:
        from ksched.sim.gpureport import save_curve_plot

        d["label"] = r.policy
        save_curve_plot({r.policy: [d]}, args.plot, f"{d['workload']}: {r.policy}, seed {r.seed}")
    if args.format == "json":
        json.dump(d, sys.stdout)
        sys.stdout.write("\n")
        return 0
    f = d["final"]
    print(f"policy          {d['policy']}")
    print(f"workload        {d['workload']}  (protocol {d['protocol']}, seed {d['seed']}, tune {d['tune']})")
    print(f"pods            {d['pods']}  scheduled {d['scheduled']}  failed {d['failed']}")
    print(f"GPU allocation  {f['gpu_alloc_pct']:.2f} %  (cluster of {d['total_gpus']} GPUs)")
    print(f"fragmentation   {f['frag_pct']:.2f} % of capacity, {f['frag_rate_pct']:.2f} % of idle")
    print(f"CPU / memory    {f['cpu_alloc_pct']:.2f} % / {f['mem_alloc_pct']:.2f} %")
    print(f"wall time       {d['seconds']:.2f} s")
    print()
    print("arrived %  GPU alloc %  unallocated %  frag %")
    for c in d["curve"]:
        if c["arrived_pct"] % 10 == 0:
            print(f"{c['arrived_pct']:9.0f}  {c['gpu_alloc_pct']:11.2f}  {100 - c['gpu_alloc_pct']:13.2f}  "
                  f"{c.get('frag_pct', 0):6.2f}")
    return 0
