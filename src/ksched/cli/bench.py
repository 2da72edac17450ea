"""``ksched bench``: upstream scheduler_perf workloads (same node and pod templates and counts)
run against the embedded store, in-process or over HTTP with several scheduler processes, and
the restart benchmark; one JSON object per workload on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched bench`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "bench", help="run upstream scheduler_perf workloads in-process and print JSON",
        description="Run scheduler_perf workloads (same node/pod templates and counts) in-process against the "
                    "embedded store, with informers and the full binding path. Prints one JSON object per "
                    "workload.")
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="workload names (default: SchedulingBasic)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--all", action="store_true", help="run every workload (each in its own process)")
    p.add_argument("--size", choices=("full", "small", "large"), default="full",
                   help="full: upstream's counts (5000 nodes); small: 500 nodes, finishes in seconds; "
                        "large: SimulateRealistic only (5000 nodes, 100k pods)")
    p.add_argument("--nodes", type=int, help="override the number of nodes")
    p.add_argument("--pods", type=int, help="override the number of measured pods")
    p.add_argument("--init-pods", type=int, help="override the number of init pods (the pre-allocated claims "
                   "of the SteadyState DRA workloads)")
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="steady-state workloads: override the measured time (upstream: 10 s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--schedulers", type=int, default=0, metavar="N",
                   help="over HTTP: serve the embedded API server and run the dispatcher and N scheduler "
                        "instances as separate processes against it; reports conflicts and retries too")
    p.add_argument("--restart", action="store_true",
                   help="the restart benchmark instead: a fresh scheduler lists 5000 nodes + 50000 bound pods "
                        "(small: 500 + 5000; --nodes/--pods override), builds its cache and schedules one pod; "
                        "with --remote, `ksched run` is started against the embedded API server over HTTP "
                        "(5000 nodes + 10000 bound pods; small: 500 + 1000) and timed from its start")
    p.add_argument("--gpu-replay", action="store_true",
                   help="the GPU trace-replay benchmark instead: ksched replay's FGD-paper protocol on an openb "
                        "trace, each --policy once per seed (--repeat seeds from --seed; default 42)")
    p.add_argument("--trace-dir", default=None, metavar="DIR",
                   help="--gpu-replay: the openb trace directory (default ../shared/data/openb)")
    p.add_argument("--trace-workload", default="default", metavar="NAME",
                   help="--gpu-replay: the openb pod list (default, cpu050, gpushare40, ...)")
    p.add_argument("--policy", default="FGD", metavar="P[,P...]",
                   help="--gpu-replay: the policies (FGD, BestFit, GpuPacking, GpuClustering, DotProd, Random, FGDPack)")
    p.add_argument("--node-side", action="store_true",
                   help="the node-side benchmark instead: 1000 nodes in three zones, 20000 pods with usage profiles "
                        "and a day-long timeline (zone failure, memory pressure, drain) on the virtual clock "
                        "(small: 100 nodes, 2000 pods; --nodes/--pods override)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run each workload N times (each in its own process) and report the run with the median "
                        "pods/s, with every run's figure in runs_pods_per_second")
    p.add_argument("--breakdown", action="store_true",
                   help="also report the microseconds per measured pod spent in each phase of the cycles "
                        "(in-process runs; the timers cost a few percent)")
    p.add_argument("--no-batching", action="store_true",
                   help="turn opportunistic batching (OpportunisticBatching, on in 1.36) off, in-process runs")
    p.add_argument("--apps", type=int, help="SimulateRealistic: override the number of apps")
    p.add_argument("--keep", metavar="DIR",
                   help="SimulateRealistic: write the generated manifests into DIR (kept) instead of a temporary "
                        "directory")
    p.add_argument("--remote", action="store_true",
                   help="over HTTP: serve the embedded API server and run one plain `ksched run` against it "
                        "in another process (no dispatcher)")


SIMULATE_REALISTIC = "SimulateRealistic"


def _run_simulate_realistic(args: argparse.Namespace) -> int:
    """``ksched simulate`` end to end on generated manifests (``ksched.sim.realistic``); with
    ``--repeat N`` each run in its own process, reporting the run with the median total time."""
    import subprocess

    from ksched.sim.realistic import run_simulate_realistic

    if args.workloads != [SIMULATE_REALISTIC] or args.all or args.schedulers or args.remote or args.restart \
            or args.breakdown:
        print(f"error: {SIMULATE_REALISTIC} runs alone, in-process", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if any(v is not None and v < 1 for v in (args.nodes, args.apps)) or (args.pods is not None and args.pods < 0):
        print("error: --nodes and --apps must be at least 1, --pods not negative", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.repeat == 1 or args.in_process:
        out = run_simulate_realistic(args.size, args.seed, args.nodes, args.pods, args.apps, args.keep)
        print(json.dumps(out), flush=True)
        return 0
    cmd = [sys.executable, "-m", "ksched.cli.main", "bench", SIMULATE_REALISTIC, "--in-process",
           "--size", args.size, "--seed", str(args.seed)]
    for flag, v in (("--nodes", args.nodes), ("--pods", args.pods), ("--apps", args.apps)):
        if v is not None:
            cmd += [flag, str(v)]
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(json.dumps({"workload": SIMULATE_REALISTIC, "error": done.stderr.strip()[-2000:]}), flush=True)
            return 1
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    ordered = sorted(runs, key=lambda r: r["total_seconds"])
    out = dict(ordered[(len(ordered) - 1) // 2])
    for k in ("load_seconds", "schedule_seconds", "total_seconds", "total_cpu_seconds", "peak_rss_mib"):
        out[f"runs_{k}"] = [r[k] for r in runs]
    print(json.dumps(out), flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the workloads, printing one JSON line each; 0, or EXIT_INVALID_INPUT for options that do
    not fit together."""
    from ksched.sim.bench import WORKLOADS, median_run, run_in_subprocess, run_workload

    if args.list:
        for name, mk in WORKLOADS.items():
            w = mk()
            thr = f", upstream threshold {w.upstream_threshold} pods/s" if w.upstream_threshold else ""
            print(f"{name}: {w.description}{thr}")
        print(f"{SIMULATE_REALISTIC}: `ksched simulate` end to end (load, validate, schedule, report) on generated "
              "manifests: nodes in 3 zones with pool labels, apps with topology spread, anti-affinity, node "
              "affinity or none (small 50/500, full 1000 nodes/20k pods, large 5000/100k)")
        return 0
    if args.gpu_replay:
        return _gpu_replay(args)
    if args.restart:
        return _restart(args)
    if getattr(args, "node_side", False):
        if args.workloads or args.all or args.schedulers or args.remote:
            print("error: --node-side runs the node-side benchmark alone", file=sys.stderr)
            return EXIT_INVALID_INPUT
        from ksched.sim.nodebench import run_node_side

        small = args.size == "small"
        n_nodes = args.nodes if args.nodes is not None else 100 if small else 1000
        n_pods = args.pods if args.pods is not None else 2000 if small else 20000
        if n_nodes < 3 or n_pods < 0:
            print("error: --node-side needs at least three nodes and no negative pod count", file=sys.stderr)
            return EXIT_INVALID_INPUT
        print(json.dumps(run_node_side(n_nodes, n_pods, args.seed)), flush=True)
        return 0
    if args.workloads and SIMULATE_REALISTIC in args.workloads:
        return _run_simulate_realistic(args)
    if args.size == "large":
        print(f"error: --size large is for {SIMULATE_REALISTIC} only", file=sys.stderr)
        return EXIT_INVALID_INPUT
    names = list(WORKLOADS) if args.all else (args.workloads or ["SchedulingBasic"])
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"error: unknown workload(s): {', '.join(unknown)} (see ksched bench --list)", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.schedulers < 0:
        print("error: --schedulers must be at least 1", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.remote and args.schedulers:
        print("error: --remote runs one plain scheduler; --schedulers N runs N dispatched instances: choose one",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.breakdown and (args.schedulers or args.remote):
        print("error: --breakdown times in-process runs only", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.no_batching and (args.schedulers or args.remote):
        print("error: --no-batching applies to in-process runs only", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.schedulers or args.remote:
        from ksched.sim.bench import run_workload_http

        for name in names:
            out = run_workload_http(WORKLOADS[name](), args.schedulers or 1, args.size, args.seed, args.nodes,
                                    args.pods, args.init_pods, verbose=args.verbose, dispatch=not args.remote)
            print(json.dumps(out), flush=True)
        return 0
    extra: list[str] = ["--breakdown"] if args.breakdown else []
    if args.no_batching:
        extra.append("--no-batching")
    if args.nodes is not None:
        extra += ["--nodes", str(args.nodes)]
    if args.pods is not None:
        extra += ["--pods", str(args.pods)]
    if args.init_pods is not None:
        extra += ["--init-pods", str(args.init_pods)]
    if args.duration is not None:
        extra += ["--duration", str(args.duration)]
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return EXIT_INVALID_INPUT
    for name in names:
        if args.repeat > 1:
            out = median_run([run_in_subprocess(name, args.size, args.seed, extra) for _ in range(args.repeat)])
        elif args.in_process or len(names) == 1:
            out = run_workload(WORKLOADS[name](), args.size, args.seed, args.nodes, args.pods, args.init_pods,
                               phases=args.breakdown, batching=not args.no_batching, duration=args.duration)
        else:
            out = run_in_subprocess(name, args.size, args.seed, extra)
        print(json.dumps(out), flush=True)
    return 0


def _restart(args: argparse.Namespace) -> int:
    """``ksched bench --restart [--remote]``: one JSON line (the median of ``--repeat`` runs by
    first decision, each run in its own process, with every run's figure)."""
    from ksched.sim.restart import run_restart, run_restart_remote

    if args.workloads or args.all or args.schedulers:
        print("error: --restart runs the restart benchmark alone", file=sys.stderr)
        return EXIT_INVALID_INPUT
    small = args.size == "small"
    n_nodes = args.nodes if args.nodes is not None else 500 if small else 5000
    default_pods = (1000 if small else 10000) if args.remote else (5000 if small else 50000)
    n_pods = args.pods if args.pods is not None else default_pods
    if n_nodes < 1 or n_pods < 0:
        print("error: --restart needs at least one node and no negative pod count", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.repeat > 1:
        import subprocess

        cmd = [sys.executable, "-m", "ksched.cli.main", "bench", "--restart", "--nodes", str(n_nodes),
               "--pods", str(n_pods), "--seed", str(args.seed), *(["--remote"] if args.remote else [])]
        runs: list[dict[str, Any]] = []
        for _ in range(args.repeat):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                runs.append({"benchmark": "Restart", "error": done.stderr.strip()[-2000:]})
            else:
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(median_restart(runs)), flush=True)
        return 0
    if args.remote:
        out = run_restart_remote(n_nodes, n_pods, verbose=args.verbose)
    else:
        out = run_restart(n_nodes, n_pods, args.seed)
    print(json.dumps(out), flush=True)
    return 0


def median_restart(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median first decision (the slower middle one for an even count), with
    every run's figure in ``runs_first_decision_seconds``; the first failed run if any failed."""
    failed = [r for r in runs if "error" in r or r.get("first_decision_seconds") is None]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r["first_decision_seconds"])
    out = dict(ordered[len(ordered) // 2])
    out["runs_first_decision_seconds"] = [r["first_decision_seconds"] for r in runs]
    return out


def _gpu_replay(args: argparse.Namespace) -> int:
    from ksched.scheduler.plugins.gpushare.policies import POLICIES
    from ksched.sim.replay_bench import DEFAULT_TRACE_DIR, run_gpu_replay_bench, trace_files
    from ksched.sim.trace import TraceError, load_nodes, load_pods

    if args.workloads or args.all or args.restart or args.schedulers or args.remote:
        print("error: --gpu-replay runs the trace-replay benchmark alone", file=sys.stderr)
        return EXIT_INVALID_INPUT
    policies = [p for p in args.policy.split(",") if p]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        print(f"error: unknown policy {', '.join(unknown) or '(none)'} (one of {', '.join(POLICIES)})",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return EXIT_INVALID_INPUT
    node_file, pod_file = trace_files(args.trace_dir or DEFAULT_TRACE_DIR, args.trace_workload)
    try:
        nodes, pods = load_nodes(node_file), load_pods(pod_file)
    except (OSError, TraceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    seed = args.seed if args.seed else 42
    seeds = list(range(seed, seed + args.repeat))
    for policy in policies:
        print(json.dumps(run_gpu_replay_bench(nodes, pods, policy, seeds, workload=args.trace_workload)), flush=True)
    return 0
